#!/usr/bin/env node
/**
 * The standalone audit worker (`audit-worker`), for scaling the store side apart from the
 * interceptor: consumes the audit queue into the store, runs the retention schedule, serves
 * `/healthz`, `/readyz` and `/metrics`, and drains on SIGTERM. It prints the start-up line
 * `{"service":"audit-worker","url":...}`.
 *
 * Env: HOST, PORT (8084), REDIS_URL, DATABASE_URL (unset: PGlite under .fleet/, which only
 * one process may open: run the audit-logger with AUDIT_WORKER=false against PostgreSQL
 * instead), AUDIT_PGLITE_DIR, AUDIT_DB_SCHEMA, AUDIT_RETENTION_DAYS, AUDIT_QUEUE,
 * AUDIT_PREFIX, AUDIT_BATCH_SIZE, AUDIT_WORKER_CONCURRENCY, LOG_LEVEL, OTEL_*.
 */
import { listen, onShutdown } from '@fleet/interceptor-kit';
import { startTelemetry, telemetryOptionsFromEnv } from '@fleet/telemetry';
import {
  type AuditWorkerConfig,
  ConfigError,
  createLogger,
  createWorkerHttpApp,
  parseAuditWorkerEnv,
  registerAuditMetrics,
} from './app.ts';
import { openStore, orExit, startDrain } from './store-side.ts';

let config: AuditWorkerConfig;
try {
  config = parseAuditWorkerEnv(process.env);
} catch (error) {
  process.stderr.write(`${error instanceof ConfigError ? error.message : String(error)}\n`);
  process.exit(1);
}

const log = createLogger('audit-worker', config.LOG_LEVEL);
const telemetry = startTelemetry(
  telemetryOptionsFromEnv(process.env, { serviceName: 'audit-worker', serviceVersion: '0.1.0' }),
);
const store = await orExit(() => openStore(config, log));
const drain = startDrain(config, store, log);
const { worker } = drain;
registerAuditMetrics(telemetry.meter, { worker });

const app = createWorkerHttpApp({
  ready: async () => worker.isRunning() && (await store.ping()),
  metricsHandler: telemetry.metricsHandler,
});
const listening = await listen(app, {
  service: 'audit-worker',
  host: config.HOST,
  port: config.PORT,
});
log.info(
  { url: listening.url, retentionDays: config.AUDIT_RETENTION_DAYS },
  'audit worker running',
);

onShutdown(async () => {
  await listening.close();
  await drain.close();
  await store.close();
  log.info({}, 'audit worker stopped');
  await telemetry.shutdown();
});
