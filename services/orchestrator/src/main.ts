#!/usr/bin/env node
/**
 * The orchestrator process: reads the environment and FLEET_CONFIG once, wires Redis,
 * OpenTelemetry and the audit producer, listens (or serves stdio with `--stdio`), and drains
 * on SIGTERM.
 *
 * Env: HOST (127.0.0.1), PORT (8080; 0 = free port), FLEET_CONFIG (YAML path), REDIS_URL
 * (redis://127.0.0.1:6379), FLEET_ADMIN_TOKEN, LOG_LEVEL (info), AUDIT_JOURNAL
 * (.fleet/orchestrator-audit.ndjson), AUDIT_MAX_BUFFERED (the audit producer's
 * DEFAULT_MAX_BUFFERED), standard OTEL_* variables.
 */
import { Console } from 'node:console';
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, resolve } from 'node:path';
import {
  auditLoggerFrom,
  createAuditProducer,
  DEFAULT_MAX_BUFFERED,
  registerAuditMetrics,
} from '@fleet/audit';
import { journalDirectoryProblem, makeDirectory } from '@fleet/audit/directory';
import { envBoolean, envInteger, envLogLevel, envRedisUrl, type LogLevel } from '@fleet/core';
import { listen, onShutdown, stopOnListenError } from '@fleet/interceptor-kit';
import { startTelemetry, telemetryOptionsFromEnv } from '@fleet/telemetry';
import { Redis } from 'ioredis';
import {
  ConfigError,
  createLogger,
  createOrchestrator,
  exposureWarnings,
  parseConfig,
  REDIS_CLIENT_OPTIONS,
} from './app.ts';
import { createAuditObserver } from './audit.ts';

const env = process.env;
const stdio = process.argv.includes('--stdio');

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}
let level: LogLevel = 'info';
try {
  level = envLogLevel(env);
} catch (error) {
  fail((error as Error).message);
}
const log = createLogger('orchestrator', level);

let configText = '';
if (env.FLEET_CONFIG) {
  try {
    configText = readFileSync(env.FLEET_CONFIG, 'utf8');
  } catch (error) {
    fail(`cannot read FLEET_CONFIG ${env.FLEET_CONFIG}: ${(error as Error).message}`);
  }
}
let config: ReturnType<typeof parseConfig>;
try {
  config = parseConfig(configText, env);
} catch (error) {
  fail(error instanceof ConfigError ? error.message : String(error));
}
let port = 8080;
let maxBuffered = DEFAULT_MAX_BUFFERED;
let writeAhead = true;
let redisUrl: string;
try {
  redisUrl = envRedisUrl(env);
  port = envInteger(env, 'PORT', 8080, { max: 65_535 });
  maxBuffered = envInteger(env, 'AUDIT_MAX_BUFFERED', DEFAULT_MAX_BUFFERED);
  writeAhead = envBoolean(env, 'AUDIT_WRITE_AHEAD', true);
} catch (error) {
  fail((error as Error).message);
}
const journalPath = env.AUDIT_JOURNAL ?? '.fleet/orchestrator-audit.ndjson';
if (config.audit.enabled) {
  // The producer would start without a journal it cannot lock; a path the operator got wrong
  // ends the start instead.
  const dir = dirname(resolve(journalPath));
  try {
    makeDirectory(dir);
  } catch (error) {
    fail(journalDirectoryProblem(dir, error));
  }
}

if (stdio) {
  // stdout carries the MCP session: anything else that prints (e.g. the console span
  // exporter) must go to stderr.
  globalThis.console = new Console({ stdout: process.stderr, stderr: process.stderr });
}
const telemetry = startTelemetry(
  telemetryOptionsFromEnv(env, { serviceName: 'orchestrator', serviceVersion: '0.1.0' }),
);
const redis = new Redis(redisUrl, { ...REDIS_CLIENT_OPTIONS });
const subscriber = new Redis(redisUrl, { ...REDIS_CLIENT_OPTIONS });
for (const connection of [redis, subscriber]) {
  connection.on('error', (error: Error) =>
    log.warn({ err: error.message }, 'redis connection error'),
  );
}

const producer = config.audit.enabled
  ? createAuditProducer({
      connection: redisUrl,
      queue: config.audit.queue,
      // One job per batch of records: BullMQ's per-job cost otherwise caps the pipeline.
      batchJobs: true,
      journalPath,
      maxBuffered,
      // Every served call's records survive the process being killed before their batch goes.
      writeAhead,
      logger: auditLoggerFrom(log),
    })
  : undefined;
// Read from the producer's counters at each /metrics scrape: nothing per record.
if (producer) registerAuditMetrics(telemetry.meter, { producer });

const auditObserver = producer ? createAuditObserver(producer, log) : undefined;
const orchestrator = createOrchestrator({
  config,
  log,
  redis,
  subscriber,
  adminToken: env.FLEET_ADMIN_TOKEN || undefined,
  observer: auditObserver,
  onAdminAction: auditObserver && ((action) => auditObserver.adminAction(action)),
  metricsHandler: telemetry.metricsHandler,
});
/** Closes the HTTP server once it listens (never for stdio, or when it could not listen). */
let stopListening: (() => Promise<void>) | undefined;
// Registered before start-up, which waits on interceptor services and Redis: a SIGTERM then
// still stops the process.
const shutdown = onShutdown(
  async () => {
    // Stop accepting; let calls in flight finish, then end the sessions (their SSE streams
    // would hold the server open) and wait for the HTTP server to close.
    const drained = stopListening?.();
    await orchestrator.close();
    log.info({}, 'sessions, backends and registry closed');
    if (drained) {
      await drained;
      log.info({}, 'http server drained');
    }
    await producer?.close();
    log.info({}, 'audit producer closed');
    redis.disconnect();
    subscriber.disconnect();
    await telemetry.shutdown();
  },
  // Drain (15 s) + HTTP close + audit flush; the chart's grace period is 45 s.
  { deadlineMs: 40_000 },
);
await orchestrator.start();

if (stdio) {
  await orchestrator.serveStdio({ type: 'user', id: userInfo().username });
} else {
  const host = env.HOST || '127.0.0.1';
  for (const warning of exposureWarnings(config, host, env.FLEET_ADMIN_TOKEN || undefined))
    log.warn({ host }, warning);
  // A HOST or PORT it cannot listen on: one line naming it, then what is open closes (the
  // audit producer releases its journal); exit 1.
  const listening = await listen(orchestrator.listener, {
    service: 'orchestrator',
    host,
    port,
    requestTimeoutMs: config.limits.requestTimeoutMs,
    headersTimeoutMs: config.limits.headersTimeoutMs,
  }).catch(stopOnListenError(shutdown));
  if (listening) {
    log.info({ url: listening.url }, 'orchestrator listening');
    // Longer than the orchestrator's own drain (app.ts), so calls in flight are never cut.
    stopListening = () => listening.close(20_000);
  }
}

if (stdio) {
  // The client closing our stdin ends the session: shut down like on SIGTERM.
  process.stdin.once('end', () => shutdown('stdin closed'));
  process.stdin.once('close', () => shutdown('stdin closed'));
}
