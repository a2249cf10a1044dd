#!/usr/bin/env node
/**
 * The pii-redactor process. Env: HOST (127.0.0.1), PORT (8081), PII_CONFIG (YAML; none =
 * every entity type detected and redacted), PII_HMAC_KEY (or the variable the config's
 * `hash.keyEnv` names: the key of `hash` pseudonyms and of the token vault), REDIS_URL
 * (token vault), PII_VAULT_PREFIX (its Redis key prefix, default `fleet:pii:vault`),
 * FLEET_TOKEN (bearer on /mcp and /config), LOG_LEVEL, OTEL_*. Reloads PII_CONFIG when it
 * changes; drains on SIGTERM.
 */
import { randomBytes } from 'node:crypto';
import {
  DEFAULT_REDIS_URL,
  envInteger,
  envKeyPrefix,
  envLogLevel,
  envRedisUrl,
  type LogLevel,
} from '@fleet/core';
import {
  createLogger,
  createReloadingFile,
  type Listening,
  listen,
  observeInvocations,
  onShutdown,
  type ReloadingFile,
  stopOnListenError,
} from '@fleet/interceptor-kit';
import { type PiiConfig, parsePiiConfig } from '@fleet/pii';
import { startTelemetry, telemetryOptionsFromEnv } from '@fleet/telemetry';
import { Redis } from 'ioredis';
import { createPiiRedactorApp, engineFor, parsePiiConfigText, RedisTokenVault } from './app.ts';

const env = process.env;
const DEFAULT_VAULT_PREFIX = 'fleet:pii:vault';
function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}
let port = 8081;
let level: LogLevel = 'info';
let vaultPrefix = DEFAULT_VAULT_PREFIX;
let redisUrl = DEFAULT_REDIS_URL;
try {
  level = envLogLevel(env);
  redisUrl = envRedisUrl(env);
  vaultPrefix = envKeyPrefix(env, 'PII_VAULT_PREFIX', DEFAULT_VAULT_PREFIX);
  port = envInteger(env, 'PORT', 8081, { max: 65_535 });
} catch (error) {
  fail((error as Error).message);
}
const log = createLogger('pii-redactor', level);

let file: ReloadingFile<PiiConfig> | undefined;
let config: PiiConfig;
try {
  if (env.PII_CONFIG) {
    file = await createReloadingFile({
      path: env.PII_CONFIG,
      parse: parsePiiConfigText,
      same: (a, b) => JSON.stringify(a) === JSON.stringify(b),
      onReload: (next) => {
        engine = engineFor(next, keyFor(next));
        log.info({ file: env.PII_CONFIG }, 'PII config reloaded');
      },
      onReject: (error) =>
        log.error(
          { file: env.PII_CONFIG, err: error.message },
          'PII config edit rejected; the last good config stays in force',
        ),
    });
    config = file.current();
  } else {
    config = parsePiiConfig({});
    log.info({}, 'no PII_CONFIG: every entity type is detected and redacted');
  }
} catch (error) {
  fail(`cannot load PII_CONFIG ${env.PII_CONFIG}: ${(error as Error).message}`);
}

function keyFor(c: PiiConfig): string {
  const key = env[c.hash.keyEnv];
  if (key) return key;
  return ephemeralKey;
}
const ephemeralKey = randomBytes(32).toString('base64url');
if (!env[config.hash.keyEnv]) {
  log.warn(
    { keyEnv: config.hash.keyEnv },
    `${config.hash.keyEnv} is not set: hash pseudonyms and tokens use a random key and do not survive a restart`,
  );
}
let engine = engineFor(config, keyFor(config));

const telemetry = startTelemetry(
  telemetryOptionsFromEnv(env, { serviceName: 'pii-redactor', serviceVersion: '0.1.0' }),
);
const redis = new Redis(redisUrl, {
  maxRetriesPerRequest: 1,
  connectTimeout: 2000,
});
redis.on('error', (error: Error) => log.warn({ err: error.message }, 'redis connection error'));
const vault = new RedisTokenVault(redis, {
  secret: keyFor(config),
  ttlSeconds: config.tokens.ttlSeconds,
  prefix: vaultPrefix,
});

const app = createPiiRedactorApp({
  engine: () => engine,
  vault,
  token: env.FLEET_TOKEN || undefined,
  status: () => ({
    ...(file ? file.status() : { path: null }),
    defaultStrategy: engine.config.defaultStrategy,
  }),
  metricsHandler: telemetry.metricsHandler,
  onInvoked: observeInvocations({ metrics: telemetry.metrics, logger: log }),
  logger: log,
});
let listening: Listening | undefined;
// Registered before the start-up line, which tells a supervisor the process is ready: a
// SIGTERM sent as soon as it appears must drain, not kill the process by the signal.
const stop = onShutdown(async () => {
  await listening?.close();
  file?.close();
  redis.disconnect();
  await telemetry.shutdown();
});
// A HOST or PORT it cannot listen on: one line naming it, then what is open closes; exit 1.
listening = await listen(app.listener, {
  service: 'pii-redactor',
  host: env.HOST || '127.0.0.1',
  port,
}).catch(stopOnListenError(stop));
