#!/usr/bin/env node
/**
 * The policy-validator process. Env: HOST (127.0.0.1), PORT (8082), POLICY_FILE (YAML; none
 * = allow everything, said at start-up), REDIS_URL (rate limits, tool pins, the audit queue),
 * POLICY_KEY_PREFIX (fleet: Redis keys `<prefix>:ratelimit:*` and `<prefix>:pins:*`, so fleets
 * sharing a Redis keep their own), PINNING_MAX_TOOLS (10000: most tools pinned), FLEET_TOKEN (bearer on /mcp, /policy and
 * /policy/pins), AUDIT_QUEUE (fleet-audit), AUDIT_JOURNAL (.fleet/policy-validator-audit.ndjson),
 * AUDIT_MAX_BUFFERED (the audit producer's DEFAULT_MAX_BUFFERED), AUDIT_WRITE_AHEAD (true: the
 * producer's write-ahead log beside the journal), LOG_LEVEL, OTEL_*. Reloads
 * the policy when the file changes; audits pin approvals (and refused attempts) as `admin`
 * records; drains on SIGTERM.
 */
import { dirname, resolve } from 'node:path';
import {
  AUDIT_QUEUE,
  AuditJournalInUseError,
  type AuditProducer,
  auditLoggerFrom,
  createAdminAuditor,
  createAuditProducer,
  DEFAULT_MAX_BUFFERED,
  registerAuditMetrics,
} from '@fleet/audit';
import { journalDirectoryProblem, makeDirectory } from '@fleet/audit/directory';
import {
  DEFAULT_REDIS_URL,
  envBoolean,
  envInteger,
  envKeyPrefix,
  envLogLevel,
  envRedisUrl,
  type LogLevel,
} from '@fleet/core';
import {
  createLogger,
  type Listening,
  listen,
  observeInvocations,
  onShutdown,
  stopOnListenError,
  whenConnected,
} from '@fleet/interceptor-kit';
import { startTelemetry, telemetryOptionsFromEnv } from '@fleet/telemetry';
import { Redis } from 'ioredis';
import {
  createPolicySource,
  createPolicyValidatorApp,
  DEFAULT_PIN_MAX_TOOLS,
  RedisPinStore,
  RedisRateLimiter,
} from './app.ts';

/** How long start-up waits for Redis before serving without it. */
const REDIS_START_WAIT_MS = 5_000;
/** Largest PINNING_MAX_TOOLS: about 200 bytes of Redis per pin, so some 200 MB. */
const PINNING_MAX_TOOLS_LIMIT = 1_000_000;
/** Without POLICY_KEY_PREFIX: rate limits under `fleet:ratelimit:`, tool pins under `fleet:pins:`. */
const DEFAULT_KEY_PREFIX = 'fleet';
/** The audit journal without AUDIT_JOURNAL (relative to the working directory). */
const DEFAULT_AUDIT_JOURNAL = '.fleet/policy-validator-audit.ndjson';
/** Default journals tried in turn while other live processes hold them (see startAuditProducer). */
const DEFAULT_AUDIT_JOURNALS = 16;

const env = process.env;
let level: LogLevel = 'info';
let port = 8082;
let maxTools = DEFAULT_PIN_MAX_TOOLS;
let maxBuffered = DEFAULT_MAX_BUFFERED;
let writeAhead = true;
let keyPrefix = DEFAULT_KEY_PREFIX;
let redisUrl = DEFAULT_REDIS_URL;
try {
  level = envLogLevel(env);
  redisUrl = envRedisUrl(env);
  keyPrefix = envKeyPrefix(env, 'POLICY_KEY_PREFIX', DEFAULT_KEY_PREFIX);
  port = envInteger(env, 'PORT', 8082, { max: 65_535 });
  maxTools = envInteger(env, 'PINNING_MAX_TOOLS', DEFAULT_PIN_MAX_TOOLS, {
    min: 1,
    max: PINNING_MAX_TOOLS_LIMIT,
  });
  maxBuffered = envInteger(env, 'AUDIT_MAX_BUFFERED', DEFAULT_MAX_BUFFERED);
  writeAhead = envBoolean(env, 'AUDIT_WRITE_AHEAD', true);
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n`);
  process.exit(1);
}
const log = createLogger('policy-validator', level);
// The producer would start without a journal it cannot lock (it only logs that); a directory
// the operator got wrong ends the start instead. The default journals share one directory.
const journalDir = dirname(resolve(env.AUDIT_JOURNAL || DEFAULT_AUDIT_JOURNAL));
try {
  makeDirectory(journalDir);
} catch (error) {
  process.stderr.write(`${journalDirectoryProblem(journalDir, error)}\n`);
  process.exit(1);
}
const telemetry = startTelemetry(
  telemetryOptionsFromEnv(env, { serviceName: 'policy-validator', serviceVersion: '0.1.0' }),
);

let app: ReturnType<typeof createPolicyValidatorApp> | undefined;
let source: Awaited<ReturnType<typeof createPolicySource>>;
try {
  source = await createPolicySource({
    path: env.POLICY_FILE || undefined,
    events: {
      loaded: (policy, first) => {
        if (env.POLICY_FILE) {
          log.info(
            {
              file: env.POLICY_FILE,
              fingerprint: policy.fingerprint,
              rules: policy.rules.length,
              engine: policy.engine,
            },
            first ? 'policy loaded' : 'policy reloaded',
          );
        } else {
          log.warn({}, 'no POLICY_FILE: the policy allows everything');
        }
        if (!first) app?.refresh();
      },
      rejected: (error) =>
        log.error(
          { file: env.POLICY_FILE, err: error.message },
          'policy edit rejected; the last good policy stays in force',
        ),
    },
  });
} catch (error) {
  process.stderr.write(`cannot load POLICY_FILE ${env.POLICY_FILE}: ${(error as Error).message}\n`);
  process.exit(1);
}

/**
 * The audit producer of the pin approvals' `admin` records: it never makes a request wait and,
 * while Redis is away, buffers and spills to its journal, replayed when Redis is back. Without
 * AUDIT_JOURNAL, processes started from one directory (a laptop, tests) each take the first of
 * the default journals no live process holds (`...-audit.ndjson`, `...-audit-2.ndjson`, ...);
 * one a gone process left is taken over and replayed. A given AUDIT_JOURNAL that another live
 * process holds ends the start.
 */
function startAuditProducer(): AuditProducer {
  for (let slot = 1; ; slot++) {
    const journalPath =
      env.AUDIT_JOURNAL ||
      (slot === 1 ? DEFAULT_AUDIT_JOURNAL : `.fleet/policy-validator-audit-${slot}.ndjson`);
    try {
      return createAuditProducer({
        connection: redisUrl,
        queue: env.AUDIT_QUEUE || AUDIT_QUEUE,
        journalPath,
        maxBuffered,
        // An approval's record survives the process being killed before its batch goes.
        writeAhead,
        logger: auditLoggerFrom(log),
      });
    } catch (error) {
      const taken = error instanceof AuditJournalInUseError;
      if (taken && !env.AUDIT_JOURNAL && slot < DEFAULT_AUDIT_JOURNALS) continue;
      process.stderr.write(`AUDIT_JOURNAL: ${(error as Error).message}\n`);
      process.exit(1);
    }
  }
}
const producer = startAuditProducer();
// Read from the producer's counters at each /metrics scrape: nothing per record.
registerAuditMetrics(telemetry.meter, { producer });
const auditor = createAdminAuditor(producer, { logger: auditLoggerFrom(log) });

const redis = new Redis(redisUrl, {
  maxRetriesPerRequest: 1,
  enableOfflineQueue: false,
  connectTimeout: 2000,
});
redis.on('error', (error: Error) => log.warn({ err: error.message }, 'redis connection error'));
// Without the offline queue a request that comes before the connection finds the store
// unavailable: the first tools/list would go unpinned (fail-open). Wait for it, a little.
if (!(await whenConnected(redis, REDIS_START_WAIT_MS)))
  log.warn(
    { waitedMs: REDIS_START_WAIT_MS },
    'redis not reachable at start-up: rate limits and tool pins follow their failOpen until it is',
  );

app = createPolicyValidatorApp({
  source,
  limiter: new RedisRateLimiter(redis, `${keyPrefix}:ratelimit`),
  pins: new RedisPinStore(redis, { prefix: `${keyPrefix}:pins`, maxTools }),
  log,
  token: env.FLEET_TOKEN || undefined,
  metricsHandler: telemetry.metricsHandler,
  meter: telemetry.meter,
  onInvoked: observeInvocations({ metrics: telemetry.metrics, logger: log }),
  onAdminChange: (change) => auditor.record(change),
});
let listening: Listening | undefined;
// Registered before the start-up line, which tells a supervisor the process is ready: a
// SIGTERM sent as soon as it appears must drain, not kill the process by the signal.
const stop = onShutdown(async () => {
  await listening?.close();
  // After the last request: what Redis cannot take now is journaled, not lost.
  await producer.close();
  source.close();
  redis.disconnect();
  await telemetry.shutdown();
});
// A HOST or PORT it cannot listen on: one line naming it, then what is open closes (the audit
// producer releases its journal); exit 1.
listening = await listen(app.listener, {
  service: 'policy-validator',
  host: env.HOST || '127.0.0.1',
  port,
}).catch(stopOnListenError(stop));
