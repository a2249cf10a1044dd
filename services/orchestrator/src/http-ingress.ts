/**
 * MCP over Streamable HTTP at `/mcp`, in two revisions on one endpoint:
 * - session based (2025-11-25 and earlier): `initialize` opens a session (`Mcp-Session-Id`),
 *   POST with SSE or JSON responses, GET for server-initiated messages, DELETE to end it;
 * - stateless (2026-07-28): every POST carries its protocol metadata and is served alone
 *   (see stateless.ts); `classifyRequest` decides which revision a POST speaks.
 * In front of both: DNS-rebinding protection (Host/Origin), authentication, a body limit,
 * batch rejection, and a session bound to the principal that opened it. One principal with an
 * id holds at most `limits.maxSessionsPerPrincipal` sessions, and one session (or a principal's
 * stateless requests) at most `limits.maxInFlightPerSession` requests in flight, so that no
 * client fills the session table or the backends' shared slots for the others. Every rejection
 * answers from `HTTP_ERROR_CODES`: its HTTP status, its JSON-RPC code, the request's id when
 * known (never `null`).
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import {
  classifyRequest,
  FleetError,
  type HttpErrorCode,
  httpStatusOfJsonRpcError,
  isStatelessVersion,
  type Principal,
  ProtocolError,
  type RequestRevision,
} from '@fleet/core';
import {
  BodyTooLarge,
  errorEnvelope,
  rebindingGuard as hostOriginGuard,
  readBody,
} from '@fleet/interceptor-kit';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import {
  AuthError,
  type Authenticator,
  type Credentials,
  UNAVAILABLE_RETRY_AFTER_S,
} from './auth.ts';
import type { OrchestratorConfig } from './config.ts';
import type { ClientSession, Gateway } from './gateway.ts';
import { type Logger, logThrottle } from './logger.ts';
import { createClientSession, directRequestHandler } from './mcp-session.ts';
import { bearerChallenge, type ProtectedResource, protectedResource } from './oauth.ts';
import type { Registry } from './registry.ts';
import {
  acceptPost,
  type BacklogAction,
  type BacklogOptions,
  type PostedMessage,
  ResponseChannel,
  SessionTransport,
  sendError,
} from './session-transport.ts';
import { type PrincipalSlots, serveStateless } from './stateless.ts';
import { scrubName } from './telemetry.ts';

const MAX_SESSIONS = 10_000;

interface HttpSession {
  session: ClientSession;
  transport: SessionTransport;
  principal: Principal;
  /** `performance.now()` of the session's last HTTP request. */
  lastSeen: number;
}

/**
 * Slots per principal with an id, at most `max` each; a principal without one (anonymous:
 * every client of `auth.mode: none`) is not counted, since one budget for all of them would
 * let one client use up everyone's.
 */
function principalSlots(max: number): PrincipalSlots {
  const held = new Map<string, number>();
  const free = () => undefined;
  return {
    max,
    acquire(principal) {
      if (principal.id === undefined) return free;
      const key = JSON.stringify([principal.type, principal.id]);
      const count = held.get(key) ?? 0;
      if (count >= max) return undefined;
      held.set(key, count + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (held.get(key) ?? 1) - 1;
        if (left > 0) held.set(key, left);
        else held.delete(key);
      };
    },
  };
}

/** Options for {@link createMcpIngress}. */
export interface McpIngressOptions {
  gateway: Gateway;
  registry: Registry;
  config: OrchestratorConfig;
  authenticator: Authenticator;
  log: Logger;
}

/** The `/mcp` endpoint and its guards, plus a way to close every session. */
export interface McpIngress {
  /** True for a request to the MCP endpoint (`/mcp`, any query). */
  matches(url: string | undefined): boolean;
  /** The OAuth protected resource metadata (`auth.mode: jwt`), else undefined. */
  protectedResource: ProtectedResource | undefined;
  /** Serve one HTTP request to the MCP endpoint. */
  handle(req: IncomingMessage, res: ServerResponse): void;
  sessionCount(): number;
  /**
   * Close the sessions idle for at least `limits.sessionIdleMs` (no request, nothing in
   * flight, no open stream); returns how many. Runs on a timer too.
   */
  expireIdle(now?: number): number;
  /** POSTs being served (their answers not yet sent): what a graceful drain waits for. */
  inFlight(): number;
  closeAll(): Promise<void>;
}

/** The id of a posted message when it is a valid JSON-RPC id (else the error omits it). */
function idOf(body: unknown): string | number | undefined {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' || Number.isSafeInteger(id) ? (id as string | number) : undefined;
}

/** Why a body could not be read, as the answer to send. */
class BodyError extends Error {
  readonly kind: HttpErrorCode;
  constructor(kind: HttpErrorCode, message: string) {
    super(message);
    this.kind = kind;
  }
}

/** The decoded body stream for a `Content-Encoding`, or undefined when unsupported. */
function decoded(req: IncomingMessage): Readable | undefined {
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
  if (encoding === 'identity' || encoding === '') return req;
  const inflate =
    encoding === 'gzip' || encoding === 'x-gzip'
      ? createGunzip()
      : encoding === 'deflate'
        ? createInflate()
        : encoding === 'br'
          ? createBrotliDecompress()
          : undefined;
  return inflate ? req.pipe(inflate) : undefined;
}

/**
 * Read a POST body as JSON: `Content-Type: application/json` (else 415), at most `limit`
 * bytes (declared or counted as they arrive, decoded), UTF-8 only (RFC 8259; a decoder would
 * quietly substitute U+FFFD), any JSON text (a primitive is then an invalid request, not a
 * parse error); an empty body is a parse error.
 */
async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const tooLarge = () => new BodyError('PAYLOAD_TOO_LARGE', `Request body exceeds ${limit} bytes`);
  // A larger declared length is refused first, before the media type is looked at.
  if (Number(req.headers['content-length']) > limit) throw tooLarge();
  const contentType = req.headers['content-type'] ?? '';
  // Streamable HTTP bodies are JSON (as the SDK's own transport and the kit insist); a
  // text/plain or form POST is also what a page can send cross-origin without a preflight.
  const mediaType = contentType.split(';', 1)[0]?.trim().toLowerCase();
  if (mediaType !== 'application/json')
    throw new BodyError(
      'UNSUPPORTED_MEDIA_TYPE',
      'Unsupported Media Type: Content-Type must be application/json',
    );
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType)?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset))
    throw new BodyError('UNSUPPORTED_MEDIA_TYPE', `Unsupported charset "${charset.slice(0, 32)}"`);
  const stream = decoded(req);
  if (!stream) throw new BodyError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported content encoding');
  let buffer: Buffer;
  try {
    buffer = await readBody(req, limit, stream);
  } catch (error) {
    if (error instanceof BodyTooLarge) throw tooLarge();
    throw new BodyError('PARSE_ERROR', 'Parse error: the body could not be read or decoded');
  }
  if (buffer.length === 0) throw new BodyError('PARSE_ERROR', 'Parse error: the body is empty');
  if (!isUtf8(buffer)) throw new BodyError('PARSE_ERROR', 'Parse error: body is not valid UTF-8');
  try {
    return JSON.parse(buffer.toString('utf8'));
  } catch {
    throw new BodyError('PARSE_ERROR', 'Parse error: body is not valid JSON');
  }
}

/**
 * The DNS-rebinding check of DESIGN.md's ingress (a browser page on another origin must not
 * reach a loopback gateway): the reason to refuse `req` (403), or undefined. Loopback hosts
 * and origins pass, and those `security.allowedHosts` / `allowedOrigins` list. The Host is
 * checked on every connection, whatever address the gateway listens on. Without
 * `checkOrigin`, the Host alone (for public documents any origin may read).
 */
export function rebindingGuard(
  config: OrchestratorConfig,
  { checkOrigin = true }: { checkOrigin?: boolean } = {},
): (req: IncomingMessage) => string | undefined {
  return hostOriginGuard({
    allowedHosts: config.security.allowedHosts,
    allowedOrigins: config.security.allowedOrigins,
    hostCheck: 'always',
    checkOrigin,
  });
}

/** How often a client not reading its stream is logged (the first time, then at most this often). */
const BACKLOG_LOG_INTERVAL_MS = 60_000;

/** What is logged when the gateway acts on a client that does not read. */
const BACKLOG_MESSAGES: Record<BacklogAction, string> = {
  'stream-closed': "closed a client's SSE stream it was not reading (limits.maxClientBacklogBytes)",
  'notifications-dropped':
    'dropped notifications for a client not reading its SSE stream (limits.maxClientBacklogBytes)',
  'connection-closed':
    'closed the connection of a client that took none of its answer for limits.requestTimeoutMs',
};

/** How often refusals for `limits.maxInFlightPerSession` / `maxSessionsPerPrincipal` are logged. */
const LIMIT_LOG_INTERVAL_MS = 60_000;

/** How often a JWKS outage is logged (the first refusal, then at most this often). */
const KEYS_FAILING_LOG_INTERVAL_MS = 60_000;

/**
 * Who a limit refused, for the log: the principal's type and id (scrubbed like a span's
 * client-chosen names: an id may be an e-mail address), never its claims.
 */
function principalLabel(principal: Principal): string {
  return principal.id === undefined
    ? principal.type
    : `${principal.type}:${scrubName(principal.id)}`;
}

function jwksUrlOf(config: OrchestratorConfig): string | undefined {
  return config.auth.mode === 'jwt' ? config.auth.jwksUrl : undefined;
}

/** An error's name, code and first words (`fetch failed` hides its reason in `cause`). */
function causeText(error: unknown, depth = 0): string {
  if (!(error instanceof Error)) return 'unknown';
  const code = (error as { code?: unknown }).code;
  const text = `${error.name}${typeof code === 'string' ? ` ${code}` : ''}: ${error.message.slice(0, 200)}`;
  return error.cause === undefined || depth >= 2
    ? text
    : `${text} (${causeText(error.cause, depth + 1)})`;
}

/** Build the `/mcp` endpoint: plain node request handling, no framework on the hot path. */
export function createMcpIngress(options: McpIngressOptions): McpIngress {
  const { gateway, registry, config, authenticator, log } = options;
  const { telemetry } = gateway;
  const sessions = new Map<string, HttpSession>();
  /** Refuse a request from the error table, counted by kind (`fleet.ingress.rejections`). */
  const reject = (
    res: ServerResponse,
    kind: HttpErrorCode,
    message: string,
    rejectOptions: { id?: unknown; data?: unknown; headers?: Record<string, string> } = {},
  ): void => {
    if (res.headersSent) return;
    telemetry.recordRejection(kind.toLowerCase());
    sendError(res, kind, message, rejectOptions);
  };
  const rebindingProblem = rebindingGuard(config);
  const keysFailing = logThrottle(KEYS_FAILING_LOG_INTERVAL_MS);
  const resource = protectedResource(config.auth, rebindingGuard(config, { checkOrigin: false }));

  const samePrincipal = (a: Principal, b: Principal) => a.type === b.type && a.id === b.id;

  // A client that does not read its stream: said at most once a minute, with how often.
  const backlogWarn = logThrottle(BACKLOG_LOG_INTERVAL_MS);
  const backlog: BacklogOptions = {
    maxBacklogBytes: config.limits.maxClientBacklogBytes,
    stallMs: config.limits.requestTimeoutMs,
    onBacklog: (action) => {
      if (backlogWarn.due())
        log.warn(
          {
            action,
            times: backlogWarn.count,
            maxBytes: config.limits.maxClientBacklogBytes,
            stallMs: config.limits.requestTimeoutMs,
          },
          BACKLOG_MESSAGES[action],
        );
    },
  };
  // A client over its share: said at most once a minute per limit, with how often.
  const inFlightWarn = logThrottle(LIMIT_LOG_INTERVAL_MS);
  const maxInFlight = config.limits.maxInFlightPerSession;
  const overloaded = (principal: Principal, revision: 'session' | 'stateless') => {
    telemetry.recordRejection('overloaded');
    if (inFlightWarn.due())
      log.warn(
        {
          principal: principalLabel(principal),
          revision,
          max: maxInFlight,
          times: inFlightWarn.count,
        },
        'refused a request over limits.maxInFlightPerSession',
      );
  };
  const sessionsWarn = logThrottle(LIMIT_LOG_INTERVAL_MS);
  const sessionSlots = principalSlots(config.limits.maxSessionsPerPrincipal);
  const stateless = {
    gateway,
    registry,
    log,
    backlog,
    inFlight: principalSlots(maxInFlight),
    onOverload: (principal: Principal) => overloaded(principal, 'stateless'),
  };

  const serve = async (
    req: IncomingMessage & { auth?: AuthInfo },
    res: ServerResponse,
    principal: Principal,
    body: unknown,
  ): Promise<void> => {
    const sessionId = req.headers['mcp-session-id'];
    const id = idOf(body);
    if (req.method === 'POST') {
      if (Array.isArray(body))
        return reject(res, 'INVALID_REQUEST', 'JSON-RPC batches are not supported');
      if (typeof body !== 'object' || body === null)
        return reject(
          res,
          'INVALID_REQUEST',
          'Invalid Request: expected a JSON-RPC message object',
        );
      let revision: RequestRevision;
      try {
        revision = classifyRequest(body, req.headers);
      } catch (error) {
        if (!(error instanceof ProtocolError)) throw error;
        new ResponseChannel(res).finish(
          JSON.stringify(errorEnvelope(id, error.code, error.message, error.data)),
          httpStatusOfJsonRpcError(error.code, error.data),
        );
        return;
      }
      if (revision.kind === 'stateless') {
        // Served on its own; an Mcp-Session-Id it may carry is ignored, never honoured.
        if (!acceptPost(req, res, body as PostedMessage)) return;
        return serveStateless(stateless, req, res, body as PostedMessage, revision.meta, principal);
      }
    } else if (sessionId === undefined) {
      const version = req.headers['mcp-protocol-version'];
      if (typeof version === 'string' && isStatelessVersion(version))
        return reject(res, 'METHOD_NOT_ALLOWED', `Method not allowed: ${version} only POSTs`, {
          headers: { allow: 'POST' },
        });
    }
    if (typeof sessionId === 'string') {
      const existing = sessions.get(sessionId);
      if (!existing) return reject(res, 'SESSION_NOT_FOUND', 'Session not found', { id });
      if (!samePrincipal(existing.principal, principal)) {
        return reject(res, 'FORBIDDEN', 'Forbidden: the session belongs to another principal', {
          id,
        });
      }
      existing.lastSeen = performance.now();
      return existing.transport.handleRequest(req, res, body);
    }
    const isInitialize =
      req.method === 'POST' && (body as { method?: unknown }).method === 'initialize';
    if (!isInitialize) {
      return reject(
        res,
        'INVALID_REQUEST',
        'Bad Request: no valid session id (send initialize first)',
        {
          id,
        },
      );
    }
    // Taken before the session exists, so that concurrent initializes cannot overshoot.
    const releaseSlot = sessionSlots.acquire(principal);
    if (releaseSlot === undefined) {
      const max = sessionSlots.max;
      if (sessionsWarn.due())
        log.warn(
          { principal: principalLabel(principal), max, times: sessionsWarn.count },
          'refused a session over limits.maxSessionsPerPrincipal',
        );
      return reject(
        res,
        'TOO_MANY_REQUESTS',
        `Too many sessions: this principal holds ${max} (limits.maxSessionsPerPrincipal); end one (DELETE) first`,
        { id, data: { reason: 'limit_exceeded', limit: 'maxSessionsPerPrincipal', max } },
      );
    }
    if (sessions.size >= MAX_SESSIONS) {
      releaseSlot();
      return reject(res, 'UNAVAILABLE', 'Too many sessions', { id });
    }
    const session = createClientSession(gateway, registry);
    const transport = new SessionTransport(backlog, {
      maxInFlight,
      onOverload: () => overloaded(principal, 'session'),
    });
    transport.direct = directRequestHandler(gateway, registry, session);
    transport.onclose = () => {
      // Every way a session ends (DELETE, idle expiry, closeAll, a refused initialize).
      releaseSlot();
      if (session.id) sessions.delete(session.id);
      gateway.closeSession(session);
    };
    try {
      await session.server.connect(transport);
      transport.handleRequest(req, res, body);
      // The transport assigns the session id while accepting initialize, before it answers.
      if (transport.sessionId) {
        session.id = transport.sessionId;
        sessions.set(transport.sessionId, {
          session,
          transport,
          principal,
          lastSeen: performance.now(),
        });
        gateway.sessions.add(session);
      } else {
        // The transport refused the initialize: nothing refers to this server any more.
        releaseSlot();
        void session.server.close().catch(() => undefined);
      }
    } catch (error) {
      releaseSlot();
      log.error({ err: String(error) }, 'session start failed');
      reject(res, 'INTERNAL', 'Internal error', { id });
    }
  };

  const handle = async (req: IncomingMessage & { auth?: AuthInfo }, res: ServerResponse) => {
    const forbidden = rebindingProblem(req);
    if (forbidden !== undefined) return reject(res, 'FORBIDDEN', forbidden);
    let credentials: Credentials;
    try {
      credentials = await authenticator.authenticate(
        req.headers.authorization,
        resource?.resourceOf(req)?.href,
      );
    } catch (error) {
      const refusal = error instanceof AuthError ? error.refusal : 'invalid_token';
      const message = error instanceof FleetError ? error.message : 'authentication failed';
      if (refusal === 'unavailable') {
        if (keysFailing.due()) {
          const cause = (error as Error).cause;
          log.warn(
            { failures: keysFailing.count, jwksUrl: jwksUrlOf(config), err: causeText(cause) },
            'cannot verify bearer tokens: the JWKS could not be fetched',
          );
        }
        return reject(res, 'UNAVAILABLE', `Service unavailable: ${message}`, {
          headers: { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_S) },
        });
      }
      const [kind, status] =
        refusal === 'insufficient_scope'
          ? (['FORBIDDEN', 'Forbidden'] as const)
          : (['UNAUTHORIZED', 'Unauthorized'] as const);
      return reject(res, kind, `${status}: ${message}`, {
        headers: {
          'www-authenticate': bearerChallenge(refusal, message, resource?.challengeParams(req)),
        },
      });
    }
    const { principal, scopes } = credentials;
    req.auth = {
      token: '',
      clientId: principal.id ?? principal.type,
      scopes,
      extra: { principal },
    };
    let body: unknown;
    if (req.method === 'POST') {
      try {
        body = await readJsonBody(req, config.limits.maxBodyBytes);
      } catch (error) {
        if (!(error instanceof BodyError)) throw error;
        // Stop reading a body we refused: close the connection once the answer is out.
        if (error.kind === 'PAYLOAD_TOO_LARGE') res.setHeader('connection', 'close');
        return reject(res, error.kind, error.message);
      }
    }
    await serve(req, res, principal, body);
  };

  // Clients that vanish without DELETE would otherwise hold their sessions (and, at
  // MAX_SESSIONS, refuse every new one) until a restart.
  /** POSTs being served (their answers not yet sent). */
  let inFlight = 0;
  const idleMs = config.limits.sessionIdleMs;
  function expireIdle(now = performance.now()): number {
    let expired = 0;
    for (const [id, entry] of sessions) {
      if (now - entry.lastSeen < idleMs || entry.transport.busy) continue;
      sessions.delete(id);
      expired++;
      void entry.transport.close().catch(() => undefined);
    }
    if (expired > 0) log.info({ expired, idleMs }, 'expired idle MCP sessions');
    return expired;
  }
  const sweeper = setInterval(() => expireIdle(), Math.min(60_000, Math.max(1_000, idleMs / 4)));
  sweeper.unref();
  // One timer for every session's streams, none per request.
  const keepAliveMs = config.limits.sseKeepAliveMs;
  const keepAlive =
    keepAliveMs > 0
      ? setInterval(() => {
          for (const entry of sessions.values()) entry.transport.keepAlive();
        }, keepAliveMs)
      : undefined;
  keepAlive?.unref();

  return {
    protectedResource: resource,
    matches(url) {
      if (url === undefined) return false;
      const end = url.indexOf('?');
      const path = (end < 0 ? url : url.slice(0, end)).toLowerCase();
      return path === '/mcp' || path === '/mcp/';
    },
    handle(req, res) {
      if (req.method === 'POST') {
        inFlight++;
        res.once('close', () => {
          inFlight--;
        });
      }
      handle(req, res).catch((error: unknown) => {
        log.error({ err: String(error) }, 'mcp request failed');
        reject(res, 'INTERNAL', 'Internal error');
      });
    },
    sessionCount: () => sessions.size,
    expireIdle,
    inFlight: () => inFlight,
    async closeAll() {
      clearInterval(sweeper);
      clearInterval(keepAlive);
      await Promise.all(
        [...sessions.values()].map((s) => s.transport.close().catch(() => undefined)),
      );
      sessions.clear();
    },
  };
}
