/**
 * Call an interceptor service over MCP Streamable HTTP: one persistent, keep-alive
 * connection pool per service, the MCP handshake once (session id and negotiated revision
 * kept when the server issues them), then lean JSON-RPC POSTs for `interceptors/list` and
 * `interceptor/invoke`. Works against any MCP server (JSON or SSE responses, stateful or
 * stateless), not only ones built with this kit.
 */
import {
  batchItemError,
  FleetError,
  INTERCEPTORS_EXTENSION,
  INVOKE_BATCH_CAPABILITY,
  type InterceptorInfo,
  InterceptorMethod,
  type InvokeOptions,
  type InvokeParams,
  type Invoker,
  merged,
  ProtocolError,
  parseListResult,
  type RejectedDescriptor,
} from '@fleet/core';
import {
  LATEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';
import { Pool } from 'undici';
import { parseInvokeBatchResult } from './batch.ts';
import { type BufferedResponse, ExchangeTimeout, postBuffered, ResponseTooLarge } from './post.ts';
import { parseSseEvents } from './sse.ts';
import { activeTraceIds, outgoingTraceHeaders } from './trace.ts';

/** Options for {@link createRemoteService}. */
export interface RemoteServiceOptions {
  /** The service's MCP endpoint, e.g. `http://127.0.0.1:8081/mcp`. */
  url: string;
  /** Bearer token sent as `Authorization`. */
  token?: string | undefined;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** Most concurrent connections to the service. Default 128. */
  connections?: number;
  /** Budget for one HTTP exchange when the caller gives none. Default 30 000 ms. */
  requestTimeoutMs?: number;
  /** Reported in `initialize`. */
  clientInfo?: { name: string; version: string };
  /** Largest answer accepted from the service, in bytes (default 64 MiB): a bigger one is a transport error. */
  maxResponseBytes?: number;
}

/** What the server said in `initialize`. */
export interface Handshake {
  protocolVersion: string;
  serverInfo: { name: string; version?: string } | undefined;
  capabilities: Record<string, unknown>;
  /** True when the server declares the interceptors extension. */
  interceptorsCapability: boolean;
  /** Most invocations the server takes in one `fleet/interceptor/invokeBatch` (0: none). */
  invokeBatchLimit: number;
  sessionId: string | undefined;
}

/** A connection to one interceptor service. It is itself the {@link Invoker} for its interceptors. */
export interface RemoteService extends Invoker {
  readonly url: string;
  /** Run the MCP handshake (once; later calls share it). */
  connect(): Promise<Handshake>;
  /** `interceptors/list`, parsed liberally; unusable descriptors land in `rejected`. */
  list(
    event?: string,
  ): Promise<{ interceptors: InterceptorInfo[]; rejected: RejectedDescriptor[] }>;
  /** Close the connection pool. */
  close(): Promise<void>;
}

interface JsonRpcResponse {
  jsonrpc?: string;
  id?: unknown;
  result?: unknown;
  error?: { code?: unknown; message?: unknown; data?: unknown };
}

function parseSse(text: string, id: number): JsonRpcResponse | undefined {
  for (const event of parseSseEvents(text)) {
    try {
      const message = JSON.parse(event.data) as JsonRpcResponse;
      if (message.id === id) return message;
    } catch {
      // Not JSON: not ours.
    }
  }
  return undefined;
}

/** Connect to an interceptor service (lazily: nothing is sent until the first call). */
export function createRemoteService(options: RemoteServiceOptions): RemoteService {
  const url = new URL(options.url);
  const path = `${url.pathname}${url.search}`;
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const maxResponseBytes = options.maxResponseBytes ?? 64 * 1024 * 1024;
  const pool = new Pool(url.origin, {
    connections: options.connections ?? 128,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: requestTimeoutMs,
    bodyTimeout: requestTimeoutMs,
  });
  const baseHeaders: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...options.headers,
  };
  if (options.token) baseHeaders.authorization = `Bearer ${options.token}`;
  const clientInfo = options.clientInfo ?? { name: '@fleet/interceptor-kit', version: '0.1.0' };

  let nextId = 1;
  let handshake: Promise<Handshake> | undefined;
  let session: { id: string | undefined; version: string } | undefined;

  /**
   * The service refused our credentials. Every failure of the peer carries `data.reason`: what
   * went wrong without where the service lives, which is what a client may be shown.
   */
  const refused = (status: number) =>
    new FleetError('UNAUTHORIZED', `${options.url} refused the credentials (HTTP ${status})`, {
      data: { url: options.url, status, reason: `refused the credentials (HTTP ${status})` },
    });

  /** POST under `signal`, or when there is none, under a `timeoutMs` budget (default the service's). */
  const post = async (
    body: Record<string, unknown>,
    extraHeaders: Readonly<Record<string, string>>,
    signal: AbortSignal | undefined,
    timeoutMs = requestTimeoutMs,
  ): Promise<{
    status: number;
    headers: Record<string, unknown>;
    response: JsonRpcResponse | undefined;
  }> => {
    const headers: Record<string, string> = merged(baseHeaders, extraHeaders);
    if (session) {
      headers['mcp-protocol-version'] = session.version;
      if (session.id) headers['mcp-session-id'] = session.id;
    }
    let res: BufferedResponse;
    try {
      res = await postBuffered(pool, {
        path,
        headers,
        body: JSON.stringify(body),
        signal,
        timeoutMs: signal ? undefined : timeoutMs,
        maxBytes: maxResponseBytes,
      });
    } catch (error) {
      if (signal?.aborted) throw signal.reason ?? error;
      const code = (error as { code?: unknown }).code;
      const [reason, summary] =
        error instanceof ResponseTooLarge
          ? [
              `${options.url} answered with more than ${error.limit} bytes`,
              `answered with more than ${error.limit} bytes`,
            ]
          : error instanceof ExchangeTimeout
            ? [
                `${options.url} timed out after ${error.timeoutMs} ms`,
                `timed out after ${error.timeoutMs} ms`,
              ]
            : [
                `cannot reach ${options.url}: ${(error as Error).message}`,
                typeof code === 'string' ? `unreachable (${code})` : 'unreachable',
              ];
      throw new FleetError('TRANSPORT_ERROR', reason, {
        data: { url: options.url, reason: summary },
        cause: error,
      });
    }
    const { text } = res;
    const contentType = String(res.headers['content-type'] ?? '');
    let response: JsonRpcResponse | undefined;
    if (text) {
      if (contentType.includes('text/event-stream')) response = parseSse(text, body.id as number);
      else {
        try {
          response = JSON.parse(text) as JsonRpcResponse;
        } catch {
          response = undefined;
        }
      }
    }
    return { status: res.status, headers: res.headers, response };
  };

  /** Under `signal` when given, else under `timeoutMs` (default the service's budget). */
  interface RequestOptions {
    signal?: AbortSignal | undefined;
    timeoutMs?: number;
    headers?: Readonly<Record<string, string>>;
  }
  const request = async (
    method: string,
    params: unknown,
    { signal, timeoutMs, headers = {} }: RequestOptions = {},
    retried = false,
  ): Promise<unknown> => {
    const id = nextId++;
    const { status, response } = await post(
      { jsonrpc: '2.0', id, method, params },
      headers,
      signal,
      timeoutMs,
    );
    if (status === 404 && session?.id && !retried && method !== 'initialize') {
      // The server forgot our session (restart, expiry): handshake again, once.
      session = undefined;
      handshake = undefined;
      await connect();
      return request(method, params, { signal, timeoutMs, headers }, true);
    }
    if (status === 401 || status === 403) throw refused(status);
    if (response?.error && typeof response.error === 'object') {
      const { code, message, data } = response.error;
      throw new ProtocolError(
        typeof code === 'number' ? code : -32603,
        typeof message === 'string' ? message : 'error',
        data,
      );
    }
    if (!response || !('result' in response)) {
      throw new FleetError(
        'TRANSPORT_ERROR',
        `${options.url} did not answer with JSON-RPC (HTTP ${status})`,
        {
          data: { url: options.url, status, reason: `answered HTTP ${status} without JSON-RPC` },
        },
      );
    }
    return response.result;
  };

  const doConnect = async (): Promise<Handshake> => {
    const id = nextId++;
    const { status, headers, response } = await post(
      {
        jsonrpc: '2.0',
        id,
        method: 'initialize',
        params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo },
      },
      {},
      undefined,
    );
    if (status === 401 || status === 403) throw refused(status);
    const result = response?.result as
      | {
          protocolVersion?: unknown;
          capabilities?: Record<string, unknown>;
          serverInfo?: { name: string; version?: string };
        }
      | undefined;
    if (!result || typeof result.protocolVersion !== 'string') {
      throw new FleetError(
        'NOT_AN_INTERCEPTOR_SERVER',
        `${options.url} did not complete an MCP initialize (HTTP ${status})`,
        {
          data: { url: options.url, status, reason: 'did not complete an MCP initialize' },
        },
      );
    }
    if (!SUPPORTED_PROTOCOL_VERSIONS.includes(result.protocolVersion)) {
      throw new FleetError(
        'NOT_AN_INTERCEPTOR_SERVER',
        `${options.url} speaks unsupported protocol ${result.protocolVersion}`,
        {
          data: {
            url: options.url,
            protocolVersion: result.protocolVersion,
            reason: `speaks unsupported protocol ${result.protocolVersion}`,
          },
        },
      );
    }
    const sessionHeader = headers['mcp-session-id'];
    session = {
      id: typeof sessionHeader === 'string' ? sessionHeader : undefined,
      version: result.protocolVersion,
    };
    await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, {}, undefined);
    const capabilities = result.capabilities ?? {};
    const declared = (key: string) => {
      const group = capabilities[key];
      return typeof group === 'object' && group !== null && INTERCEPTORS_EXTENSION in group;
    };
    const batch = (capabilities.experimental as Record<string, unknown> | undefined)?.[
      INVOKE_BATCH_CAPABILITY
    ] as { maxItems?: unknown } | undefined;
    const maxItems = batch?.maxItems;
    return {
      protocolVersion: result.protocolVersion,
      serverInfo: result.serverInfo,
      capabilities,
      interceptorsCapability: declared('extensions') || declared('experimental'),
      invokeBatchLimit:
        typeof maxItems === 'number' && Number.isInteger(maxItems) && maxItems > 1 ? maxItems : 0,
      sessionId: session.id,
    };
  };

  /**
   * Batchable invocations started in the same turn of the event loop while the service has
   * one in flight go out as one `fleet/interceptor/invokeBatch` (each keeps its own trace
   * context in `_meta`): a burst of audit-mode invocations, or the invocations of many
   * concurrent chains, wakes the service once. While the service is idle (nothing in
   * flight) the batch goes as soon as the code that started it has run (`process.nextTick`,
   * after the microtasks it queued) instead of a turn of the event loop later, much as
   * Nagle's algorithm sends at once on an idle connection: at one client that turn was pure
   * latency. A lone invocation goes out as a plain `interceptor/invoke`, under its own
   * signal. An invocation whose signal aborted before its batch went out is dropped from it;
   * once sent, it settles with its batch (which its longest budget bounds): a caller that
   * must stop waiting earlier races the answer, as the chain engine does. Listening to every
   * item's signal would cost more than the batch saves.
   */
  const batcher = (() => {
    interface Pending {
      body: InvokeParams;
      signal: AbortSignal;
      trace: Readonly<Record<string, string>>;
      resolve(value: unknown): void;
      reject(error: unknown): void;
    }
    let queue: Pending[] = [];
    // Requests (a batch, or a lone invocation) the batcher has sent and not yet had answered.
    let inFlight = 0;
    const settled = () => {
      inFlight--;
    };
    const send = async (batch: Pending[]) => {
      const live = batch.filter((p) => {
        if (!p.signal.aborted) return true;
        p.reject(p.signal.reason);
        return false;
      });
      const only = live[0];
      if (live.length === 1 && only) {
        inFlight++;
        request(InterceptorMethod.INVOKE, only.body, {
          signal: only.signal,
          headers: only.trace,
        })
          .finally(settled)
          .then(only.resolve, only.reject);
        return;
      }
      if (live.length === 0) return;
      inFlight++;
      const budgetMs = Math.max(...live.map((p) => p.body.timeoutMs ?? requestTimeoutMs));
      try {
        // A batch is bounded by its longest budget; a plain timer, not a per-batch signal.
        const raw = await request(
          InterceptorMethod.INVOKE_BATCH,
          { invocations: live.map((p) => p.body) },
          { timeoutMs: budgetMs },
        );
        const answers = parseInvokeBatchResult(raw, live.length, options.url);
        live.forEach((p, i) => {
          const answer = answers[i];
          if (answer && 'result' in answer) p.resolve(answer.result);
          else p.reject(answer?.error);
        });
      } catch (error) {
        // An error answering the batch request as a whole is no answer of any one item's: a
        // -32602 refused the batch, not the items' params (see batchItemError).
        const itemError = batchItemError(error, live.length);
        for (const p of live) p.reject(itemError);
      } finally {
        inFlight--;
      }
    };
    return {
      add(
        body: InvokeParams,
        signal: AbortSignal,
        trace: Readonly<Record<string, string>>,
        limit: number,
      ): Promise<unknown> {
        if (signal.aborted) return Promise.reject(signal.reason);
        return new Promise((resolve, reject) => {
          // The first schedules the flush; the rest join it.
          if (queue.push({ body, signal, trace, resolve, reject }) > 1) return;
          const flush = () => {
            const all = queue;
            queue = [];
            for (let i = 0; i < all.length; i += limit) void send(all.slice(i, i + limit));
          };
          // An idle service (nothing in flight) gets what this burst of code starts (e.g. a
          // validator and a mutator it hosts both, under speculativeMutators) as soon as the
          // burst ends; a busy one gets what the whole turn of the event loop starts.
          if (inFlight === 0) process.nextTick(flush);
          else setImmediate(flush);
        });
      },
    };
  })();

  const connect = (): Promise<Handshake> => {
    handshake ??= doConnect().catch((error: unknown) => {
      handshake = undefined;
      throw error;
    });
    return handshake;
  };

  return {
    url: options.url,
    connect,

    async list(event) {
      await connect();
      const raw = await request(InterceptorMethod.LIST, event === undefined ? {} : { event });
      return parseListResult(raw);
    },

    async invoke(params: InvokeParams, { signal, batchable, traceHeaders }: InvokeOptions) {
      const { invokeBatchLimit } = await connect();
      let context = params.context;
      if (context?.timestamp === undefined || context.traceId === undefined) {
        const ids = context?.traceId === undefined ? activeTraceIds() : undefined;
        context = { timestamp: new Date().toISOString(), ...context, ...ids };
      }
      const trace = traceHeaders?.traceparent ? traceHeaders : outgoingTraceHeaders(context);
      const body: InvokeParams = merged(params, { context });
      if (trace.traceparent) body._meta = merged(params._meta, { traceparent: trace.traceparent });
      if (batchable && invokeBatchLimit > 1)
        return batcher.add(body, signal, trace, invokeBatchLimit);
      return request(InterceptorMethod.INVOKE, body, { signal, headers: trace });
    },

    async close() {
      await pool.close();
    },
  };
}
