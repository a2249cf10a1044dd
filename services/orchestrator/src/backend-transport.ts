/**
 * The gateway's Streamable HTTP client transport for backends: the MCP SDK's `Transport`
 * contract, sent over an undici keep-alive pool and parsed from Node streams. The SDK's own
 * client transport goes through WHATWG `fetch`, `Response`, `TextDecoderStream` and an
 * event-stream transform for every call, which cost more CPU than the call itself on the
 * gateway's hot path; this one reads JSON bodies and event streams straight off the socket.
 *
 * What it does, as the Streamable HTTP transport specifies: every message is a POST; a
 * request's answer comes back as JSON or as an event stream (which may carry progress,
 * log lines and server-to-client requests first); `Mcp-Session-Id` from `initialize` goes
 * on every later request, as does `Mcp-Protocol-Version` once negotiated; after
 * `notifications/initialized` a GET stream carries the server's own messages and is reopened
 * with `Last-Event-ID` when it drops; a stream that ends before its request's answer
 * answers it with a connection-closed error so the call fails at once instead of timing out.
 * The gateway's own calls go through `call` (past the SDK client's protocol object); the SDK
 * client keeps the handshake, notifications and server-to-client requests.
 */
import { setMaxListeners } from 'node:events';
import { StringDecoder } from 'node:string_decoder';
import { merged } from '@fleet/core';
import { SseParser } from '@fleet/interceptor-kit';
import type {
  Transport,
  TransportSendOptions,
} from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ErrorCode,
  type JSONRPCMessage,
  McpError,
  type Progress,
  type Result,
} from '@modelcontextprotocol/sdk/types.js';
import { type Context, context, propagation } from '@opentelemetry/api';
import { Agent, type Dispatcher, request } from 'undici';

/** An HTTP status the backend answered with where a JSON-RPC message was expected. */
export class BackendHttpError extends Error {
  override readonly name = 'BackendHttpError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Options for {@link HttpBackendTransport}. */
export interface HttpBackendTransportOptions {
  /** Headers from the backend's config (e.g. its credentials), sent on every request. */
  headers?: Record<string, string> | undefined;
  /** Connection pool, owned by the caller (a backend keeps one across reconnects). */
  dispatcher: Agent;
  /**
   * Most bytes one message from the backend may take (a JSON body, or one event of a
   * stream); past it the gateway stops reading and the request it answers fails with
   * -32603 naming the limit. Default {@link DEFAULT_MAX_BACKEND_MESSAGE_BYTES}.
   */
  maxMessageBytes?: number | undefined;
}

/** Default of {@link HttpBackendTransportOptions.maxMessageBytes}: 64 MiB. */
export const DEFAULT_MAX_BACKEND_MESSAGE_BYTES = 64 * 1024 * 1024;

/** Why a backend message over `max` bytes was not read. */
export function tooLargeMessage(max: number): string {
  return `the backend sent a message of more than ${max} bytes (limits.maxBackendMessageBytes)`;
}

/** The answer a request gets in place of a backend message over `max` bytes: -32603 naming the limit. */
export function tooLargeResponse(id: string | number, max: number): JSONRPCMessage {
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: ErrorCode.InternalError,
      message: tooLargeMessage(max),
      data: { reason: 'limit_exceeded', limit: 'maxBackendMessageBytes', max },
    },
  };
}

/** `controller`, its signal without Node's listener limit. */
function unlimited(controller: AbortController): AbortController {
  setMaxListeners(0, controller.signal);
  return controller;
}

/** The keep-alive pool a backend's transports share. */
export function createBackendAgent(): Agent {
  return new Agent({ connections: 256, pipelining: 1, keepAliveTimeout: 30_000 });
}

const ACCEPT_POST = 'application/json, text/event-stream';
const POST_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'application/json',
  accept: ACCEPT_POST,
};
const GET_RETRY_INITIAL_MS = 1_000;
const GET_RETRY_MAX_MS = 30_000;

function isRequest(
  message: JSONRPCMessage,
): message is JSONRPCMessage & { id: string | number; method: string } {
  return 'method' in message && 'id' in message;
}

function isMessage(value: unknown): value is JSONRPCMessage {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    (value as { jsonrpc?: unknown }).jsonrpc === '2.0'
  );
}

/** Options of {@link HttpBackendTransport.call}. */
export interface DirectCallOptions {
  signal?: AbortSignal | undefined;
  onprogress?: ((progress: Progress) => void) | undefined;
  /** Budget; progress from the backend starts it again. */
  timeoutMs: number;
  headers?: Readonly<Record<string, string>> | undefined;
  trace?: Context | undefined;
}

interface DirectCall {
  resolve(result: Result): void;
  reject(error: unknown): void;
  onprogress: ((progress: Progress) => void) | undefined;
  /** (Re)start the timeout. */
  arm(): void;
}

/**
 * The signal of one call's POST: ends that POST alone when the call is cancelled or times out,
 * and every one when the transport closes. A backend does not answer a request it was told
 * is cancelled, so its response stream (or, from a backend that answers in JSON, its
 * response) would otherwise stay open for as long as the backend's session: one connection
 * of the pool and the stream's reader per cancelled call, for good.
 *
 * undici takes anything with `addEventListener` as a request's signal; this is that, without
 * an `AbortController` per call. It registers the one listener undici gives it on the
 * transport's signal too, so closing the transport still ends the POST.
 */
class PostSignal {
  aborted = false;
  reason: unknown = undefined;
  #listener: (() => void) | undefined;
  readonly #transport: AbortSignal;

  constructor(transport: AbortSignal) {
    this.#transport = transport;
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    this.#listener = listener;
    this.#transport.addEventListener('abort', listener, { once: true });
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    if (this.#listener !== listener) return;
    this.#listener = undefined;
    this.#transport.removeEventListener('abort', listener);
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listener = this.#listener;
    if (listener === undefined) return;
    this.removeEventListener('abort', listener);
    listener();
  }
}

/** What an aborted call rejects with (as the SDK's protocol does). */
export function cancelledError(reason: unknown): McpError {
  return reason instanceof McpError
    ? reason
    : new McpError(ErrorCode.RequestTimeout, String(reason));
}

/** One backend connection's transport. */
export class HttpBackendTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  sessionId?: string;

  readonly #url: URL;
  readonly #headers: Record<string, string>;
  readonly #dispatcher: Agent;
  readonly #maxMessageBytes: number;
  /**
   * Aborts every request in flight when the transport closes: each POST listens to it, so
   * it has as many listeners as the backend has concurrent calls (no listener limit, or
   * Node would warn of a leak past 10).
   */
  readonly #abort = unlimited(new AbortController());
  #protocolVersion: string | undefined;
  #started = false;
  #closed = false;
  #getRetryMs = GET_RETRY_INITIAL_MS;
  #getTimer: ReturnType<typeof setTimeout> | undefined;
  /** Requests sent by {@link call}, by id (strings, never the SDK client's numbers). */
  readonly #calls = new Map<string, DirectCall>();
  #nextCallId = 1;

  constructor(url: URL, options: HttpBackendTransportOptions) {
    this.#url = url;
    this.#headers = { ...options.headers };
    this.#dispatcher = options.dispatcher;
    this.#maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_BACKEND_MESSAGE_BYTES;
  }

  async start(): Promise<void> {
    if (this.#started) throw new Error('HttpBackendTransport already started');
    this.#started = true;
  }

  setProtocolVersion(version: string): void {
    this.#protocolVersion = version;
  }

  #requestHeaders(
    extra?: Readonly<Record<string, string>>,
    trace: Context = context.active(),
  ): Record<string, string> {
    const headers: Record<string, string> = merged(this.#headers, extra ?? {});
    if (this.sessionId !== undefined) headers['mcp-session-id'] = this.sessionId;
    if (this.#protocolVersion !== undefined)
      headers['mcp-protocol-version'] = this.#protocolVersion;
    propagation.inject(trace, headers);
    return headers;
  }

  /** The SDK client's traffic (handshake, replies to server requests, notifications). */
  async send(message: JSONRPCMessage, _options?: TransportSendOptions): Promise<void> {
    return this.#post(message);
  }

  /**
   * Send one request and resolve with its result, without the SDK client's protocol object
   * (its id, progress and timeout bookkeeping, promise chains and result schema parse cost
   * more than the HTTP exchange on a busy gateway). Everything else the backend sends on
   * the way (log lines, server-to-client requests, other progress) still reaches the SDK
   * client through `onmessage`. Semantics follow `Protocol.request`: a JSON-RPC error
   * rejects with an {@link McpError}; on timeout or abort the backend is told
   * (`notifications/cancelled`) and the call rejects; progress resets the timeout.
   */
  call(
    method: string,
    params: Record<string, unknown> | undefined,
    options: DirectCallOptions,
  ): Promise<Result> {
    const id = `fleet-${this.#nextCallId++}`;
    const { signal, onprogress, timeoutMs } = options;
    let sent = params;
    if (onprogress)
      sent = merged(params, {
        _meta: merged(params?._meta as object | undefined, { progressToken: id }),
      });
    const message = {
      jsonrpc: '2.0',
      id,
      method,
      ...(sent === undefined ? {} : { params: sent }),
    } as JSONRPCMessage;
    return new Promise<Result>((resolve, reject) => {
      if (signal?.aborted) {
        reject(cancelledError(signal.reason));
        return;
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const post = new PostSignal(this.#abort.signal);
      const settle = () => {
        this.#calls.delete(id);
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const cancel = (error: McpError, reason: unknown) => {
        if (!this.#calls.has(id)) return;
        settle();
        void this.#post({
          jsonrpc: '2.0',
          method: 'notifications/cancelled',
          params: { requestId: id, reason: String(reason) },
        } as JSONRPCMessage).catch((e: unknown) => this.onerror?.(e as Error));
        // The backend is told on its own POST; this one's answer is not coming.
        post.abort(error);
        reject(error);
      };
      const onAbort = () => cancel(cancelledError(signal?.reason), signal?.reason);
      const entry: DirectCall = {
        onprogress,
        arm: () => {
          clearTimeout(timer);
          // The error only when it happens: capturing a stack per call is a real cost.
          timer = setTimeout(() => {
            const error = new McpError(ErrorCode.RequestTimeout, 'Request timed out', {
              timeout: timeoutMs,
            });
            cancel(error, error);
          }, timeoutMs);
        },
        resolve: (value) => {
          settle();
          resolve(value);
        },
        reject: (error) => {
          settle();
          reject(error);
        },
      };
      this.#calls.set(id, entry);
      signal?.addEventListener('abort', onAbort, { once: true });
      entry.arm();
      this.#post(message, options.headers, options.trace, post).catch((error: unknown) => {
        if (this.#calls.get(id) === entry) entry.reject(error);
      });
    });
  }

  /** A message from the backend: the answer or progress of a direct call, else the SDK's. */
  #dispatch(message: JSONRPCMessage): void {
    const m = message as {
      id?: unknown;
      method?: string;
      params?: { progressToken?: unknown };
      result?: unknown;
      error?: { code: number; message: string; data?: unknown };
    };
    if (m.method === undefined) {
      const entry = typeof m.id === 'string' ? this.#calls.get(m.id) : undefined;
      if (entry) {
        if (m.error !== undefined)
          entry.reject(McpError.fromError(m.error.code, m.error.message, m.error.data));
        else if (typeof m.result === 'object' && m.result !== null && !Array.isArray(m.result))
          entry.resolve(m.result as Result);
        else
          entry.reject(
            new McpError(
              ErrorCode.InternalError,
              'the backend answered with a result that is not an object',
            ),
          );
        return;
      }
    } else if (m.method === 'notifications/progress') {
      const token = m.params?.progressToken;
      const entry = typeof token === 'string' ? this.#calls.get(token) : undefined;
      if (entry?.onprogress) {
        const { progressToken: _token, ...progress } = m.params as Record<string, unknown>;
        entry.arm();
        entry.onprogress(progress as Progress);
        return;
      }
    }
    this.onmessage?.(message);
  }

  /** POST one message; `signal` ends this POST alone (a call's), else only closing does. */
  async #post(
    message: JSONRPCMessage,
    extra?: Readonly<Record<string, string>>,
    trace?: Context,
    signal: PostSignal | AbortSignal = this.#abort.signal,
  ): Promise<void> {
    if (this.#closed) throw new Error('transport closed');
    const headers = this.#requestHeaders(
      extra === undefined ? POST_HEADERS : merged(extra, POST_HEADERS),
      trace,
    );
    const response = await request(this.#url, {
      method: 'POST',
      headers,
      body: JSON.stringify(message),
      dispatcher: this.#dispatcher,
      signal,
    });
    const sessionId = response.headers['mcp-session-id'];
    if (typeof sessionId === 'string' && sessionId) this.sessionId = sessionId;
    const status = response.statusCode;
    if (status === 202) {
      response.body.resume();
      if ('method' in message && message.method === 'notifications/initialized')
        this.#openGetStream();
      return;
    }
    if (status < 200 || status >= 300) {
      const text = await response.body.text().catch(() => '');
      throw new BackendHttpError(
        status,
        `Error POSTing to endpoint (HTTP ${status}): ${text.slice(0, 500)}`,
      );
    }
    const contentType = String(response.headers['content-type'] ?? '');
    const requestId = isRequest(message) ? message.id : undefined;
    if (contentType.includes('text/event-stream')) {
      // Not awaited: the answer may come after progress, log lines or nested requests.
      void this.#readStream(response.body, requestId, signal);
      return;
    }
    const text = await this.#readBody(response);
    if (text === undefined) {
      this.#tooLarge(requestId);
      return;
    }
    if (requestId === undefined && text.trim() === '') return;
    this.#deliverJson(text);
  }

  /** A JSON body as text; undefined (the rest left unread) when it is over the limit. */
  async #readBody(response: Dispatcher.ResponseData): Promise<string | undefined> {
    const declared = Number(response.headers['content-length']);
    if (declared > this.#maxMessageBytes) {
      response.body.destroy();
      return undefined;
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of response.body) {
      bytes += (chunk as Buffer).length;
      if (bytes > this.#maxMessageBytes) {
        response.body.destroy();
        return undefined;
      }
      chunks.push(chunk as Buffer);
    }
    return chunks.length === 1
      ? (chunks[0] as Buffer).toString('utf8')
      : Buffer.concat(chunks).toString('utf8');
  }

  /** A message over the limit: the request it answered (if any) fails, naming the limit. */
  #tooLarge(requestId: string | number | undefined): void {
    if (requestId === undefined) this.onerror?.(new Error(tooLargeMessage(this.#maxMessageBytes)));
    else this.#dispatch(tooLargeResponse(requestId, this.#maxMessageBytes));
  }

  #deliverJson(text: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      this.onerror?.(new Error(`backend sent a body that is not JSON: ${text.slice(0, 200)}`));
      return;
    }
    for (const item of Array.isArray(parsed) ? parsed : [parsed]) {
      if (isMessage(item)) this.#dispatch(item);
      else this.onerror?.(new Error('backend sent something that is not a JSON-RPC message'));
    }
  }

  /** Deliver a stream's messages; resolves with the stream's last event id when it ends. */
  async #readStream(
    body: Dispatcher.ResponseData['body'],
    requestId?: string | number,
    signal: PostSignal | AbortSignal = this.#abort.signal,
  ): Promise<string | undefined> {
    let answered = requestId === undefined;
    const decoder = new StringDecoder('utf8');
    let pending: JSONRPCMessage[] = [];
    const parser = new SseParser((event) => {
      if (event.event !== 'message') return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(event.data);
      } catch {
        this.onerror?.(new Error('backend sent an event that is not JSON'));
        return;
      }
      if (isMessage(parsed)) pending.push(parsed);
    });
    const deliver = async () => {
      const batch = pending;
      pending = [];
      for (let i = 0; i < batch.length; i++) {
        const message = batch[i] as JSONRPCMessage;
        if (!answered && 'id' in message && message.id === requestId && !('method' in message))
          answered = true;
        this.#dispatch(message);
        // The SDK handles a notification (e.g. progress) a microtask later but a response at
        // once, dropping the call's progress handler: let the notification land first.
        if (i < batch.length - 1 && 'method' in message) await Promise.resolve();
      }
    };
    // Bytes read since an event last ended: one event may not take more than the limit.
    let unended = 0;
    try {
      for await (const chunk of body) {
        parser.push(decoder.write(chunk as Buffer));
        if (pending.length > 0) unended = 0;
        else unended += (chunk as Buffer).length;
        await deliver();
        if (unended > this.#maxMessageBytes) {
          body.destroy();
          // The request this stream answers fails; past its answer (or on the GET stream) the
          // oversized event is only reported.
          this.#tooLarge(answered ? undefined : requestId);
          return parser.lastEventId;
        }
      }
      parser.push(decoder.end());
      await deliver();
    } catch (error) {
      // Ended on purpose (the call was cancelled, or the transport closed): nothing to report.
      if (!this.#closed && !signal.aborted)
        this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    }
    if (!answered && requestId !== undefined && !this.#closed && !signal.aborted) {
      this.#dispatch({
        jsonrpc: '2.0',
        id: requestId,
        error: {
          code: ErrorCode.ConnectionClosed,
          message: 'the backend closed the stream before answering',
        },
      });
    }
    return parser.lastEventId;
  }

  /** The standalone GET stream for the server's own messages; reopened when it drops. */
  #openGetStream(lastEventId?: string): void {
    if (this.#closed) return;
    void (async () => {
      let extra: Record<string, string> = { accept: 'text/event-stream' };
      if (lastEventId !== undefined) extra = { ...extra, 'last-event-id': lastEventId };
      let response: Dispatcher.ResponseData;
      try {
        response = await request(this.#url, {
          method: 'GET',
          headers: this.#requestHeaders(extra),
          dispatcher: this.#dispatcher,
          signal: this.#abort.signal,
        });
      } catch (error) {
        if (!this.#closed) this.#retryGetStream(lastEventId, error);
        return;
      }
      if (response.statusCode === 405) {
        // The server offers no standalone stream: nothing to listen to.
        response.body.resume();
        return;
      }
      if (response.statusCode !== 200) {
        response.body.resume();
        this.#retryGetStream(
          lastEventId,
          new BackendHttpError(
            response.statusCode,
            `GET stream refused (HTTP ${response.statusCode})`,
          ),
        );
        return;
      }
      this.#getRetryMs = GET_RETRY_INITIAL_MS;
      const last = await this.#readStream(response.body);
      if (!this.#closed) this.#retryGetStream(last ?? lastEventId);
    })();
  }

  #retryGetStream(lastEventId: string | undefined, error?: unknown): void {
    if (this.#closed) return;
    if (error !== undefined)
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    const delay = this.#getRetryMs;
    this.#getRetryMs = Math.min(this.#getRetryMs * 2, GET_RETRY_MAX_MS);
    this.#getTimer = setTimeout(() => this.#openGetStream(lastEventId), delay);
    this.#getTimer.unref();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#getTimer !== undefined) clearTimeout(this.#getTimer);
    for (const entry of [...this.#calls.values()])
      entry.reject(new McpError(ErrorCode.ConnectionClosed, 'Connection closed'));
    this.#abort.abort();
    if (this.sessionId !== undefined) {
      // Best effort: tell the server the session is over, without waiting long for it.
      await request(this.#url, {
        method: 'DELETE',
        headers: this.#requestHeaders(),
        dispatcher: this.#dispatcher,
        signal: AbortSignal.timeout(1_000),
      })
        .then((r) => r.body.resume())
        .catch(() => undefined);
    }
    this.onclose?.();
  }
}
