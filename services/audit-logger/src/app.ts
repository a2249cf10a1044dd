/**
 * The audit-logger service, built from its dependencies (does not listen, reads no
 * environment): the `audit-logger` interceptor served over MCP at `/mcp`, the audit query API
 * at `/api/audit/*`, the trace viewer at `/`, and `/metrics`, `/healthz`, `/readyz`.
 * Also the small HTTP front of the standalone audit worker.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuditStore } from '@fleet/audit';
import {
  createInterceptorHost,
  createInterceptorHttpApp,
  type InterceptorHost,
  type InvokedEvent,
} from '@fleet/interceptor-kit';
import express, { type Express } from 'express';
import { createAuditApiRouter } from './api.ts';
import { type AuditSink, createAuditLoggerInterceptor } from './interceptor.ts';
import { type Logger, silentLogger } from './logger.ts';
import { createViewerRouter } from './viewer/index.ts';

export type { ApiErrorBody, AuditApiOptions } from './api.ts';
export { createAuditApiRouter } from './api.ts';
export type { AuditLoggerConfig, AuditWorkerConfig, EnvWarning } from './config.ts';
export {
  AUDIT_LOGGER_PORT,
  AUDIT_WORKER_PORT,
  auditLoggerEnvWarnings,
  auditWorkerEnvWarnings,
  ConfigError,
  DEFAULT_AUDIT_LOGGER_JOURNAL,
  parseAuditLoggerEnv,
  parseAuditWorkerEnv,
} from './config.ts';
export type { AuditLoggerInterceptorOptions, AuditSink } from './interceptor.ts';
export {
  AUDIT_LOGGER_INTERCEPTOR,
  createAuditLoggerInterceptor,
  DEFAULT_AUDITED_CLAIMS,
  invocationRecord,
  targetOf,
} from './interceptor.ts';
export type { Logger } from './logger.ts';
export { auditLoggerOf, createLogger, silentLogger } from './logger.ts';
export { createViewerRouter, DEFAULT_PUBLIC_DIR } from './viewer/index.ts';

/** A node request handler (e.g. the telemetry's Prometheus handler). */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** What {@link createAuditLoggerApp} is built from. */
export interface AuditLoggerDeps {
  /** Where invocation records go (the audit producer: never waits on Redis). */
  sink: AuditSink;
  /** What the query API reads. */
  store: AuditStore;
  /** `FLEET_TOKEN`: bearer required on `/mcp` when set. */
  token?: string | undefined;
  /** `AUDIT_READ_TOKEN`: bearer required on `/api/audit/*` when set. */
  readToken?: string | undefined;
  /** `TRACE_URL_TEMPLATE`, e.g. `http://jaeger:16686/trace/{traceId}`. */
  traceUrlTemplate?: string | undefined;
  /** Characters of payload kept as a (scrubbed) preview. Default 0: none. */
  previewChars?: number;
  /** Serves `/metrics` when given. */
  metricsHandler?: NodeHandler | undefined;
  /** Readiness for `/readyz`. Default: the store answers. */
  ready?: () => boolean | Promise<boolean>;
  /** Called after every invocation (metrics). */
  onInvoked?: (event: InvokedEvent) => void;
  /** Where the viewer's files are. Default the package's `public/`. */
  publicDir?: string;
  logger?: Logger;
}

/** The built service. */
export interface AuditLoggerApp {
  /** Pass to `listen()` / `http.createServer`. */
  listener: (req: IncomingMessage, res: ServerResponse) => void;
  /** The express app behind the MCP fast path. */
  app: Express;
  host: InterceptorHost;
}

/** Build the audit-logger service. */
export function createAuditLoggerApp(deps: AuditLoggerDeps): AuditLoggerApp {
  const logger = deps.logger ?? silentLogger;
  let lastError = 0;
  const interceptor = createAuditLoggerInterceptor({
    sink: deps.sink,
    previewChars: deps.previewChars ?? 0,
    onError: (error) => {
      const now = Date.now();
      if (now - lastError < 10_000) return;
      lastError = now;
      logger.warn({ err: String(error) }, 'audit record not queued');
    },
  });
  const host = createInterceptorHost([interceptor], {
    ...(deps.onInvoked ? { onInvoked: deps.onInvoked } : {}),
  });
  const { store, metricsHandler } = deps;
  const { listener, app } = createInterceptorHttpApp(host, {
    name: 'audit-logger',
    version: '0.1.0',
    token: deps.token,
    ready: deps.ready ?? (() => store.ping()),
    extend(app) {
      if (metricsHandler) app.get('/metrics', (req, res) => metricsHandler(req, res));
      app.use(
        '/api/audit',
        createAuditApiRouter({
          store,
          readToken: deps.readToken,
          traceUrlTemplate: deps.traceUrlTemplate,
          logger,
        }),
      );
      app.use('/', createViewerRouter(deps.publicDir));
    },
  });
  return { listener, app, host };
}

/** What {@link createWorkerHttpApp} is built from. */
export interface WorkerHttpDeps {
  /** Readiness for `/readyz` (worker consuming, store answering). */
  ready: () => boolean | Promise<boolean>;
  metricsHandler?: NodeHandler | undefined;
}

/** The standalone worker's HTTP front: `/healthz`, `/readyz`, `/metrics`. */
export function createWorkerHttpApp(deps: WorkerHttpDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok', service: 'audit-worker' });
  });
  app.get('/readyz', async (_req, res) => {
    let ok = false;
    try {
      ok = await deps.ready();
    } catch {
      ok = false;
    }
    res
      .status(ok ? 200 : 503)
      .json({ status: ok ? 'ready' : 'not ready', service: 'audit-worker' });
  });
  const { metricsHandler } = deps;
  if (metricsHandler) app.get('/metrics', (req, res) => metricsHandler(req, res));
  app.use((_req, res) => {
    res.status(404).json({ error: 'not found' });
  });
  return app;
}
