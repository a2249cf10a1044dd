/**
 * A Streamable HTTP server transport for one MCP session, written directly on node's http
 * objects (the SDK's converts every request to WHATWG Request/Response and streams, which
 * costs more than the rest of the gateway). Per request it answers with plain JSON when the
 * only message is the response, and upgrades to SSE as soon as anything else (progress,
 * logging, a server-to-client request) must travel with it. A GET opens the standalone
 * stream; DELETE ends the session. A client that disconnects mid-request cancels it; a
 * request the client cancels (`notifications/cancelled`) has its response ended unanswered.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  SUPPORTED_PROTOCOL_VERSIONS as ALL_PROTOCOL_VERSIONS,
  formatPath,
  HTTP_ERROR_CODES,
  type HttpErrorCode,
} from '@fleet/core';
import { errorEnvelope } from '@fleet/interceptor-kit';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type {
  Transport,
  TransportSendOptions,
} from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ClientNotificationSchema,
  ClientRequestSchema,
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type MessageExtraInfo,
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';

/** A JSON-RPC message as posted (not yet known to be well formed). */
export type PostedMessage = Record<string, unknown> & {
  jsonrpc?: string;
  id?: RequestId;
  method?: string;
};

type Message = PostedMessage;

/**
 * Answer an HTTP request with a JSON-RPC error from {@link HTTP_ERROR_CODES}: the entry's
 * status and code, the request's `id` when known (never `null`), optional `data`.
 */
export function sendError(
  res: ServerResponse,
  kind: HttpErrorCode,
  message: string,
  options: {
    id?: unknown;
    data?: unknown;
    headers?: Record<string, string>;
    /** Instead of the entry's HTTP status. */
    status?: number;
  } = {},
): undefined {
  const { http, jsonrpc } = HTTP_ERROR_CODES[kind];
  const body = JSON.stringify(errorEnvelope(options.id, jsonrpc, message, options.data));
  res
    .writeHead(options.status ?? http, {
      ...options.headers,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    })
    .end(body);
}

/**
 * Default most bytes written to one client's SSE stream and not yet taken by it
 * (`limits.maxClientBacklogBytes`): past it the client is not reading, and what the gateway
 * would go on writing for it would only grow its memory.
 */
export const DEFAULT_MAX_CLIENT_BACKLOG_BYTES = 8 * 1024 * 1024;

/**
 * Default longest time a client may take none of an answer (`limits.requestTimeoutMs`, the
 * same budget it has to send its request): past it, the connection is closed.
 */
export const DEFAULT_ANSWER_STALL_MS = 30_000;

/**
 * Answers longer than this (in characters) are written in pieces of this many bytes, each when
 * the client has taken the one before: a client that stops reading is then noticed, and what it
 * has not taken stays one buffer instead of growing the socket's queue.
 */
export const ANSWER_PIECE_BYTES = 64 * 1024;

/**
 * Most bytes (as JSON) of an `initialize` request's params: the session keeps the client's
 * `clientInfo` and `capabilities` for as long as it lives, so without a bound each of the
 * 10,000 sessions could hold a whole request body (real clients send well under 2 KiB).
 */
export const MAX_INITIALIZE_PARAMS_BYTES = 64 * 1024;

/** What the gateway did about a client that does not read its stream or its answer. */
export type BacklogAction = 'notifications-dropped' | 'stream-closed' | 'connection-closed';

/** An SSE comment: a quiet stream's sign of life for proxies in between; clients ignore it. */
const KEEPALIVE = ': keepalive\n\n';

/**
 * The HTTP response to one POSTed request: plain JSON when the answer travels alone, an SSE
 * stream from the first message that must go before it (progress, a log line, a
 * server-to-client request). Once streaming, the HTTP status is 200 whatever the answer.
 * While more than `maxBacklogBytes` wait unread on the stream, notifications for it are
 * dropped (each is superseded or informational); requests and the answer still go. A long
 * answer goes in pieces; a client that takes none of it for `stallMs` loses the connection.
 */
export class ResponseChannel {
  readonly res: ServerResponse;
  readonly #headers: Record<string, string>;
  readonly #maxBacklogBytes: number;
  readonly #stallMs: number;
  readonly #onBacklog: ((action: BacklogAction) => void) | undefined;
  #sse = false;
  #dropping = false;
  /** Seen by a keep-alive tick already (see {@link tick}). */
  #aged = false;

  constructor(
    res: ServerResponse,
    headers: Record<string, string> = {},
    backlog: BacklogOptions = {},
  ) {
    this.res = res;
    this.#headers = headers;
    this.#maxBacklogBytes = backlog.maxBacklogBytes ?? DEFAULT_MAX_CLIENT_BACKLOG_BYTES;
    this.#stallMs = backlog.stallMs ?? DEFAULT_ANSWER_STALL_MS;
    this.#onBacklog = backlog.onBacklog;
  }

  /** True once the response became an SSE stream. */
  get streaming(): boolean {
    return this.#sse;
  }

  /** True when the client is gone or the answer was sent. */
  get closed(): boolean {
    return this.res.writableEnded || this.res.destroyed;
  }

  /**
   * One keep-alive tick: from the second tick a request is still unanswered (so after one to
   * two intervals), an SSE comment, switching the answer to SSE. A proxy that closes a quiet
   * response (commonly after 60 s) then leaves a long call alone; clients skip comments.
   */
  tick(): void {
    if (this.closed) return;
    if (!this.#aged) {
      this.#aged = true;
      return;
    }
    this.#streamSse();
    if (this.res.writableLength <= this.#maxBacklogBytes) this.res.write(KEEPALIVE);
  }

  /** Send a message ahead of the answer (switching to SSE); a notification may be dropped. */
  event(json: string, notification = false): void {
    if (this.closed) return;
    if (notification && this.res.writableLength > this.#maxBacklogBytes) {
      if (!this.#dropping) this.#onBacklog?.('notifications-dropped');
      this.#dropping = true;
      return;
    }
    this.#streamSse();
    this.res.write(`event: message\ndata: ${json}\n\n`);
  }

  /** Switch the answer to SSE (once): what goes before it, or a keep-alive, needs a stream. */
  #streamSse(): void {
    if (this.#sse) return;
    this.#sse = true;
    openSse(this.res, this.#headers);
  }

  /** Send the answer and end the response; `status` applies only to a plain-JSON answer. */
  finish(json: string, status = 200): void {
    if (this.closed) return;
    if (json.length > ANSWER_PIECE_BYTES) {
      this.#finishInPieces(json, status);
      return;
    }
    if (this.#sse) {
      this.res.end(`event: message\ndata: ${json}\n\n`);
      return;
    }
    this.res
      .writeHead(status, {
        ...this.#headers,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(json),
      })
      .end(json);
  }

  /**
   * End the response without a message: its request was cancelled, and MCP sends a cancelled
   * request no answer. A stream already open ends; else the answer is an SSE stream with no
   * event, ended at once (a request's POST is answered with JSON or SSE, and JSON would need a
   * message). No event carries an id, so the client has nothing to resume and does not
   * reconnect (the SDK client only reconnects a POST stream after an event with an id).
   */
  endUnanswered(): void {
    if (this.closed) return;
    this.#streamSse();
    this.res.end();
  }

  #finishInPieces(json: string, status: number): void {
    const { res } = this;
    // Bytes, so that a piece never splits a character's UTF-8 sequence.
    const data = Buffer.from(this.#sse ? `event: message\ndata: ${json}\n\n` : json);
    if (!this.#sse)
      res.writeHead(status, {
        ...this.#headers,
        'content-type': 'application/json',
        'content-length': data.length,
      });
    let offset = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stalled = () => {
      if (!res.socket) {
        // Still queued behind an earlier answer on its connection (pipelining): not its turn.
        timer = setTimeout(stalled, this.#stallMs).unref();
        return;
      }
      res.destroy();
      this.#onBacklog?.('connection-closed');
    };
    const pump = () => {
      clearTimeout(timer);
      while (offset < data.length) {
        const piece = data.subarray(offset, offset + ANSWER_PIECE_BYTES);
        offset += piece.length;
        if (offset === data.length) res.end(piece);
        else if (!res.write(piece)) {
          timer = setTimeout(stalled, this.#stallMs).unref();
          res.once('drain', pump);
          return;
        }
      }
    };
    res.once('close', () => clearTimeout(timer));
    pump();
  }
}

function openSse(res: ServerResponse, headers: Record<string, string>): void {
  res.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  res.flushHeaders();
}

type ParamsSchema = {
  safeParse(value: unknown): {
    success: boolean;
    error?: { issues: Array<{ path: PropertyKey[]; message: string }> };
  };
};

/** The SDK's schema of each MCP request and notification a client may send, by method. */
const SCHEMAS = new Map<string, ParamsSchema>(
  [...ClientRequestSchema.options, ...ClientNotificationSchema.options].map((schema) => [
    schema.shape.method.value,
    schema as unknown as ParamsSchema,
  ]),
);

const ENVELOPE_KEYS = new Set(['jsonrpc', 'id', 'method', 'params', 'result', 'error']);

function isRequestId(id: unknown): id is RequestId {
  return typeof id === 'string' || Number.isSafeInteger(id);
}

/**
 * Why `message` (already known to carry `"jsonrpc":"2.0"`) is not a message the SDK will
 * act on, as an {@link HTTP_ERROR_CODES} entry and text; undefined when it is well formed.
 * The SDK drops malformed messages without answering, which would leave the POST open.
 */
export function malformed(
  message: Message,
):
  | { kind: 'INVALID_REQUEST' | 'INVALID_PARAMS'; text: string; id?: RequestId; data?: unknown }
  | undefined {
  const hasId = 'id' in message;
  if (hasId && !isRequestId(message.id))
    return {
      kind: 'INVALID_REQUEST',
      text: 'Invalid Request: "id" must be a string or an integer',
    };
  const id = hasId ? message.id : undefined;
  const extra = Object.keys(message).find((k) => !ENVELOPE_KEYS.has(k));
  if (extra !== undefined)
    return {
      kind: 'INVALID_REQUEST',
      text: `Invalid Request: unexpected member "${extra.slice(0, 64)}"`,
      ...(id === undefined ? {} : { id }),
    };
  if (!('method' in message)) {
    if (hasId && (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)))
      return undefined;
    return {
      kind: 'INVALID_REQUEST',
      text: 'Invalid Request: expected a request, a notification or a response',
      ...(id === undefined ? {} : { id }),
    };
  }
  if (typeof message.method !== 'string')
    return {
      kind: 'INVALID_REQUEST',
      text: 'Invalid Request: "method" must be a string',
      ...(id === undefined ? {} : { id }),
    };
  const schema = SCHEMAS.get(message.method);
  const parsed = schema?.safeParse({ method: message.method, params: message.params });
  const wellFormed = hasId ? isJSONRPCRequest(message) : isJSONRPCNotification(message);
  if (wellFormed && parsed?.success !== false) return undefined;
  const issues = parsed?.error?.issues.slice(0, 20).map((i) => ({
    path: formatPath(i.path),
    message: i.message,
  }));
  return {
    kind: 'INVALID_PARAMS',
    text: `Invalid params for ${message.method.slice(0, 64)}`,
    ...(id === undefined ? {} : { id }),
    ...(issues ? { data: { issues } } : {}),
  };
}

function isResponse(message: Message): boolean {
  return (
    message.id !== undefined &&
    message.method === undefined &&
    ('result' in message || 'error' in message)
  );
}

/**
 * The checks every POSTed message passes before anything acts on it: an `Accept` that takes
 * both JSON and SSE, `"jsonrpc": "2.0"` and a well-formed message. Answers the request and
 * returns false when one fails. In a session (`inSession`), a request whose only fault is its
 * params gets its -32602 with HTTP 200, as any other error of a session's request: session
 * clients read another status as a failed POST, not as the request's answer.
 */
export function acceptPost(
  req: IncomingMessage,
  res: ServerResponse,
  message: Message,
  { inSession = false }: { inSession?: boolean } = {},
): boolean {
  const accept = req.headers.accept ?? '';
  if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
    sendError(
      res,
      'NOT_ACCEPTABLE',
      'Not Acceptable: the client must accept both application/json and text/event-stream',
    );
    return false;
  }
  if (message.jsonrpc !== '2.0') {
    // Not a JSON-RPC 2.0 message: its "id" is not known to be one.
    sendError(res, 'INVALID_REQUEST', 'Invalid Request: "jsonrpc" must be "2.0"');
    return false;
  }
  const problem = malformed(message);
  if (problem) {
    const answered = inSession && problem.kind === 'INVALID_PARAMS' && problem.id !== undefined;
    sendError(res, problem.kind, problem.text, {
      id: problem.id,
      data: problem.data,
      ...(answered ? { status: 200 } : {}),
    });
    return false;
  }
  return true;
}

/** What a request served directly gets to know about its HTTP request. */
export interface DirectRequestInfo {
  headers: Record<string, string | string[] | undefined>;
  authInfo: AuthInfo | undefined;
}

/**
 * Serves one client request without the SDK's protocol object: returns the answer's promise,
 * or undefined to let the SDK server handle the request (initialize, ping, anything the
 * direct path does not take).
 */
export type DirectRequestHandler = (
  request: { id: RequestId; method: string; params: Record<string, unknown> | undefined },
  info: DirectRequestInfo,
  signal: AbortSignal,
) => Promise<unknown> | undefined;

/** The JSON-RPC error the SDK's protocol would answer a failed handler with. */
function errorResponse(id: RequestId, error: unknown): JSONRPCMessage {
  const e = (error ?? {}) as { code?: unknown; message?: unknown; data?: unknown };
  return errorEnvelope(
    id,
    Number.isSafeInteger(e.code) ? (e.code as number) : -32603,
    typeof e.message === 'string' ? e.message : 'Internal error',
    e.data,
  ) as JSONRPCMessage;
}

/** How a client stream's unread bytes are bounded, and who hears of it. */
export interface BacklogOptions {
  /** Default {@link DEFAULT_MAX_CLIENT_BACKLOG_BYTES}. */
  maxBacklogBytes?: number | undefined;
  /** How long a client may take none of a long answer; default {@link DEFAULT_ANSWER_STALL_MS}. */
  stallMs?: number | undefined;
  onBacklog?: ((action: BacklogAction) => void) | undefined;
}

/** Default most requests one session may have in flight (`limits.maxInFlightPerSession`). */
export const DEFAULT_MAX_IN_FLIGHT_PER_SESSION = 32;

/** How many requests a session may have in flight, and who hears of one refused. */
export interface InFlightOptions {
  /** Default {@link DEFAULT_MAX_IN_FLIGHT_PER_SESSION}. */
  maxInFlight?: number | undefined;
  /** Told of each request refused because the session had `maxInFlight` in flight. */
  onOverload?: (() => void) | undefined;
}

/**
 * Requests that never count as in flight: the gateway answers them at once, and a client that
 * pings to see whether its connection lives must not be told it is overloaded.
 */
const UNCOUNTED_METHODS = new Set(['ping']);

/** One session's transport. Create it for an `initialize` request; it assigns the session id. */
export class SessionTransport implements Transport {
  sessionId: string | undefined;
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: Transport['onmessage'];
  /**
   * Serves requests directly when set: the hot path skips the SDK's per-request protocol
   * machinery (schema checks, task bookkeeping, promise chains); what it declines, and every
   * notification and response, still goes to the SDK server through `onmessage`.
   */
  direct?: DirectRequestHandler;
  readonly #pending = new Map<RequestId, ResponseChannel>();
  /** Requests being served directly, to cancel on `notifications/cancelled` or disconnect. */
  readonly #direct = new Map<RequestId, AbortController>();
  /**
   * The answers owed to requests in flight: sent, and not yet answered, cancelled or given up
   * by the client closing its connection. A channel rather than an id, so that the late close
   * of an answered request never frees the slot of a new request that reuses its id.
   */
  readonly #inFlight = new Set<ResponseChannel>();
  #standalone: ServerResponse | undefined;
  #closed = false;
  readonly #backlog: BacklogOptions;
  readonly #maxBacklogBytes: number;
  readonly #maxInFlight: number;
  readonly #onOverload: (() => void) | undefined;

  constructor(backlog: BacklogOptions = {}, inFlight: InFlightOptions = {}) {
    this.#backlog = backlog;
    this.#maxBacklogBytes = backlog.maxBacklogBytes ?? DEFAULT_MAX_CLIENT_BACKLOG_BYTES;
    this.#maxInFlight = inFlight.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT_PER_SESSION;
    this.#onOverload = inFlight.onOverload;
  }

  /** Requests of the session in flight (see `limits.maxInFlightPerSession`). */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  async start(): Promise<void> {}

  /**
   * Whether the client is still attached: a request of the session is being served, or its
   * standalone SSE stream is open. An idle session may be expired; a busy one never is.
   */
  get busy(): boolean {
    return (
      this.#pending.size > 0 ||
      this.#direct.size > 0 ||
      (this.#standalone !== undefined && !this.#standalone.writableEnded)
    );
  }

  /**
   * One keep-alive tick for the session: a comment on its standalone stream, and on each of
   * its requests unanswered since the previous tick ({@link ResponseChannel.tick}). A stream
   * whose client is not reading gets none.
   */
  keepAlive(): void {
    for (const channel of this.#pending.values()) channel.tick();
    const stream = this.#standalone;
    if (stream && !stream.writableEnded && stream.writableLength <= this.#maxBacklogBytes)
      stream.write(KEEPALIVE);
  }

  /** Handle one HTTP request of this session (the body already parsed for POST). */
  handleRequest(
    req: IncomingMessage & { auth?: AuthInfo },
    res: ServerResponse,
    body?: unknown,
  ): undefined {
    if (req.method === 'POST') return this.#post(req, res, body as Message);
    if (req.method === 'GET') return this.#get(req, res);
    if (req.method === 'DELETE') {
      res.writeHead(200).end();
      void this.close();
      return;
    }
    sendError(res, 'METHOD_NOT_ALLOWED', 'Method not allowed', {
      headers: { allow: 'GET, POST, DELETE' },
    });
  }

  #post(
    req: IncomingMessage & { auth?: AuthInfo },
    res: ServerResponse,
    message: Message,
  ): undefined {
    const initialize = message.method === 'initialize';
    if (!acceptPost(req, res, message, { inSession: !initialize })) return;
    if (!initialize) {
      const version = req.headers['mcp-protocol-version'];
      if (typeof version === 'string' && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
        return sendError(res, 'UNSUPPORTED_PROTOCOL_VERSION', 'Unsupported protocol version', {
          id: message.id,
          data: { supported: [...ALL_PROTOCOL_VERSIONS], requested: version },
        });
      }
    } else if (this.sessionId !== undefined) {
      return sendError(
        res,
        'INVALID_REQUEST',
        'Invalid Request: the session is already initialized',
        {
          id: message.id,
        },
      );
    } else {
      const bytes = Buffer.byteLength(JSON.stringify(message.params ?? {}));
      if (bytes > MAX_INITIALIZE_PARAMS_BYTES)
        return sendError(
          res,
          'INVALID_PARAMS',
          `Invalid params: initialize params may take at most ${MAX_INITIALIZE_PARAMS_BYTES} bytes (${bytes} sent)`,
          {
            id: message.id,
            data: {
              reason: 'limit_exceeded',
              limit: 'initializeParamsBytes',
              max: MAX_INITIALIZE_PARAMS_BYTES,
            },
          },
        );
      this.sessionId = randomUUID();
    }
    const extra = {
      requestInfo: { headers: req.headers as Record<string, string | string[] | undefined> },
      ...(req.auth ? { authInfo: req.auth } : {}),
    };
    if (message.id === undefined || message.method === undefined) {
      // A notification or a response to one of our requests: accepted, nothing to stream.
      res.writeHead(202).end();
      const target =
        message.method === 'notifications/cancelled'
          ? (message.params as { requestId?: unknown } | undefined)?.requestId
          : undefined;
      if (isRequestId(target)) this.#cancel(target, message, extra);
      else this.onmessage?.(message as JSONRPCMessage, extra);
      return;
    }
    const id = message.id;
    if (this.#pending.has(id))
      return sendError(
        res,
        'INVALID_REQUEST',
        `Invalid Request: request id ${String(id)} is already in progress`,
        { id },
      );
    const counted = !UNCOUNTED_METHODS.has(message.method);
    if (counted && this.#inFlight.size >= this.#maxInFlight) {
      // Never forwarded: every session shares each backend's slots, and this one holds its
      // share. The same code and reason as a backend at capacity; the session goes on.
      this.#onOverload?.();
      const max = this.#maxInFlight;
      return sendError(
        res,
        'UNAVAILABLE',
        `Session is at capacity: at most ${max} requests in flight (limits.maxInFlightPerSession)`,
        { id, data: { reason: 'overloaded', limit: 'maxInFlightPerSession', max }, status: 200 },
      );
    }
    const channel = new ResponseChannel(
      res,
      this.sessionId === undefined ? {} : { 'mcp-session-id': this.sessionId },
      this.#backlog,
    );
    this.#pending.set(id, channel);
    if (counted) this.#inFlight.add(channel);
    res.on('close', () => {
      this.#inFlight.delete(channel);
      if (this.#pending.get(id) === channel && !res.writableFinished) {
        // The client went away: cancel the work it asked for.
        this.#pending.delete(id);
        this.#stopWork(
          id,
          {
            jsonrpc: '2.0',
            method: 'notifications/cancelled',
            params: { requestId: id, reason: 'client disconnected' },
          },
          extra,
        );
      }
    });
    if (this.direct) {
      const controller = new AbortController();
      const answer = this.direct(
        {
          id,
          method: message.method,
          params: message.params as Record<string, unknown> | undefined,
        },
        { headers: extra.requestInfo.headers, authInfo: req.auth },
        controller.signal,
      );
      if (answer) {
        this.#direct.set(id, controller);
        answer
          .then(
            (result) => ({ jsonrpc: '2.0', id, result }) as JSONRPCMessage,
            (error: unknown) => errorResponse(id, error),
          )
          .then((response) => {
            if (this.#direct.get(id) === controller) this.#direct.delete(id);
            // A cancelled request gets no answer (as with the SDK's protocol).
            return controller.signal.aborted ? undefined : this.send(response);
          })
          .catch((error: unknown) => this.onerror?.(error as Error));
        return;
      }
    }
    this.onmessage?.(message as JSONRPCMessage, extra);
  }

  /**
   * The client cancelled request `id`: its work is aborted, it stops counting, and its POST
   * ends now without an answer ({@link ResponseChannel.endUnanswered}) instead of holding a
   * socket and a `#pending` entry until the client gives up or the session ends. The id is
   * free again at once: the cancelled request's answer is never sent, even to a new request
   * with its id (the direct path and the SDK's protocol both drop an aborted request's answer,
   * and {@link send} drops one already on its way, finding no channel for it).
   */
  #cancel(id: RequestId, cancellation: Message, extra: MessageExtraInfo): void {
    const channel = this.#pending.get(id);
    if (channel) {
      this.#pending.delete(id);
      this.#inFlight.delete(channel);
    }
    this.#stopWork(id, cancellation, extra);
    channel?.endUnanswered();
  }

  /**
   * Stop the work of request `id`: abort it when it is served directly, else hand the SDK
   * server `cancellation` (a `notifications/cancelled` naming it), which aborts its handler.
   */
  #stopWork(id: RequestId, cancellation: Message, extra: MessageExtraInfo): void {
    const controller = this.#direct.get(id);
    if (!controller) {
      this.onmessage?.(cancellation as JSONRPCMessage, extra);
      return;
    }
    const reason = (cancellation.params as { reason?: unknown } | undefined)?.reason;
    controller.abort(reason === undefined ? undefined : String(reason));
  }

  #get(req: IncomingMessage, res: ServerResponse): undefined {
    if (!(req.headers.accept ?? '').includes('text/event-stream')) {
      return sendError(
        res,
        'NOT_ACCEPTABLE',
        'Not Acceptable: the client must accept text/event-stream',
      );
    }
    if (this.#standalone && !this.#standalone.writableEnded) {
      return sendError(
        res,
        'CONFLICT',
        'Conflict: only one standalone SSE stream is allowed per session',
      );
    }
    this.#standalone = res;
    openSse(res, this.sessionId === undefined ? {} : { 'mcp-session-id': this.sessionId });
    res.on('close', () => {
      if (this.#standalone === res) this.#standalone = undefined;
    });
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const m = message as Message;
    const response = isResponse(m);
    const key = response ? m.id : options?.relatedRequestId;
    const channel = key === undefined ? undefined : this.#pending.get(key);
    const json = JSON.stringify(message);
    if (!channel) {
      // Unrelated (or its request is gone): the standalone stream, if the client opened one.
      const stream = this.#standalone;
      if (response || !stream || stream.writableEnded) return;
      if (stream.writableLength > this.#maxBacklogBytes) {
        // Not reading: free what waits for it. The client may open a new stream.
        stream.destroy();
        this.#backlog.onBacklog?.('stream-closed');
        return;
      }
      stream.write(`event: message\ndata: ${json}\n\n`);
      return;
    }
    if (response) {
      this.#pending.delete(key as RequestId);
      this.#inFlight.delete(channel);
      // A session's errors travel with HTTP 200: its (2025-11-25) clients read any other
      // status as a failed POST and never see the JSON-RPC error.
      channel.finish(json);
      return;
    }
    channel.event(json, m.id === undefined);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const controller of this.#direct.values()) controller.abort('session closed');
    this.#direct.clear();
    for (const { res } of this.#pending.values()) res.destroy();
    this.#pending.clear();
    this.#inFlight.clear();
    this.#standalone?.end();
    this.#standalone = undefined;
    this.onclose?.();
  }
}
