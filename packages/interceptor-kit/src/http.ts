/**
 * Serve an interceptor host over MCP Streamable HTTP.
 *
 * The lean path: a POST to `/mcp` carrying one `interceptor/invoke` or `interceptors/list`
 * request is answered directly with an `application/json` JSON-RPC response, without a
 * session, an SDK transport or express routing. That is still the Streamable HTTP wire (a
 * server may answer a POST with JSON), so stock MCP clients work unchanged; everything
 * else (initialize, ping, notifications, GET, DELETE) goes to the MCP SDK's transport in
 * stateless mode.
 */

import { isUtf8 } from 'node:buffer';
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import {
  HTTP_ERROR_CODES,
  type HttpErrorCode,
  InterceptorMethod,
  JsonRpcCode,
  LazyAbortController,
  type ProtocolError,
  resultOutcome,
  type SignalSource,
  toProtocolError,
} from '@fleet/core';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';
import express, { type Express, type RequestHandler } from 'express';
import { type BatchAnswer, runInvokeBatch } from './batch.ts';
import type { InterceptorHost } from './host.ts';
import { eventLabel, interceptorLabel, phaseLabel } from './labels.ts';
import { checkInvokeDepth, type InvokeLimits, resolveMaxDepth } from './limits.ts';
import { createLogger, type Logger } from './logger.ts';
import { createInterceptorMcpServer, type ServerIdentity } from './mcp-server.ts';
import { rebindingGuard } from './rebinding.ts';
import { withServerSpan } from './trace.ts';

/** Options for {@link createInterceptorHttpApp}. */
export interface InterceptorHttpOptions extends ServerIdentity, InvokeLimits {
  /** When set, `/mcp` requires `Authorization: Bearer <token>` (the scheme in any case). */
  token?: string | undefined;
  /** Largest accepted request body. Default 4 MiB. */
  maxBodyBytes?: number;
  /** Readiness check for `/readyz` (default: always ready). */
  ready?: () => boolean | Promise<boolean>;
  /** Extra routes (e.g. `/metrics`) mounted before the MCP endpoint. */
  extend?: (app: Express) => void;
  /**
   * Hosts (as in a `Host` header, with or without the port) served on a loopback connection
   * besides loopback ones, e.g. the Service name a mesh sidecar forwards with. Default: the
   * comma-separated `ALLOWED_HOSTS` environment variable.
   */
  allowedHosts?: readonly string[];
  /**
   * Origins (`https://console.example.com`) served besides loopback ones. Default: the
   * comma-separated `ALLOWED_ORIGINS` environment variable.
   */
  allowedOrigins?: readonly string[];
  /**
   * Where answers that cannot be sent are logged (never with the payload). Default: a pino
   * logger named after the service, made on first use.
   */
  logger?: Logger;
}

/** An HTTP front for an interceptor host. */
export interface InterceptorHttpApp {
  /** The request listener to pass to `http.createServer` (lean path first, then express). */
  listener: RequestListener;
  /** The express app behind the lean path. */
  app: Express;
}

const MCP_PATH = '/mcp';

/**
 * Whether `url` is the MCP endpoint as express routes it (case-insensitive, one trailing slash
 * allowed, any query): every POST it routes to `/mcp` must take the lean path, with its body
 * limit, batch refusal and error envelopes, not only the exact spelling.
 */
function isMcpPath(url: string | undefined): boolean {
  if (url === undefined) return false;
  const query = url.indexOf('?');
  const path = (query === -1 ? url : url.slice(0, query)).toLowerCase();
  return path === MCP_PATH || path === `${MCP_PATH}/`;
}
/** Default `maxBodyBytes`: the largest request (or stdio line) a kit server reads. */
export const DEFAULT_MAX_BODY = 4 * 1024 * 1024;

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  sendText(res, status, JSON.stringify(body), headers);
}

function sendText(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** An error answer: the HTTP status and JSON-RPC code of `kind` from core's one table. */
function sendError(
  res: ServerResponse,
  kind: HttpErrorCode,
  message: string,
  options: { id?: unknown; data?: unknown; headers?: Record<string, string> } = {},
): void {
  const { http, jsonrpc } = HTTP_ERROR_CODES[kind];
  sendJson(res, http, errorEnvelope(options.id, jsonrpc, message, options.data), options.headers);
}

/** A JSON-RPC error envelope; `id` is left out when unknown (never null). */
export function errorEnvelope(id: unknown, code: number, message: string, data?: unknown) {
  const error = data === undefined ? { code, message } : { code, message, data };
  return isId(id) ? { jsonrpc: '2.0', id, error } : { jsonrpc: '2.0', error };
}

/**
 * A POST the kit has already accepted (Content-Type JSON and Accept taking JSON, in any case,
 * RFC 9110) in the one form the SDK's transport takes: it compares both headers
 * case-sensitively and wants `text/event-stream` in Accept even where it answers JSON. It
 * reads the raw headers, so those are rewritten too.
 */
function asCheckedMedia(req: IncomingMessage): void {
  const forms: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  Object.assign(req.headers, forms);
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const form = forms[(raw[i] as string).toLowerCase()];
    if (form !== undefined) raw[i + 1] = form;
  }
  if (!raw.some((name, i) => i % 2 === 0 && name.toLowerCase() === 'accept'))
    raw.push('accept', forms.accept as string);
}

/** The interceptor an invoke's params name (`unknown` when they name none). */
function nameOf(params: unknown): string {
  const name = (params as { name?: unknown } | null | undefined)?.name;
  return typeof name === 'string' ? name : 'unknown';
}

function isId(id: unknown): id is string | number {
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));
}

/** A request body over its limit, declared or counted as it arrived. */
export class BodyTooLarge extends Error {}

/**
 * Read a request body of at most `limit` bytes: a larger declared `Content-Length` is
 * refused before reading, then what arrives from `source` (the request, or a decoding
 * stream piped from it) is counted; past the limit the rest is read and dropped.
 * @throws {BodyTooLarge} over the limit; the stream's error when reading fails.
 */
export function readBody(
  req: IncomingMessage,
  limit: number,
  source: Readable = req,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      reject(new BodyTooLarge());
      req.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    source.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new BodyTooLarge());
        source.removeAllListeners('data');
        source.resume();
        return;
      }
      chunks.push(chunk);
    });
    source.on('end', () =>
      resolve(chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks)),
    );
    source.on('error', reject);
  });
}

/** `Bearer`, in any case (RFC 7235 §2.1), then at least one space, then the credentials. */
const BEARER_SCHEME = /^bearer +/i;

/**
 * Bearer check: the scheme in any case, the token compared in constant time. True when no
 * token is configured.
 */
export function bearerMatches(header: string | undefined, token: string | undefined): boolean {
  if (token === undefined || token === '') return true;
  const scheme = header === undefined ? null : BEARER_SCHEME.exec(header);
  if (header === undefined || scheme === null) return false;
  const given = Buffer.from(header.slice(scheme[0].length).trim());
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Express middleware for a service's own endpoints (`/config`, `/policy`): without the
 * bearer `token` (scheme in any case) the answer is 401 `{error: {code: "UNAUTHORIZED",
 * message}}` with `WWW-Authenticate: Bearer`. Passes everything when `token` is unset.
 */
export function requireBearer(token: string | undefined): RequestHandler {
  return (req, res, next) => {
    if (bearerMatches(req.headers.authorization, token)) return next();
    res.setHeader('www-authenticate', 'Bearer');
    res.status(401).json({
      error: { code: 'UNAUTHORIZED', message: 'a valid bearer token is required' },
    });
  };
}

/** A comma-separated list from the environment, trimmed, without empty items. */
function envList(name: string): string[] {
  return (process.env[name] ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

/** Media types are case-insensitive (RFC 9110 §8.3.1); the `application/*` and any-type wildcards take JSON. */
function acceptsJson(accept: string | undefined): boolean {
  if (accept === undefined || accept === '') return true;
  const types = accept.toLowerCase();
  return (
    types.includes('application/json') || types.includes('application/*') || types.includes('*/*')
  );
}

/**
 * Build the HTTP front: `/mcp` (lean path + MCP SDK), `/healthz`, `/readyz`. Does not listen.
 */
export function createInterceptorHttpApp(
  host: InterceptorHost,
  options: InterceptorHttpOptions,
): InterceptorHttpApp {
  const { token, maxBodyBytes = DEFAULT_MAX_BODY, ready } = options;
  // On another address (a pod IP, `HOST=0.0.0.0`) callers use names of their own: only a
  // loopback connection's Host is checked.
  const rebindingProblem = rebindingGuard({
    allowedHosts: options.allowedHosts ?? envList('ALLOWED_HOSTS'),
    allowedOrigins: options.allowedOrigins ?? envList('ALLOWED_ORIGINS'),
    hostCheck: 'loopback-connections',
  });
  const maxDepth = resolveMaxDepth(options.maxDepth);
  let log = options.logger;
  const logger = (): Logger => {
    log ??= createLogger(options.name);
    return log;
  };
  const app = express();
  app.disable('x-powered-by');
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok', service: options.name });
  });
  app.get('/readyz', async (_req, res) => {
    let ok = true;
    try {
      ok = ready ? await ready() : true;
    } catch {
      ok = false;
    }
    res.status(ok ? 200 : 503).json({ status: ok ? 'ready' : 'not ready', service: options.name });
  });
  options.extend?.(app);

  const sdkHandle = async (req: IncomingMessage, res: ServerResponse, body?: unknown) => {
    const server = createInterceptorMcpServer(host, options);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
    } catch {
      if (!res.headersSent) sendError(res, 'INTERNAL', 'Internal error');
    }
  };

  const unauthorized = (res: ServerResponse) =>
    sendError(res, 'UNAUTHORIZED', 'Unauthorized: a valid bearer token is required', {
      headers: { 'www-authenticate': 'Bearer' },
    });

  app.all(MCP_PATH, (req, res) => {
    if (!bearerMatches(req.headers.authorization, token)) return unauthorized(res);
    void sdkHandle(req, res);
  });

  /**
   * One `interceptor/invoke` inside a SERVER span that continues the caller's trace: from the
   * HTTP `traceparent` when the request has one, else from the invocation's `_meta` (how each
   * invocation of a batch carries its own).
   */
  const tracedInvoke = (
    params: unknown,
    headers: IncomingMessage['headers'] | undefined,
    signal: SignalSource,
  ): Promise<unknown> => {
    const p = params as
      | { name?: unknown; event?: unknown; phase?: unknown; _meta?: { traceparent?: unknown } }
      | undefined;
    const header = headers?.traceparent;
    const carrier = {
      traceparent:
        typeof header === 'string'
          ? header
          : typeof p?._meta?.traceparent === 'string'
            ? p._meta.traceparent
            : undefined,
      tracestate: typeof headers?.tracestate === 'string' ? headers.tracestate : undefined,
    };
    checkInvokeDepth(params, maxDepth);
    // Client-chosen name, event and phase are shown only when known (see labels.ts).
    const info = host.interceptors.find((i) => i.info.name === p?.name)?.info;
    const name = interceptorLabel(info);
    // Attribute names from @fleet/telemetry's table (the kit depends on the API only).
    const attributes: Record<string, string> = {
      'mcp.method.name': InterceptorMethod.INVOKE,
      'fleet.interceptor.name': name,
      'fleet.chain.event': eventLabel(p?.event, info),
      'fleet.chain.phase': phaseLabel(p?.phase),
    };
    if (info) {
      attributes['fleet.interceptor.type'] = info.type;
      // As the service declares it: an orchestrator override may run it otherwise.
      attributes['fleet.interceptor.mode'] = info.mode ?? 'active';
    }
    return withServerSpan(`interceptor/invoke ${name}`, carrier, attributes, async (span) => {
      let outcome = 'failed';
      try {
        const result = await host.invoke(params, { signal });
        outcome = resultOutcome(result);
        return result;
      } catch (error) {
        const failure = error as { code?: unknown; data?: { reason?: unknown } } | null;
        if (failure?.data?.reason === 'timeout') outcome = 'timeout';
        // The caller's params refused (as the metric counts it): no failure of the service.
        else if (failure?.code === JsonRpcCode.INVALID_PARAMS) outcome = 'rejected';
        throw error;
      } finally {
        try {
          span.setAttribute('fleet.interceptor.outcome', outcome);
        } catch {
          // Telemetry never breaks an invocation.
        }
      }
    });
  };

  const handlePost = async (req: IncomingMessage, res: ServerResponse) => {
    if (!bearerMatches(req.headers.authorization, token)) return unauthorized(res);
    const contentType = (req.headers['content-type'] ?? '').toLowerCase();
    if (!contentType.includes('application/json')) {
      return sendError(
        res,
        'UNSUPPORTED_MEDIA_TYPE',
        'Unsupported Media Type: Content-Type must be application/json',
      );
    }
    if (!acceptsJson(req.headers.accept)) {
      return sendError(
        res,
        'NOT_ACCEPTABLE',
        'Not Acceptable: Accept must include application/json',
      );
    }
    const version = req.headers['mcp-protocol-version'];
    if (typeof version === 'string' && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
      return sendError(res, 'UNSUPPORTED_PROTOCOL_VERSION', 'Unsupported protocol version', {
        data: { supported: SUPPORTED_PROTOCOL_VERSIONS, requested: version },
      });
    }
    let raw: Buffer;
    try {
      raw = await readBody(req, maxBodyBytes);
    } catch (error) {
      if (error instanceof BodyTooLarge) {
        return sendError(res, 'PAYLOAD_TOO_LARGE', `Request body exceeds ${maxBodyBytes} bytes`, {
          data: { maxBodyBytes },
          headers: { connection: 'close' },
        });
      }
      return;
    }
    if (!isUtf8(raw)) {
      // JSON text must be UTF-8 (RFC 8259); decoding would quietly substitute U+FFFD.
      return sendError(res, 'PARSE_ERROR', 'Parse error: body is not valid UTF-8');
    }
    let message: unknown;
    try {
      message = JSON.parse(raw.toString('utf8'));
    } catch {
      return sendError(res, 'PARSE_ERROR', 'Parse error: body is not valid JSON');
    }
    if (Array.isArray(message)) {
      return sendError(res, 'INVALID_REQUEST', 'JSON-RPC batches are not supported');
    }
    if (typeof message !== 'object' || message === null) {
      return sendError(
        res,
        'INVALID_REQUEST',
        'Invalid Request: expected a JSON-RPC message object',
      );
    }
    const { jsonrpc, id, method, params } = message as Record<string, unknown>;
    const lean =
      method === InterceptorMethod.INVOKE ||
      method === InterceptorMethod.LIST ||
      method === InterceptorMethod.INVOKE_BATCH;
    if (!lean || id === undefined) {
      // The SDK answers a malformed message with `"id": null`; refuse it here instead.
      const wellFormed =
        isJSONRPCRequest(message) ||
        isJSONRPCNotification(message) ||
        isJSONRPCResultResponse(message) ||
        isJSONRPCErrorResponse(message);
      if (!wellFormed)
        return sendError(
          res,
          'INVALID_REQUEST',
          'Invalid Request: not a well-formed JSON-RPC 2.0 message',
          { id },
        );
      asCheckedMedia(req);
      return sdkHandle(req, res, message);
    }
    if (jsonrpc !== '2.0' || !isId(id)) {
      return sendError(
        res,
        'INVALID_REQUEST',
        'Invalid Request: "jsonrpc" must be "2.0" and "id" a string or number',
        { id },
      );
    }
    // Made only if a handler asks for its signal (see LazyAbortController).
    const controller = new LazyAbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort(new Error('client closed the connection'));
    });
    try {
      let result: unknown;
      if (method === InterceptorMethod.LIST) result = host.list(params);
      else if (method === InterceptorMethod.INVOKE_BATCH)
        result = await runInvokeBatch(params, (invocation) =>
          tracedInvoke(invocation, undefined, controller.lazySignal),
        );
      else result = await tracedInvoke(params, req.headers, controller.lazySignal);
      if (!res.writableEnded) sendText(res, 200, answerText(id, method, params, result));
    } catch (error) {
      const protocolError = toProtocolError(error);
      if (!res.writableEnded) sendText(res, 200, errorText(id, protocolError));
    }
  };

  /** -32603 `{interceptor, reason}` for an answer JSON.stringify could not write, logged. */
  const unserialisable = (interceptor: string, method: unknown, error: unknown) => {
    const reason = 'the answer could not be serialised as JSON';
    logger().error(
      {
        interceptor,
        method,
        err: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      },
      `${reason}; answered -32603 instead`,
    );
    return {
      code: JsonRpcCode.INTERNAL_ERROR,
      message: 'Interceptor execution failed',
      data: { interceptor, reason },
    };
  };

  /**
   * The text of a result answer. One that JSON.stringify cannot write (nested past its
   * recursion, a BigInt, a cycle) becomes -32603 `{interceptor, reason}` and a log line, not
   * an escaped exception's bare "Internal error". A batch is retried item by item so only
   * the answers that cannot be written fail.
   */
  const answerText = (id: string | number, method: unknown, params: unknown, result: unknown) => {
    try {
      return JSON.stringify({ jsonrpc: '2.0', id, result });
    } catch (error) {
      if (method === InterceptorMethod.INVOKE_BATCH) {
        const invocations = (params as { invocations?: unknown[] }).invocations ?? [];
        const results = (result as { results: BatchAnswer[] }).results.map(
          (answer, i): BatchAnswer => {
            try {
              JSON.stringify(answer);
              return answer;
            } catch (itemError) {
              return { error: unserialisable(nameOf(invocations[i]), method, itemError) };
            }
          },
        );
        try {
          return JSON.stringify({ jsonrpc: '2.0', id, result: { results } });
        } catch {
          // Fall through: answer the whole batch as one failure.
        }
      }
      const e = unserialisable(nameOf(params), method, error);
      return JSON.stringify(errorEnvelope(id, e.code, e.message, e.data));
    }
  };

  /** The text of an error answer; data that cannot be written is dropped (and logged). */
  const errorText = (id: string | number, error: ProtocolError): string => {
    try {
      return JSON.stringify(errorEnvelope(id, error.code, error.message, error.data));
    } catch (cause) {
      logger().error(
        { code: error.code, err: cause instanceof Error ? cause.message : String(cause) },
        'error data could not be serialised as JSON; sent without it',
      );
      return JSON.stringify(errorEnvelope(id, error.code, error.message));
    }
  };

  const listener: RequestListener = (req, res) => {
    const forbidden = rebindingProblem(req);
    if (forbidden !== undefined) {
      if (isMcpPath(req.url)) return sendError(res, 'FORBIDDEN', forbidden);
      return sendJson(res, 403, { error: { code: 'FORBIDDEN', message: forbidden } });
    }
    if (req.method === 'POST' && isMcpPath(req.url)) {
      void handlePost(req, res);
      return;
    }
    app(req, res);
  };

  return { listener, app };
}
