/**
 * Stateless MCP (2026-07-28) requests at `/mcp`: no `initialize`, no session. Each request
 * arrives with its protocol metadata already checked (see `classifyRequest` in @fleet/core)
 * and is served on its own: a transient client session whose principal comes from the
 * request's credentials, the gateway pipeline as for any session, and one HTTP response —
 * plain JSON, or a request-scoped SSE stream once progress or a wanted log line must go
 * first. A plain-JSON error carries its HTTP status from the one HTTP/JSON-RPC table
 * (`HTTP_ERROR_CODES`): 400 for malformed or mismatched requests, 403 for a policy denial,
 * 404 for a method the gateway does not serve; once streaming, the status is already 200.
 *
 * Nothing persists between requests, so server-to-client requests (sampling, elicitation,
 * roots) cannot be relayed: see `Gateway.onServerRequest`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  httpStatusOfJsonRpcError,
  JsonRpcCode,
  McpMetaKey,
  type Principal,
  ProtocolError,
  reachesLogLevel,
  type StatelessRequestMeta,
  SUPPORTED_PROTOCOL_VERSIONS,
  toProtocolError,
} from '@fleet/core';
import { errorEnvelope } from '@fleet/interceptor-kit';
import type { Result, ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { ClientSession, Gateway, RequestContext } from './gateway.ts';
import type { Logger } from './logger.ts';
import {
  GATEWAY_INFO,
  GATEWAY_INSTRUCTIONS,
  gatewayCapabilities,
  handleClientRequest,
} from './mcp-session.ts';
import type { Registry } from './registry.ts';
import {
  type BacklogOptions,
  type PostedMessage,
  ResponseChannel,
  sendError,
} from './session-transport.ts';
import { shownMethod } from './telemetry.ts';

/** Methods of the session revisions that 2026-07-28 removed, and ones the gateway does not serve statelessly. */
const NOT_STATELESS = new Set([
  'ping',
  'logging/setLevel',
  'resources/subscribe',
  'resources/unsubscribe',
  'subscriptions/listen',
]);

/** Results a 2026-07-28 client may cache: they carry `ttlMs` and `cacheScope`. */
const CACHEABLE = new Set([
  'server/discover',
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
]);

/** Slots held per principal: take one, and get back how to give it back. */
export interface PrincipalSlots {
  /** Most slots one principal may hold. */
  readonly max: number;
  /**
   * Take a slot for `principal`: its release (calling it again does nothing), or undefined
   * when the principal holds `max` already. A principal without an id always gets one.
   */
  acquire(principal: Principal): (() => void) | undefined;
}

/** What serving stateless requests needs. */
export interface StatelessDeps {
  gateway: Gateway;
  registry: Registry;
  log: Logger;
  /** How a streamed answer's unread bytes are bounded. */
  backlog?: BacklogOptions;
  /**
   * Requests in flight per principal (`limits.maxInFlightPerSession`): without sessions, the
   * requests of one principal with an id count as one session's. Anonymous requests are not
   * counted (all clients of `auth.mode: none` are that one principal).
   */
  inFlight?: PrincipalSlots;
  /** Told of each request refused because its principal had `inFlight.max` in flight. */
  onOverload?: (principal: Principal) => void;
}

/** The error a thrown value answers with: protocol errors and coded (SDK) errors keep their code. */
function asProtocolError(error: unknown): ProtocolError {
  if (error instanceof ProtocolError) return error;
  const { code, message, data } = (error ?? {}) as {
    code?: unknown;
    message?: unknown;
    data?: unknown;
  };
  if (Number.isSafeInteger(code) && typeof message === 'string')
    return new ProtocolError(code as number, message.replace(/^MCP error -?\d+: /, ''), data);
  return toProtocolError(error);
}

/** True for a notification the stateless client asked for on this request. */
function wanted(notification: ServerNotification, meta: StatelessRequestMeta): boolean {
  if (notification.method === 'notifications/progress') return true;
  if (notification.method !== 'notifications/message') return false;
  const level = (notification.params as { level?: unknown } | undefined)?.level;
  return meta.logLevel !== undefined && reachesLogLevel(level, meta.logLevel);
}

/** A result as a 2026-07-28 client reads it: `resultType`, the gateway's identity, caching hints. */
function decorate(method: string, result: Result): Result {
  const out: Result = {
    ...result,
    resultType: result.resultType ?? 'complete',
    _meta: { ...result._meta, [McpMetaKey.SERVER_INFO]: GATEWAY_INFO },
  };
  if (CACHEABLE.has(method)) {
    // Lists are shaped per principal (tool view, policy filters): never shared, never fresh.
    out.ttlMs ??= 0;
    out.cacheScope ??= 'private';
  }
  return out;
}

/**
 * Serve one stateless request (already classified, its envelope already checked). A
 * notification is accepted (202) and dropped: on this revision, HTTP cancellation is the
 * client closing its request, and there is no session for anything else to change.
 */
export function serveStateless(
  deps: StatelessDeps,
  req: IncomingMessage,
  res: ServerResponse,
  message: PostedMessage,
  meta: StatelessRequestMeta,
  principal: Principal,
): void {
  const { gateway, registry, log } = deps;
  if (message.method === undefined) {
    sendError(res, 'INVALID_REQUEST', 'Invalid Request: a stateless client sends no responses', {
      id: message.id,
    });
    return;
  }
  if (message.id === undefined) {
    res.writeHead(202).end();
    return;
  }
  const { id, method } = message;
  const params = message.params as Record<string, unknown> | undefined;
  const channel = new ResponseChannel(res, {}, deps.backlog);
  // server/discover is answered by the gateway at once, as ping in a session: never counted.
  const release =
    deps.inFlight && method !== 'server/discover'
      ? deps.inFlight.acquire(principal)
      : () => undefined;
  if (release === undefined) {
    // As a session over its limit: the same code and reason as a backend at capacity.
    deps.onOverload?.(principal);
    const max = deps.inFlight?.max;
    channel.finish(
      JSON.stringify(
        errorEnvelope(
          id,
          JsonRpcCode.INTERNAL_ERROR,
          `Principal is at capacity: at most ${max} stateless requests in flight (limits.maxInFlightPerSession)`,
          { reason: 'overloaded', limit: 'maxInFlightPerSession', max },
        ),
      ),
      httpStatusOfJsonRpcError(JsonRpcCode.INTERNAL_ERROR),
    );
    return;
  }
  // Answered, or given up by the client closing its request.
  res.once('close', release);
  const controller = new AbortController();
  res.on('close', () => {
    // The client went away before its answer: that is how it cancels on this revision.
    if (!res.writableFinished) controller.abort(new Error('client disconnected'));
  });
  const session: ClientSession = {
    id: undefined,
    server: undefined,
    subscriptions: new Set(),
    principal,
    stateless: meta,
  };
  const context: RequestContext = {
    signal: controller.signal,
    requestInfo: { headers: req.headers },
    sendNotification: async (notification) => {
      if (wanted(notification, meta))
        channel.event(JSON.stringify({ jsonrpc: '2.0', ...notification }), true);
    },
    sendRequest: () =>
      Promise.reject(
        new ProtocolError(
          JsonRpcCode.INTERNAL_ERROR,
          'A stateless request cannot carry server-to-client requests',
        ),
      ),
  };

  const answer = async (): Promise<Result> => {
    if (method === 'server/discover')
      return {
        supportedVersions: [...SUPPORTED_PROTOCOL_VERSIONS],
        capabilities: gatewayCapabilities(gateway, registry),
        instructions: GATEWAY_INSTRUCTIONS,
      };
    if (NOT_STATELESS.has(method))
      throw new ProtocolError(
        JsonRpcCode.METHOD_NOT_FOUND,
        `Method not found: ${shownMethod(method)} is not served to stateless (${meta.protocolVersion}) requests`,
      );
    return handleClientRequest(gateway, registry, session, method, params, context);
  };

  answer().then(
    (result) => {
      channel.finish(JSON.stringify({ jsonrpc: '2.0', id, result: decorate(method, result) }));
    },
    (thrown: unknown) => {
      const error = asProtocolError(thrown);
      if (!(thrown instanceof ProtocolError) && error.code === JsonRpcCode.INTERNAL_ERROR)
        log.warn({ method, err: String(thrown) }, 'stateless request failed');
      channel.finish(
        JSON.stringify(errorEnvelope(id, error.code, error.message, error.data)),
        httpStatusOfJsonRpcError(error.code, error.data),
      );
    },
  );
}
