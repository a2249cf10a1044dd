/**
 * Helpers for tests of services built with the kit (`@fleet/interceptor-kit/testing`; needs
 * vitest): cleanups that always run, raw JSON-RPC over HTTP with the checks every error
 * envelope must pass, a `gc()` for heap bounds, and a slow-loris client.
 */
import { request } from 'node:http';
import { connect } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, expect } from 'vitest';
import { parseSseEvents } from './sse.ts';

const cleanups: Array<() => Promise<unknown>> = [];

/** Run `cleanup` after the current test (last registered runs first), even when it fails. */
export function defer(cleanup: () => Promise<unknown>): void {
  cleanups.push(cleanup);
}

afterEach(async () => {
  while (cleanups.length > 0)
    await cleanups
      .pop()?.()
      .catch(() => undefined);
});

/** The session protocol revision (the SDK client's). */
export const SESSION_VERSION = '2025-11-25';

/** A 2025-11-25 `initialize` request (id 1) that opens a session. */
export const SESSION_INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: SESSION_VERSION,
    capabilities: {},
    clientInfo: { name: 'raw', version: '1' },
  },
} as const;

/** One JSON-RPC message as received. */
export interface Envelope {
  jsonrpc?: unknown;
  id?: unknown;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown> & { _meta?: Record<string, unknown> };
  error?: { code: number; message: string; data?: unknown };
}

/** A raw answer: status, headers, the final message and any SSE messages before it. */
export interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The JSON body, or the last SSE message (`{}` for an empty or non-JSON body). */
  json: Envelope;
  /** Every SSE message in order (empty for a plain-JSON answer). */
  events: Envelope[];
  text: string;
}

/**
 * POST `body` (text or bytes as given, anything else as JSON) to `url` with MCP's Accept
 * header and `headers`, through node:http: exact statuses, headers and envelopes. A
 * `transfer-encoding` header replaces the content length; `options.method` sends another
 * method without a body.
 */
export function rawPost(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  options: { signal?: AbortSignal; method?: string } = {},
): Promise<RawReply> {
  const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const post = options.method === undefined || options.method === 'POST';
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: options.method ?? 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(post && !('transfer-encoding' in headers)
            ? { 'content-length': Buffer.byteLength(payload) }
            : {}),
          ...headers,
        },
        ...(options.signal ? { signal: options.signal } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const sse = String(res.headers['content-type'] ?? '').startsWith('text/event-stream');
          const events = sse ? parseSseEvents(text).map((e) => JSON.parse(e.data) as Envelope) : [];
          let json: Envelope = {};
          try {
            json = sse ? (events.at(-1) ?? {}) : (JSON.parse(text) as Envelope);
          } catch {
            // empty (202) or not JSON
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, json, events, text });
        });
      },
    );
    req.on('error', reject);
    if (post) req.end(payload);
    else req.end();
  });
}

/**
 * Assert a well-formed error envelope with the given HTTP status and JSON-RPC code: version
 * 2.0, an `id` never null, echoed as `id` when given and left out otherwise.
 */
export function expectErrorReply(
  reply: RawReply,
  status: number,
  code: number,
  id?: unknown,
): void {
  expect({ status: reply.status, code: reply.json.error?.code }).toEqual({ status, code });
  expect(reply.json.jsonrpc).toBe('2.0');
  expect(reply.json.id).not.toBeNull();
  if (id === undefined) expect(reply.json).not.toHaveProperty('id');
  else expect(reply.json.id).toEqual(id);
}

/** A `global.gc`, exposing it at run time when the process was started without it. */
export function findGc(): (() => void) | undefined {
  const existing = (globalThis as { gc?: () => void }).gc;
  if (existing) return existing;
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
}

/** A client that sends a POST's headers, then one byte of its body every `intervalMs`. */
export interface SlowLoris {
  /** True once the server closed the connection. */
  readonly closed: boolean;
  /** Everything the server sent back (latin1). */
  received(): string;
  /** Resolves when the server closes the connection, or after `timeoutMs`. */
  untilClosed(timeoutMs?: number): Promise<boolean>;
  /** Stop dripping and close the socket. */
  stop(): void;
}

/**
 * Open a slow-loris request to `baseUrl` + `path`: a body that keeps arriving, a byte at a
 * time, so the socket is never idle and only a whole-request deadline can end it.
 */
export async function startSlowLoris(
  baseUrl: string,
  options: { path?: string; intervalMs?: number; declaredLength?: number } = {},
): Promise<SlowLoris> {
  const { path = '/mcp', intervalMs = 100, declaredLength = 1000 } = options;
  const target = new URL(baseUrl);
  const socket = connect(Number(target.port), target.hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  let received = '';
  let closed = false;
  const waiters: Array<() => void> = [];
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  socket.on('close', () => {
    closed = true;
    for (const wake of waiters.splice(0)) wake();
  });
  socket.on('error', () => undefined);
  socket.write(
    `POST ${path} HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\n` +
      `accept: application/json, text/event-stream\r\ncontent-length: ${declaredLength}\r\n\r\n`,
  );
  const drip = setInterval(() => {
    if (!socket.destroyed) socket.write(' ');
  }, intervalMs);
  drip.unref();
  return {
    get closed() {
      return closed;
    },
    received: () => received,
    untilClosed: (timeoutMs = 10_000) =>
      new Promise<boolean>((resolve) => {
        if (closed) return resolve(true);
        const timer = setTimeout(() => resolve(closed), timeoutMs);
        waiters.push(() => {
          clearTimeout(timer);
          resolve(true);
        });
      }),
    stop() {
      clearInterval(drip);
      socket.destroy();
    },
  };
}
