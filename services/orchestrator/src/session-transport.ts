/**
 * A Streamable HTTP server transport for one MCP session, written directly on node's http
 * objects (the SDK's converts every request to WHATWG Request/Response and streams, which
 * costs more than the rest of the gateway). Per request it answers with plain JSON when the
 * only message is the response, and upgrades to SSE as soon as anything else (progress,
 * logging, a server-to-client request) must travel with it. A GET opens the standalone
 * stream; DELETE ends the session. A client that disconnects mid-request cancels it.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { formatPath, JsonRpcCode } from '@fleet/core';
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
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';

type Message = Record<string, unknown> & { jsonrpc?: string; id?: RequestId; method?: string };

interface PendingRequest {
  res: ServerResponse;
  sse: boolean;
}

function sendError(
  res: ServerResponse,
  status: number,
  code: number,
  message: string,
  id?: unknown,
  data?: unknown,
): undefined {
  const body = JSON.stringify(errorEnvelope(id, code, message, data));
  res
    .writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    })
    .end(body);
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
 * act on, as an HTTP status, a JSON-RPC code and text; undefined when it is well formed.
 * The SDK drops malformed messages without answering, which would leave the POST open.
 */
function malformed(
  message: Message,
): { code: number; text: string; id?: RequestId; data?: unknown } | undefined {
  const extra = Object.keys(message).find((k) => !ENVELOPE_KEYS.has(k));
  if (extra !== undefined)
    return {
      code: JsonRpcCode.INVALID_REQUEST,
      text: `Invalid Request: unexpected member "${extra.slice(0, 64)}"`,
    };
  const hasId = 'id' in message;
  if (hasId && !isRequestId(message.id))
    return {
      code: JsonRpcCode.INVALID_REQUEST,
      text: 'Invalid Request: "id" must be a string or an integer',
    };
  const id = hasId ? message.id : undefined;
  if (!('method' in message)) {
    if (hasId && (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)))
      return undefined;
    return {
      code: JsonRpcCode.INVALID_REQUEST,
      text: 'Invalid Request: expected a request, a notification or a response',
      ...(id === undefined ? {} : { id }),
    };
  }
  if (typeof message.method !== 'string')
    return {
      code: JsonRpcCode.INVALID_REQUEST,
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
    code: JsonRpcCode.INVALID_PARAMS,
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

/** One session's transport. Create it for an `initialize` request; it assigns the session id. */
export class SessionTransport implements Transport {
  sessionId: string | undefined;
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: Transport['onmessage'];
  readonly #pending = new Map<RequestId, PendingRequest>();
  #standalone: ServerResponse | undefined;
  #closed = false;

  async start(): Promise<void> {}

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
    res.setHeader('allow', 'GET, POST, DELETE');
    sendError(res, 405, JsonRpcCode.INVALID_REQUEST, 'Method not allowed');
  }

  #post(
    req: IncomingMessage & { auth?: AuthInfo },
    res: ServerResponse,
    message: Message,
  ): undefined {
    const accept = req.headers.accept ?? '';
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
      return sendError(
        res,
        406,
        JsonRpcCode.INVALID_REQUEST,
        'Not Acceptable: the client must accept both application/json and text/event-stream',
      );
    }
    if (message.jsonrpc !== '2.0')
      return sendError(
        res,
        400,
        JsonRpcCode.INVALID_REQUEST,
        'Invalid Request: "jsonrpc" must be "2.0"',
      );
    const problem = malformed(message);
    if (problem) return sendError(res, 400, problem.code, problem.text, problem.id, problem.data);
    const initialize = message.method === 'initialize';
    if (!initialize) {
      const version = req.headers['mcp-protocol-version'];
      if (typeof version === 'string' && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
        return sendError(
          res,
          400,
          JsonRpcCode.INVALID_REQUEST,
          `Bad Request: unsupported protocol version ${version} (supported: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
        );
      }
    } else if (this.sessionId !== undefined) {
      return sendError(
        res,
        400,
        JsonRpcCode.INVALID_REQUEST,
        'Invalid Request: the session is already initialized',
      );
    } else {
      this.sessionId = randomUUID();
    }
    const extra = {
      requestInfo: { headers: req.headers as Record<string, string | string[] | undefined> },
      ...(req.auth ? { authInfo: req.auth } : {}),
    };
    if (message.id === undefined || message.method === undefined) {
      // A notification or a response to one of our requests: accepted, nothing to stream.
      res.writeHead(202).end();
      this.onmessage?.(message as JSONRPCMessage, extra);
      return;
    }
    const id = message.id;
    if (this.#pending.has(id))
      return sendError(
        res,
        400,
        JsonRpcCode.INVALID_REQUEST,
        `Invalid Request: request id ${String(id)} is already in progress`,
        id,
      );
    this.#pending.set(id, { res, sse: false });
    res.on('close', () => {
      if (this.#pending.get(id)?.res === res && !res.writableFinished) {
        // The client went away: cancel the work it asked for.
        this.#pending.delete(id);
        this.onmessage?.(
          {
            jsonrpc: '2.0',
            method: 'notifications/cancelled',
            params: { requestId: id, reason: 'client disconnected' },
          } as JSONRPCMessage,
          extra,
        );
      }
    });
    this.onmessage?.(message as JSONRPCMessage, extra);
  }

  #get(req: IncomingMessage, res: ServerResponse): undefined {
    if (!(req.headers.accept ?? '').includes('text/event-stream')) {
      return sendError(
        res,
        406,
        JsonRpcCode.INVALID_REQUEST,
        'Not Acceptable: the client must accept text/event-stream',
      );
    }
    if (this.#standalone && !this.#standalone.writableEnded) {
      return sendError(
        res,
        409,
        JsonRpcCode.INVALID_REQUEST,
        'Conflict: only one standalone SSE stream is allowed per session',
      );
    }
    this.#standalone = res;
    this.#openSse(res);
    res.on('close', () => {
      if (this.#standalone === res) this.#standalone = undefined;
    });
  }

  #openSse(res: ServerResponse): void {
    const headers: Record<string, string> = {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    };
    if (this.sessionId) headers['mcp-session-id'] = this.sessionId;
    res.writeHead(200, headers);
    res.flushHeaders();
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const m = message as Message;
    const response = isResponse(m);
    const key = response ? m.id : options?.relatedRequestId;
    const pending = key === undefined ? undefined : this.#pending.get(key);
    const json = JSON.stringify(message);
    if (!pending) {
      // Unrelated (or its request is gone): the standalone stream, if the client opened one.
      if (!response && this.#standalone && !this.#standalone.writableEnded)
        this.#standalone.write(`event: message\ndata: ${json}\n\n`);
      return;
    }
    const { res } = pending;
    if (response) {
      this.#pending.delete(key as RequestId);
      if (pending.sse) {
        res.end(`event: message\ndata: ${json}\n\n`);
      } else {
        const headers: Record<string, string | number> = {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(json),
        };
        if (this.sessionId) headers['mcp-session-id'] = this.sessionId;
        res.writeHead(200, headers).end(json);
      }
      return;
    }
    if (!pending.sse) {
      pending.sse = true;
      this.#openSse(res);
    }
    res.write(`event: message\ndata: ${json}\n\n`);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const { res } of this.#pending.values()) res.destroy();
    this.#pending.clear();
    this.#standalone?.end();
    this.#standalone = undefined;
    this.onclose?.();
  }
}
