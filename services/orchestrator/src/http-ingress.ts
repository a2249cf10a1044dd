/**
 * MCP over Streamable HTTP at `/mcp`, in two revisions on one endpoint:
 * - session based (2025-11-25 and earlier): `initialize` opens a session (`Mcp-Session-Id`),
 *   POST with SSE or JSON responses, GET for server-initiated messages, DELETE to end it;
 * - stateless (2026-07-28): every POST carries its protocol metadata and is served alone
 *   (see stateless.ts); `classifyRequest` decides which revision a POST speaks.
 * In front of both: DNS-rebinding protection (Host/Origin), authentication, a body limit,
 * batch rejection, and a session bound to the principal that opened it. Every rejection
 * answers from `HTTP_ERROR_CODES`: its HTTP status, its JSON-RPC code, the request's id when
 * known (never `null`).
 */
import { isUtf8 } from 'node:buffer';
import {
  classifyRequest,
  FleetError,
  HTTP_ERROR_CODES,
  type HttpErrorCode,
  httpStatusOfJsonRpcError,
  isStatelessVersion,
  type Principal,
  ProtocolError,
  type RequestRevision,
} from '@fleet/core';
import { errorEnvelope } from '@fleet/interceptor-kit';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { Authenticator } from './auth.ts';
import type { OrchestratorConfig } from './config.ts';
import type { ClientSession, Gateway } from './gateway.ts';
import type { Logger } from './logger.ts';
import { createClientSession } from './mcp-session.ts';
import type { Registry } from './registry.ts';
import { acceptPost, type PostedMessage, SessionTransport } from './session-transport.ts';
import { serveStateless } from './stateless.ts';

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
const MAX_SESSIONS = 10_000;

interface HttpSession {
  session: ClientSession;
  transport: SessionTransport;
  principal: Principal;
}

function hostname(hostHeader: string): string {
  if (hostHeader.startsWith('[')) return hostHeader.slice(0, hostHeader.indexOf(']') + 1);
  return hostHeader.split(':')[0] ?? '';
}

/** Options for {@link createMcpRouter}. */
export interface McpRouterOptions {
  gateway: Gateway;
  registry: Registry;
  config: OrchestratorConfig;
  authenticator: Authenticator;
  log: Logger;
}

/** The `/mcp` endpoint and its guards, plus a way to close every session. */
export interface McpRouter {
  router: Router;
  sessionCount(): number;
  closeAll(): Promise<void>;
}

function reject(
  res: Response,
  kind: HttpErrorCode,
  message: string,
  options: { id?: unknown; data?: unknown; headers?: Record<string, string> } = {},
): void {
  const { http, jsonrpc } = HTTP_ERROR_CODES[kind];
  for (const [k, v] of Object.entries(options.headers ?? {})) res.setHeader(k, v);
  res.status(http).json(errorEnvelope(options.id, jsonrpc, message, options.data));
}

/** The id of a posted message when it is a valid JSON-RPC id (else the error omits it). */
function idOf(body: unknown): string | number | undefined {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' || Number.isSafeInteger(id) ? (id as string | number) : undefined;
}

/** Build the `/mcp` router. */
export function createMcpRouter(options: McpRouterOptions): McpRouter {
  const { gateway, registry, config, authenticator, log } = options;
  const sessions = new Map<string, HttpSession>();
  const allowedHosts = new Set(config.security.allowedHosts.map((h) => h.toLowerCase()));
  const allowedOrigins = new Set(config.security.allowedOrigins.map((o) => o.toLowerCase()));
  const router = express.Router();

  // DNS rebinding: a browser page on another origin must not reach a loopback gateway.
  router.use((req: Request, res: Response, next: NextFunction) => {
    const host = (req.headers.host ?? '').toLowerCase();
    if (
      !LOOPBACK_HOSTS.has(hostname(host)) &&
      !allowedHosts.has(host) &&
      !allowedHosts.has(hostname(host))
    ) {
      return reject(res, 'FORBIDDEN', `Forbidden: Host "${req.headers.host ?? ''}" is not allowed`);
    }
    const origin = req.headers.origin?.toLowerCase();
    if (origin !== undefined && !allowedOrigins.has(origin)) {
      let ok = false;
      try {
        ok =
          LOOPBACK_HOSTS.has(new URL(origin).hostname) ||
          LOOPBACK_HOSTS.has(`[${new URL(origin).hostname}]`);
      } catch {
        ok = false;
      }
      if (!ok)
        return reject(res, 'FORBIDDEN', `Forbidden: Origin "${req.headers.origin}" is not allowed`);
    }
    next();
  });

  router.use(async (req: Request, res: Response, next: NextFunction) => {
    try {
      const principal = await authenticator.authenticate(req.headers.authorization);
      (req as Request & { auth?: unknown }).auth = {
        token: '',
        clientId: principal.id ?? principal.type,
        scopes: [],
        extra: { principal },
      };
      res.locals.principal = principal;
      next();
    } catch (error) {
      const message = error instanceof FleetError ? error.message : 'authentication failed';
      reject(res, 'UNAUTHORIZED', `Unauthorized: ${message}`, {
        headers: { 'www-authenticate': 'Bearer' },
      });
    }
  });

  router.post(
    '/',
    express.json({
      limit: config.limits.maxBodyBytes,
      type: () => true,
      // Any JSON text parses; a primitive then gets -32600 (not a message), not -32700.
      strict: false,
      // JSON text must be UTF-8 (RFC 8259); the decoder would quietly substitute U+FFFD.
      verify: (_req, _res, buffer) => {
        if (!isUtf8(buffer)) throw new Error('invalid UTF-8');
      },
    }),
  );

  router.use(
    (
      error: Error & { type?: string; status?: number },
      _req: Request,
      res: Response,
      next: NextFunction,
    ) => {
      if (error.type === 'entity.too.large') {
        return reject(
          res,
          'PAYLOAD_TOO_LARGE',
          `Request body exceeds ${config.limits.maxBodyBytes} bytes`,
        );
      }
      if (error.type === 'entity.parse.failed')
        return reject(res, 'PARSE_ERROR', 'Parse error: body is not valid JSON');
      if (error.type === 'entity.verify.failed')
        return reject(res, 'PARSE_ERROR', 'Parse error: body is not valid UTF-8');
      if (error.type === 'encoding.unsupported' || error.type === 'charset.unsupported') {
        return reject(res, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported content encoding');
      }
      next(error);
    },
  );

  const samePrincipal = (a: Principal, b: Principal) => a.type === b.type && a.id === b.id;

  const stateless = { gateway, registry, log };

  router.all('/', async (req: Request, res: Response) => {
    const principal = res.locals.principal as Principal;
    const sessionId = req.headers['mcp-session-id'];
    const id = idOf(req.body);
    if (req.method === 'POST') {
      const body: unknown = req.body;
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
        res
          .status(httpStatusOfJsonRpcError(error.code))
          .json(errorEnvelope(id, error.code, error.message, error.data));
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
      return existing.transport.handleRequest(req, res, req.body);
    }
    const isInitialize =
      req.method === 'POST' && (req.body as { method?: unknown }).method === 'initialize';
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
    if (sessions.size >= MAX_SESSIONS)
      return reject(res, 'UNAVAILABLE', 'Too many sessions', { id });
    const session = createClientSession(gateway, registry);
    const transport = new SessionTransport();
    transport.onclose = () => {
      if (session.id) sessions.delete(session.id);
      gateway.sessions.delete(session);
    };
    try {
      await session.server.connect(transport);
      transport.handleRequest(req, res, req.body);
      // The transport assigns the session id while accepting initialize, before it answers.
      if (transport.sessionId) {
        session.id = transport.sessionId;
        sessions.set(transport.sessionId, { session, transport, principal });
        gateway.sessions.add(session);
      } else {
        // The transport refused the initialize: nothing refers to this server any more.
        void session.server.close().catch(() => undefined);
      }
    } catch (error) {
      log.error({ err: String(error) }, 'session start failed');
      if (!res.headersSent) reject(res, 'INTERNAL', 'Internal error', { id });
    }
  });

  return {
    router,
    sessionCount: () => sessions.size,
    async closeAll() {
      await Promise.all(
        [...sessions.values()].map((s) => s.transport.close().catch(() => undefined)),
      );
      sessions.clear();
    },
  };
}
