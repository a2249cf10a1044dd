/**
 * The environment of the audit-logger service and of the standalone audit worker, parsed
 * once at the edge with zod. Only `main.ts` and `worker.ts` call these; nothing below them
 * reads `process.env`.
 */
import {
  AUDIT_QUEUE,
  DEFAULT_MAX_BUFFERED,
  DEFAULT_PGLITE_DIR,
  DEFAULT_READ_TIMEOUT_MS,
  DEFAULT_RETENTION_DAYS,
} from '@fleet/audit';
import {
  BOOLEAN_WORDS_PROBLEM,
  booleanWord,
  DEFAULT_REDIS_URL,
  integerProblem,
  LOG_LEVELS,
  redisUrlProblem,
  unknownKeyMessage,
} from '@fleet/core';
import { z } from 'zod';

/** The configuration cannot be used; the message names each bad variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'INVALID_CONFIG';
}

/** Default port of the audit-logger service. */
export const AUDIT_LOGGER_PORT = 8083;
/** Default port of the standalone audit worker. */
export const AUDIT_WORKER_PORT = 8084;
/** Where the audit-logger's own producer journals while Redis is away (one per process). */
export const DEFAULT_AUDIT_LOGGER_JOURNAL = '.fleet/audit-logger-audit.ndjson';

// Unset and empty mean the same: the default.
const optional = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => (value === '' ? undefined : value), schema.optional());

// Core's on/off words, as the orchestrator's and policy-validator's envBoolean reads them.
const flag = (fallback: boolean) =>
  z.preprocess(
    (value) =>
      value === '' || value === undefined
        ? fallback
        : typeof value === 'string'
          ? (booleanWord(value) ?? value)
          : value,
    z.boolean({ error: BOOLEAN_WORDS_PROBLEM }),
  );

/** A string that `problem` (one of core's checks) finds nothing wrong with. */
const checked = (problem: (text: string) => string | undefined) =>
  z.string().superRefine((text, ctx) => {
    const message = problem(text);
    if (message !== undefined) ctx.addIssue({ code: 'custom', message });
  });

// Digits only (core's integerProblem), not `z.coerce`: Number(' ') is 0, Number('1e3') 1000.
const integer = (min: number, max: number = Number.MAX_SAFE_INTEGER) =>
  checked((text) => integerProblem(text, min, max)).transform(Number);

/** Default AUDIT_DB_WAIT_S: inside a pod's usual start-up budget, long enough for a database starting beside it. */
export const DEFAULT_DB_WAIT_S = 30;

const SharedSchema = {
  HOST: optional(z.string().min(1)).transform((v) => v ?? '127.0.0.1'),
  // The same check as the other services' (core's envRedisUrl).
  REDIS_URL: optional(checked(redisUrlProblem)).transform((v) => v ?? DEFAULT_REDIS_URL),
  DATABASE_URL: optional(
    z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL'),
  ),
  AUDIT_PGLITE_DIR: optional(z.string().min(1)).transform((v) => v ?? DEFAULT_PGLITE_DIR),
  AUDIT_DB_SCHEMA: optional(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, 'must be a plain SQL identifier'),
  ),
  // How long a start waits for PostgreSQL (DATABASE_URL) to take connections.
  AUDIT_DB_WAIT_S: optional(integer(0, 3_600)).transform((v) => v ?? DEFAULT_DB_WAIT_S),
  AUDIT_QUEUE: optional(z.string().min(1)).transform((v) => v ?? AUDIT_QUEUE),
  AUDIT_PREFIX: optional(z.string().min(1)),
  AUDIT_RETENTION_DAYS: optional(integer(1, 36_500)).transform((v) => v ?? DEFAULT_RETENTION_DAYS),
  AUDIT_BATCH_SIZE: optional(integer(1, 10_000)),
  AUDIT_WORKER_CONCURRENCY: optional(integer(1, 100_000)),
  LOG_LEVEL: optional(z.enum(LOG_LEVELS)).transform((v) => v ?? 'info'),
};

const AuditLoggerEnvSchema = z.object({
  ...SharedSchema,
  PORT: optional(integer(0, 65_535)).transform((v) => v ?? AUDIT_LOGGER_PORT),
  FLEET_TOKEN: optional(z.string()),
  AUDIT_READ_TOKEN: optional(z.string()),
  TRACE_URL_TEMPLATE: optional(
    z
      .string()
      .regex(/^https?:\/\//, 'must be an http(s) URL')
      .refine((v) => v.includes('{traceId}'), 'must contain {traceId}'),
  ),
  AUDIT_WORKER: flag(true),
  AUDIT_BATCH_JOBS: flag(true),
  AUDIT_JOURNAL: optional(z.string().min(1)).transform((v) => v ?? DEFAULT_AUDIT_LOGGER_JOURNAL),
  // Records this process's producer holds in memory; beyond them they spill to AUDIT_JOURNAL.
  AUDIT_MAX_BUFFERED: optional(integer(0)).transform((v) => v ?? DEFAULT_MAX_BUFFERED),
  // This process's producer writes each record beside AUDIT_JOURNAL before enqueue returns.
  AUDIT_WRITE_AHEAD: flag(true),
  AUDIT_PAYLOAD_PREVIEW: optional(integer(0, 4096)).transform((v) => v ?? 0),
  // The statement timeout of the audit API's reads on PostgreSQL (0: none); never the inserts'.
  AUDIT_QUERY_TIMEOUT_MS: optional(integer(0, 3_600_000)).transform(
    (v) => v ?? DEFAULT_READ_TIMEOUT_MS,
  ),
});

const AuditWorkerEnvSchema = z.object({
  ...SharedSchema,
  PORT: optional(integer(0, 65_535)).transform((v) => v ?? AUDIT_WORKER_PORT),
});

/** The audit-logger service's configuration. */
export type AuditLoggerConfig = z.infer<typeof AuditLoggerEnvSchema>;
/** The standalone audit worker's configuration. */
export type AuditWorkerConfig = z.infer<typeof AuditWorkerEnvSchema>;

type Env = Readonly<Record<string, string | undefined>>;

/** Prefix of the service's own variables; one it does not read is warned about. */
const OWN_PREFIX = 'AUDIT_';
/** The variables the audit-logger reads: its schema's keys, the one list (README's table too). */
export const AUDIT_LOGGER_VARIABLES: readonly string[] = Object.keys(AuditLoggerEnvSchema.shape);
/** The variables the standalone audit worker reads: its schema's keys. */
export const AUDIT_WORKER_VARIABLES: readonly string[] = Object.keys(AuditWorkerEnvSchema.shape);

/**
 * One warning per variable named `AUDIT_*` in `env` that neither process reads (a misspelt
 * `AUDIT_RETENTON_DAYS` would otherwise be ignored in silence), saying which of `reads` was
 * probably meant. Variables of the other process are not warned about: the two often share an
 * environment.
 */
function unknownVariables(env: Env, reads: readonly string[]): EnvWarning[] {
  const own = reads.filter((name) => name.startsWith(OWN_PREFIX));
  const known = new Set([...AUDIT_LOGGER_VARIABLES, ...AUDIT_WORKER_VARIABLES]);
  return Object.keys(env)
    .filter((name) => name.startsWith(OWN_PREFIX) && !known.has(name))
    .sort()
    .map((variable) => ({
      variable,
      message: `ignored environment variable: ${unknownKeyMessage(variable, own)}`,
    }));
}

/** A variable in the environment that the process ignores, and what to log about it. */
export interface EnvWarning {
  variable: string;
  /** `ignored environment variable: unknown key "…" (did you mean "…"?); allowed: …`. */
  message: string;
}

/** The audit-logger's warnings about `AUDIT_*` variables it does not read. */
export function auditLoggerEnvWarnings(env: Env): EnvWarning[] {
  return unknownVariables(env, AUDIT_LOGGER_VARIABLES);
}

/** The audit worker's warnings about `AUDIT_*` variables neither process reads. */
export function auditWorkerEnvWarnings(env: Env): EnvWarning[] {
  return unknownVariables(env, AUDIT_WORKER_VARIABLES);
}

function parse<T extends z.ZodType>(schema: T, env: Env, what: string): z.infer<T> {
  const result = schema.safeParse(env);
  if (!result.success)
    throw new ConfigError(`invalid ${what} environment:\n${z.prettifyError(result.error)}`);
  return result.data;
}

/** Parse the audit-logger's environment. @throws ConfigError naming each bad variable. */
export function parseAuditLoggerEnv(env: Env): AuditLoggerConfig {
  return parse(AuditLoggerEnvSchema, env, 'audit-logger');
}

/** Parse the standalone worker's environment. @throws ConfigError naming each bad variable. */
export function parseAuditWorkerEnv(env: Env): AuditWorkerConfig {
  return parse(AuditWorkerEnvSchema, env, 'audit-worker');
}
