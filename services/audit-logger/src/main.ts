#!/usr/bin/env node
/**
 * The audit-logger process: reads the environment once (warning about any AUDIT_* variable it
 * does not read), checks that the PGlite directory and the journal are not held by another
 * process, creates their directories, opens the audit store (PostgreSQL when DATABASE_URL is
 * set, else PGlite under .fleet/), starts the audit producer, the worker and the retention
 * schedule (unless AUDIT_WORKER=false), listens, and drains on SIGTERM.
 *
 * Env: the keys of the schema in config.ts (`AUDIT_LOGGER_VARIABLES`), plus OTEL_*; README.md
 * has the table.
 */
import { createAuditProducer, registerAuditMetrics } from '@fleet/audit';
import {
  type Listening,
  listen,
  observeInvocations,
  onShutdown,
  stopOnListenError,
} from '@fleet/interceptor-kit';
import { startTelemetry, telemetryOptionsFromEnv } from '@fleet/telemetry';
import {
  type AuditLoggerConfig,
  auditLoggerEnvWarnings,
  auditLoggerOf,
  ConfigError,
  createAuditLoggerApp,
  createLogger,
  parseAuditLoggerEnv,
} from './app.ts';
import {
  checkLocks,
  type Drain,
  makeDirectories,
  openStore,
  orExit,
  startDrain,
} from './store-side.ts';

let config: AuditLoggerConfig;
try {
  config = parseAuditLoggerEnv(process.env);
} catch (error) {
  process.stderr.write(`${error instanceof ConfigError ? error.message : String(error)}\n`);
  process.exit(1);
}

const log = createLogger('audit-logger', config.LOG_LEVEL);
for (const { variable, message } of auditLoggerEnvWarnings(process.env))
  log.warn({ variable }, message);
// Before anything slow (a PGlite store takes seconds to set up): a held lock ends the start.
await orExit(() => checkLocks(config, config.AUDIT_JOURNAL));
await orExit(() => makeDirectories(config, config.AUDIT_JOURNAL));
const auditLog = auditLoggerOf(log);
const telemetry = startTelemetry(
  telemetryOptionsFromEnv(process.env, { serviceName: 'audit-logger', serviceVersion: '0.1.0' }),
);
const queue = {
  connection: config.REDIS_URL,
  queue: config.AUDIT_QUEUE,
  ...(config.AUDIT_PREFIX ? { prefix: config.AUDIT_PREFIX } : {}),
};

const store = await orExit(() => openStore(config, log));

const producer = await orExit(() =>
  createAuditProducer({
    ...queue,
    journalPath: config.AUDIT_JOURNAL,
    maxBuffered: config.AUDIT_MAX_BUFFERED,
    // One queue job per batch of records: what lets the pipeline run past BullMQ's per-job rate.
    batchJobs: config.AUDIT_BATCH_JOBS,
    // The records of answered invocations survive the process being killed before their batch goes.
    writeAhead: config.AUDIT_WRITE_AHEAD,
    logger: auditLog,
  }),
);
// The store side runs here too unless a separate audit-worker does it.
const drain: Drain | undefined = config.AUDIT_WORKER ? startDrain(config, store, log) : undefined;
registerAuditMetrics(telemetry.meter, { producer, worker: drain?.worker });

const service = createAuditLoggerApp({
  sink: producer,
  store,
  token: config.FLEET_TOKEN,
  readToken: config.AUDIT_READ_TOKEN,
  traceUrlTemplate: config.TRACE_URL_TEMPLATE,
  previewChars: config.AUDIT_PAYLOAD_PREVIEW,
  metricsHandler: telemetry.metricsHandler,
  logger: log,
  onInvoked: observeInvocations({ metrics: telemetry.metrics, logger: log }),
});
let listening: Listening | undefined;
// Registered before the start-up line, which tells a supervisor the process is ready: a
// SIGTERM sent as soon as it appears must drain, not kill the process by the signal.
const stop = onShutdown(async () => {
  // In-flight invocations finish (their records are queued), then the producer delivers
  // or journals what it holds, the worker stores its current batch, and the store closes.
  await listening?.close();
  await producer.close();
  await drain?.close();
  await store.close();
  log.info({}, 'audit-logger stopped');
  await telemetry.shutdown();
});
// A HOST or PORT it cannot listen on: one line naming it, then the same drain as on SIGTERM (the
// worker stores its batch, the producer releases its journal, the store closes); exit 1.
listening = await listen(service.listener, {
  service: 'audit-logger',
  host: config.HOST,
  port: config.PORT,
}).catch(stopOnListenError(stop));
if (listening)
  log.info(
    { url: listening.url, worker: config.AUDIT_WORKER, retentionDays: config.AUDIT_RETENTION_DAYS },
    'audit-logger listening',
  );
