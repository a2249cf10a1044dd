/**
 * The orchestrator's composition root: builds the gateway, the registry, the ingress and
 * the admin API from dependencies and a parsed config. Does not listen (see main.ts).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Principal } from '@fleet/core';
import { BoundedStdioServerTransport, isLoopbackName } from '@fleet/interceptor-kit';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { Redis } from 'ioredis';
import { type AdminAction, createAdminRouter } from './admin.ts';
import {
  type Authenticator,
  adminScopesOf,
  createAdminAuthorizer,
  createAuthenticator,
} from './auth.ts';
import { Backend } from './backends.ts';
import { type OrchestratorConfig, overridesOf } from './config.ts';
import { type ChainObserver, Gateway } from './gateway.ts';
import { createMcpIngress, rebindingGuard } from './http-ingress.ts';
import type { Logger } from './logger.ts';
import { createClientSession } from './mcp-session.ts';
import { bearerChallenge } from './oauth.ts';
import { Registry } from './registry.ts';
import { createGatewayTelemetry, tracedInvoker } from './telemetry.ts';

export type { AdminAction } from './admin.ts';
export { ConfigError, type OrchestratorConfig, parseConfig } from './config.ts';
export type { ChainExecution, ChainObserver } from './gateway.ts';
export { createLogger, type Logger, silentLogger } from './logger.ts';
export { REDIS_CLIENT_OPTIONS, serviceIdOf } from './registry.ts';

/** What the orchestrator is built from. */
export interface OrchestratorDeps {
  config: OrchestratorConfig;
  log: Logger;
  /** Redis command connection (registrations). Optional: without it only static services exist. */
  redis?: Redis | undefined;
  /** Redis connection for pub/sub (a second connection). */
  subscriber?: Redis | undefined;
  /** Admin API bearer token (`FLEET_ADMIN_TOKEN`). */
  adminToken?: string | undefined;
  /** Receives every chain execution (the audit producer). */
  observer?: ChainObserver | undefined;
  /** Told of every change made through the admin API and every refused attempt (the audit producer). */
  onAdminAction?: ((action: AdminAction) => void) | undefined;
  /** Serves `/metrics` (Prometheus text). */
  metricsHandler?: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  /** Overrides the authenticator built from `config.auth` (tests). */
  authenticator?: Authenticator | undefined;
}

/** A built orchestrator. */
export interface Orchestrator {
  /**
   * The HTTP request listener (`/mcp`, `/admin/*`, `/metrics`, `/healthz`, `/readyz`, and
   * `/.well-known/oauth-protected-resource*` with jwt auth).
   */
  listener: RequestListener;
  app: Express;
  gateway: Gateway;
  registry: Registry;
  backends: Backend[];
  /** Connect backends and discover interceptor services. */
  start(): Promise<void>;
  /** Serve one MCP session over this process's stdin/stdout. */
  serveStdio(principal?: Principal): Promise<void>;
  /** Close sessions, backends and registry connections. */
  close(): Promise<void>;
}

/** How long shutdown waits for calls in flight before it closes their sessions. */
const DRAIN_TIMEOUT_MS = 15_000;

/**
 * Wait until `count()` is 0 or `timeoutMs` has passed (shutdown only: polls every 20 ms).
 * Returns what was still running at the deadline.
 */
async function drain(count: () => number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (count() > 0 && performance.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 20));
  return count();
}

/** Build the orchestrator. */
export function createOrchestrator(deps: OrchestratorDeps): Orchestrator {
  const { config, log } = deps;
  const telemetry = createGatewayTelemetry();
  const registry = new Registry({
    staticServices: config.interceptors.map((s) => ({
      url: s.url,
      token: s.token,
      overrides: overridesOf(s),
    })),
    redis: deps.redis,
    subscriber: deps.subscriber,
    prefix: config.registry.prefix,
    healthIntervalMs: config.registry.healthIntervalMs,
    log,
    wrapInvoker: (invoker, serviceId) => tracedInvoker(invoker, serviceId, telemetry.tracer),
  });
  let gateway: Gateway | undefined;
  const backends = config.backends.map(
    (backend) =>
      new Backend(
        backend,
        {
          onNotification: (b, n) => gateway?.onBackendNotification(b, n),
          onServerRequest: async (b, r, signal) => {
            if (!gateway) throw new Error('gateway not ready');
            return gateway.onServerRequest(b, r, signal);
          },
          onConnected: (b, again) => gateway?.onBackendConnected(b, again),
          onRefused: (b, reason, origin) => telemetry.recordBackendRefusal(b.id, reason, origin),
        },
        log,
        { maxMessageBytes: config.limits.maxBackendMessageBytes },
      ),
  );
  gateway = new Gateway({ backends, registry, config, log, telemetry, observer: deps.observer });
  const authenticator = deps.authenticator ?? createAuthenticator(config.auth);
  const mcp = createMcpIngress({
    gateway,
    registry,
    config,
    authenticator,
    log,
  });

  const app = express();
  app.disable('x-powered-by');
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok', service: 'orchestrator' });
  });
  app.get('/readyz', (_req, res) => {
    const pending = registry.undiscovered();
    const ready = pending.length === 0;
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ready' : 'not ready',
      service: 'orchestrator',
      ...(ready ? {} : { pendingInterceptorServices: pending }),
      backends: backends.map((b) => ({ id: b.id, connected: b.connected })),
    });
  });
  if (deps.metricsHandler) {
    const handler = deps.metricsHandler;
    app.get('/metrics', (req, res) => handler(req, res));
  }
  // The admin API can register an interceptor service that then sees every payload: a web
  // page must not reach it through DNS rebinding either (same Host/Origin rule as /mcp).
  const rebindingProblem = rebindingGuard(config);
  const authorizeAdmin = createAdminAuthorizer(config.auth, deps.adminToken, authenticator);
  const adminScopes = adminScopesOf(config.auth);
  app.use('/admin', (req, res, next) => {
    const forbidden = rebindingProblem(req);
    if (forbidden === undefined) return next();
    res.status(403).json({ error: forbidden });
  });
  app.use(
    '/admin',
    createAdminRouter({
      registry,
      log,
      authorize: (req) =>
        authorizeAdmin(req.headers.authorization, mcp.protectedResource?.resourceOf(req)?.href),
      // Points at the OAuth metadata only when admin JWTs are accepted at all.
      challenge: (req, refused) =>
        bearerChallenge(
          refused.refusal,
          refused.message,
          adminScopes === undefined
            ? undefined
            : mcp.protectedResource?.challengeParams(req, adminScopes),
        ),
      speculativeMutators: config.chain.speculativeMutators,
      onAction: deps.onAdminAction,
    }),
  );
  app.use((_req, res) => {
    res.status(404).json({ error: 'not found' });
  });
  // Whatever express itself refuses (a path whose percent-encoding does not decode, ...)
  // is answered in JSON like every other error, never with its HTML page and stack.
  app.use(
    (error: Error & { status?: unknown }, _req: Request, res: Response, _next: NextFunction) => {
      const status =
        typeof error.status === 'number' && error.status >= 400 && error.status < 600
          ? error.status
          : 500;
      if (status >= 500) log.error({ err: String(error) }, 'request failed');
      if (res.headersSent) return;
      const message =
        error instanceof URIError
          ? 'malformed percent-encoding in the URL'
          : status < 500
            ? 'bad request'
            : 'internal error';
      res.status(status).json({ error: message });
    },
  );

  const activeGateway = gateway;
  /** Requests of the stdio session being handled (see serveStdio). */
  let stdioInFlight = 0;
  // MCP traffic is served by plain node handling (no framework on the hot path); the rest
  // (health, metrics, admin) by express.
  const listener: RequestListener = (req, res) => {
    if (mcp.matches(req.url)) mcp.handle(req, res);
    else if (mcp.protectedResource?.matches(req.url)) mcp.protectedResource.handle(req, res);
    else app(req, res);
  };
  return {
    listener,
    app,
    gateway: activeGateway,
    registry,
    backends,
    async start() {
      await Promise.all(backends.map((b) => b.start()));
      await registry.start();
    },
    async serveStdio(principal) {
      const session = createClientSession(activeGateway, registry, principal);
      // Counted for the drain: a client that closes stdin right after its last request (a
      // piped script) still gets every answer.
      const handler = session.server.fallbackRequestHandler;
      if (handler) {
        session.server.fallbackRequestHandler = async (request, extra) => {
          stdioInFlight++;
          try {
            return await handler(request, extra);
          } finally {
            stdioInFlight--;
          }
        };
      }
      activeGateway.sessions.add(session);
      const transport = new BoundedStdioServerTransport(config.limits.maxBodyBytes);
      transport.onclose = () => activeGateway.closeSession(session);
      await session.server.connect(transport);
    },
    async close() {
      // Calls in flight finish first (graceful drain); then sessions and their streams close.
      const unfinished = await drain(() => mcp.inFlight() + stdioInFlight, DRAIN_TIMEOUT_MS);
      if (unfinished > 0)
        log.warn({ unfinished, drainMs: DRAIN_TIMEOUT_MS }, 'closing with calls still in flight');
      await mcp.closeAll();
      activeGateway.flushAudits();
      await Promise.all(backends.map((b) => b.close()));
      await registry.close();
    },
  };
}

/**
 * What a gateway listening on `host` leaves open to whoever can reach it, one sentence each:
 * the admin API without FLEET_ADMIN_TOKEN or `auth.adminScopes`, MCP without authentication.
 * Nothing on loopback (the default), where only this machine's users can connect.
 */
export function exposureWarnings(
  config: OrchestratorConfig,
  host: string,
  adminToken: string | undefined,
): string[] {
  // A listen address that only takes connections from this machine.
  if (isLoopbackName(host)) return [];
  const warnings: string[] = [];
  if (!adminToken && adminScopesOf(config.auth) === undefined)
    warnings.push(
      `the admin API is open to anyone who can reach ${host}: a caller can register an interceptor service that sees every payload; set FLEET_ADMIN_TOKEN or auth.adminScopes`,
    );
  if (config.auth.mode === 'none')
    warnings.push(
      `MCP clients are not authenticated (auth.mode: none) on ${host}: every caller is anonymous; set auth.mode to tokens or jwt`,
    );
  return warnings;
}
