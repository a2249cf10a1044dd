#!/usr/bin/env node
/**
 * The standalone audit worker (`audit-worker`), for scaling the store side apart from the
 * interceptor: consumes the audit queue into the store, runs the retention schedule, serves
 * `/healthz`, `/readyz` and `/metrics`, and drains on SIGTERM. It prints the start-up line
 * `{"service":"audit-worker","url":...}`.
 *
 * Env: the keys of the schema in config.ts (`AUDIT_WORKER_VARIABLES`), plus OTEL_*; it warns
 * about an AUDIT_* variable that neither it nor the audit-logger reads. DATABASE_URL unset
 * means PGlite under .fleet/, which only one process may open: run the audit-logger with
 * AUDIT_WORKER=false against PostgreSQL instead.
 */
import { registerAuditMetrics } from '@fleet/audit';
import { type Listening, listen, onShutdown, stopOnListenError } from '@fleet/interceptor-kit';
import { startTelemetry, telemetryOptionsFromEnv } from '@fleet/telemetry';
import {
  type AuditWorkerConfig,
  auditWorkerEnvWarnings,
  ConfigError,
  createLogger,
  createWorkerHttpApp,
  parseAuditWorkerEnv,
} from './app.ts';
import { makeDirectories, openStore, orExit, startDrain } from './store-side.ts';

let config: AuditWorkerConfig;
try {
  config = parseAuditWorkerEnv(process.env);
} catch (error) {
  process.stderr.write(`${error instanceof ConfigError ? error.message : String(error)}\n`);
  process.exit(1);
}

const log = createLogger('audit-worker', config.LOG_LEVEL);
for (const { variable, message } of auditWorkerEnvWarnings(process.env))
  log.warn({ variable }, message);
await orExit(() => makeDirectories(config));
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
let listening: Listening | undefined;
// Registered before the start-up line, which tells a supervisor the process is ready: a
// SIGTERM sent as soon as it appears must drain, not kill the process by the signal.
const stop = onShutdown(async () => {
  await listening?.close();
  await drain.close();
  await store.close();
  log.info({}, 'audit worker stopped');
  await telemetry.shutdown();
});
// A HOST or PORT it cannot listen on: one line naming it, then the same drain as on SIGTERM (the
// worker stores its batch, the store closes); exit 1.
listening = await listen(app, {
  service: 'audit-worker',
  host: config.HOST,
  port: config.PORT,
}).catch(stopOnListenError(stop));
if (listening)
  log.info(
    { url: listening.url, retentionDays: config.AUDIT_RETENTION_DAYS },
    'audit worker running',
  );
