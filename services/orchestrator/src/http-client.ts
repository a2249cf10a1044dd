/**
 * The `fetch` the gateway gives the MCP SDK's HTTP client transport for backends: undici's
 * keep-alive connection pools instead of the global WHATWG fetch (much cheaper per call),
 * abort listeners removed when a call ends (the SDK passes one long-lived signal to every
 * call, which leaks a listener per call with the global fetch), the active W3C trace
 * context added to every request, and the per-call headers of {@link withCallHeaders}.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Readable } from 'node:stream';
import { context, propagation } from '@opentelemetry/api';
import { Agent, request } from 'undici';

/** The fetch signature the MCP SDK accepts. */
export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

type Method = 'GET' | 'POST' | 'DELETE' | 'PUT' | 'PATCH' | 'HEAD' | 'OPTIONS';

/** Headers for the POST that carries one JSON-RPC request. */
interface CallHeaders {
  method: string;
  headers: Readonly<Record<string, string>>;
}

const callHeaders = new AsyncLocalStorage<CallHeaders>();

/**
 * Run `fn` (which sends one JSON-RPC request through a pooled fetch) with extra HTTP headers
 * for that request: only the POST whose body is a request for `method` gets them, not other
 * traffic the call sets off in the same async context (a reply to a server-to-client
 * request, a reconnect).
 */
export function withCallHeaders<T>(
  method: string,
  headers: Readonly<Record<string, string>> | undefined,
  fn: () => T,
): T {
  if (headers === undefined || Object.keys(headers).length === 0) return fn();
  return callHeaders.run({ method, headers }, fn);
}

function bodyMethod(body: unknown): unknown {
  if (typeof body !== 'string') return undefined;
  try {
    return (JSON.parse(body) as { method?: unknown } | null)?.method;
  } catch {
    return undefined;
  }
}

/** Create a pooled fetch; `close()` releases its connections. */
export function createPooledFetch(options: { connections?: number } = {}): {
  fetch: FetchLike;
  close(): Promise<void>;
} {
  const agent = new Agent({
    connections: options.connections ?? 256,
    pipelining: 1,
    keepAliveTimeout: 30_000,
  });
  const pooledFetch: FetchLike = async (input, init = {}) => {
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, key) => {
      headers[key] = value;
    });
    propagation.inject(context.active(), headers);
    const call = callHeaders.getStore();
    if (call && init.method === 'POST' && bodyMethod(init.body) === call.method) {
      Object.assign(headers, call.headers);
    }
    // A per-call signal that follows the caller's, so no listener outlives the call.
    const outer = init.signal ?? undefined;
    const controller = new AbortController();
    const onAbort = () => controller.abort(outer?.reason);
    if (outer?.aborted) controller.abort(outer.reason);
    else outer?.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await request(String(input), {
        method: (init.method ?? 'GET') as Method,
        headers,
        body: init.body as string | undefined,
        dispatcher: agent,
        signal: controller.signal,
      });
      const responseHeaders = new Headers();
      for (const [key, value] of Object.entries(res.headers)) {
        if (Array.isArray(value)) for (const v of value) responseHeaders.append(key, v);
        else if (value !== undefined) responseHeaders.set(key, value);
      }
      const bodyless = res.statusCode === 204 || res.statusCode === 304 || init.method === 'HEAD';
      const body = bodyless ? null : (Readable.toWeb(res.body) as ReadableStream<Uint8Array>);
      if (bodyless) res.body.resume();
      res.body.once('close', () => outer?.removeEventListener('abort', onAbort));
      return new Response(body, { status: res.statusCode, headers: responseHeaders });
    } catch (error) {
      outer?.removeEventListener('abort', onAbort);
      throw error;
    }
  };
  return { fetch: pooledFetch, close: () => agent.close() };
}
