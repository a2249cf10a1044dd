/**
 * The store side of the audit pipeline, started the same way by the audit-logger (unless
 * AUDIT_WORKER=false) and by the standalone audit-worker: the audit store, the worker that
 * drains the queue into it (PII scrubbed on the way) and the retention schedule.
 */
import { dirname, resolve } from 'node:path';
import {
  AuditJournalInUseError,
  type AuditRetention,
  type AuditStore,
  AuditStoreError,
  type AuditWorker,
  assertAuditStoreFree,
  assertJournalFree,
  createAuditWorker,
  openAuditStore,
  startAuditRetention,
} from '@fleet/audit';
import { journalDirectoryProblem, makeDirectory } from '@fleet/audit/directory';
import type { AuditLoggerConfig, AuditWorkerConfig } from './config.ts';
import { auditLoggerOf, type Logger } from './logger.ts';
import { createPiiScrubber } from './scrubber.ts';

/**
 * The settings both processes read (the audit-logger's config has them all too), and the
 * audit-logger's statement timeout of the audit API's reads (the worker serves none).
 */
export type StoreConfig = Pick<
  AuditWorkerConfig,
  'DATABASE_URL' | 'AUDIT_PGLITE_DIR' | 'AUDIT_DB_SCHEMA' | 'AUDIT_DB_WAIT_S'
> &
  Partial<Pick<AuditLoggerConfig, 'AUDIT_QUERY_TIMEOUT_MS'>>;
export type DrainConfig = Pick<
  AuditWorkerConfig,
  | 'REDIS_URL'
  | 'AUDIT_QUEUE'
  | 'AUDIT_PREFIX'
  | 'AUDIT_RETENTION_DAYS'
  | 'AUDIT_BATCH_SIZE'
  | 'AUDIT_WORKER_CONCURRENCY'
>;

/** A directory the configuration names cannot be created; `cause` is the failed mkdir. */
export class ConfiguredDirectoryError extends Error {
  override readonly name = 'ConfiguredDirectoryError';
  readonly code = 'DIRECTORY_UNUSABLE';
  /** The environment variable that names it: `AUDIT_PGLITE_DIR` or `AUDIT_JOURNAL`. */
  readonly variable: 'AUDIT_PGLITE_DIR' | 'AUDIT_JOURNAL';
  /** The directory (resolved): the PGlite directory, or the journal's directory. */
  readonly dir: string;

  constructor(variable: ConfiguredDirectoryError['variable'], dir: string, cause: unknown) {
    super(`${variable}: cannot create ${dir}`, { cause });
    this.variable = variable;
    this.dir = dir;
  }
}

/**
 * PostgreSQL (DATABASE_URL) did not take connections within AUDIT_DB_WAIT_S, or refused this
 * one for a reason waiting does not change (authentication, no such database); `cause` is
 * the last error.
 */
export class StoreUnreachableError extends Error {
  override readonly name = 'StoreUnreachableError';
  readonly code = 'STORE_UNREACHABLE';

  constructor(
    /** `host:port/database` of DATABASE_URL (never its user or password). */
    readonly target: string,
    /** Seconds it waited; 0 when the answer was final. */
    readonly waitedS: number,
    cause: unknown,
  ) {
    super(`PostgreSQL at ${target} did not take the connection`, { cause });
  }
}

/**
 * The one line to print for a start-up failure the operator can fix (the PGlite directory or
 * the audit journal held by another live process, or a directory of theirs that cannot be
 * created), or `undefined` for any other error.
 */
export function describeStartupError(error: unknown): string | undefined {
  if (error instanceof ConfiguredDirectoryError) {
    const why = error.cause instanceof Error ? error.cause.message : String(error.cause);
    return error.variable === 'AUDIT_PGLITE_DIR'
      ? `AUDIT_PGLITE_DIR: cannot create ${error.dir} (${why}): set AUDIT_PGLITE_DIR to a directory this process can create, or share a PostgreSQL store through DATABASE_URL.`
      : `${journalDirectoryProblem(error.dir, error.cause)}.`;
  }
  if (error instanceof StoreUnreachableError) {
    const why = errorCodeOf(error.cause);
    if (error.waitedS === 0)
      return `DATABASE_URL: PostgreSQL at ${error.target} refused the connection: ${(error.cause as Error).message}${why ? ` (SQLSTATE ${why})` : ''}; fix DATABASE_URL or the database.`;
    return `DATABASE_URL: cannot reach PostgreSQL at ${error.target}${why ? ` (${why})` : ''} after waiting ${error.waitedS} s (AUDIT_DB_WAIT_S): start it, or point DATABASE_URL at one that answers.`;
  }
  if (error instanceof AuditStoreError && error.code === 'STORE_IN_USE') {
    const held = error.cause instanceof AuditJournalInUseError ? error.cause : undefined;
    const dir = held?.path ?? '?';
    return `audit store in use: the PGlite directory ${dir} is locked by process ${held?.pid ?? '?'} (${dir}.lock). PGlite serves one process: stop that process, give this one another AUDIT_PGLITE_DIR, or share a PostgreSQL store through DATABASE_URL.`;
  }
  if (error instanceof AuditJournalInUseError)
    return `audit journal in use: ${error.path} is locked by process ${error.pid ?? '?'} (${error.path}.lock). Each audit-logger process needs a journal of its own: stop that process or set AUDIT_JOURNAL to another file.`;
  return undefined;
}

/**
 * Run a start-up step; a failure {@link describeStartupError} knows ends the process with its
 * one line on stderr and exit code 1 (no stack trace). Anything else is rethrown.
 */
export async function orExit<T>(step: () => T | Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    const line = describeStartupError(error);
    if (line === undefined) throw error;
    process.stderr.write(`${line}\n`);
    process.exit(1);
  }
}

/**
 * Check, without taking them, the locks a start-up will take: the PGlite directory (DATABASE_URL
 * unset), then the audit journal (when given). Opening a PGlite store takes seconds (~30 s
 * under load), so a process that would only then find its journal held checks first and fails
 * fast. Throws what taking the lock would, for {@link orExit} to word.
 */
export function checkLocks(config: StoreConfig, journalPath?: string): void {
  assertAuditStoreFree({ databaseUrl: config.DATABASE_URL, pgliteDir: config.AUDIT_PGLITE_DIR });
  if (journalPath !== undefined) assertJournalFree(journalPath);
}

/**
 * Create the directories a start-up writes in: the PGlite directory (DATABASE_URL unset), then
 * the audit journal's (when given). Here rather than where the store and the producer create
 * them: the producer starts without a journal it cannot lock (logging it), and a path the
 * operator got wrong should end the start, naming the variable.
 * @throws ConfiguredDirectoryError, for {@link orExit} to word.
 */
export function makeDirectories(config: StoreConfig, journalPath?: string): void {
  if (!config.DATABASE_URL) makeConfigured('AUDIT_PGLITE_DIR', resolve(config.AUDIT_PGLITE_DIR));
  if (journalPath !== undefined) makeConfigured('AUDIT_JOURNAL', dirname(resolve(journalPath)));
}

function makeConfigured(variable: ConfiguredDirectoryError['variable'], dir: string): void {
  try {
    makeDirectory(dir);
  } catch (error) {
    throw new ConfiguredDirectoryError(variable, dir, error);
  }
}

/** The `code` of an error, or of the first of an AggregateError's (a host with two addresses). */
function errorCodeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') return code;
  const first = (error as { errors?: unknown[] } | undefined)?.errors?.[0];
  return first === undefined ? undefined : errorCodeOf(first);
}

/**
 * Connection failures a database that is starting, restarting or not yet in DNS gives: worth
 * waiting for. SQLSTATE 57P03: the database system is starting up.
 */
const TRANSIENT = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  '57P03',
]);

/** `host:port/database` of a PostgreSQL URL, without user or password. */
function targetOf(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    return `${url.hostname}:${url.port || '5432'}${url.pathname || '/'}`;
  } catch {
    return 'DATABASE_URL';
  }
}

/**
 * Open the audit store (PostgreSQL when DATABASE_URL is set, else PGlite) and log which. A
 * PostgreSQL that does not take connections yet (refused, unreachable, starting up) is waited
 * for up to AUDIT_DB_WAIT_S, a warning per try; then, or at once for an answer waiting does not
 * change (a failed login, no such database), a {@link StoreUnreachableError}.
 */
export async function openStore(config: StoreConfig, log: Logger): Promise<AuditStore> {
  const waitMs = config.AUDIT_DB_WAIT_S * 1000;
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      const store = await openAuditStore({
        databaseUrl: config.DATABASE_URL,
        pgliteDir: config.AUDIT_PGLITE_DIR,
        schema: config.AUDIT_DB_SCHEMA,
        ...(config.AUDIT_QUERY_TIMEOUT_MS === undefined
          ? {}
          : { readTimeoutMs: config.AUDIT_QUERY_TIMEOUT_MS }),
        logger: auditLoggerOf(log),
      });
      log.info({ engine: store.engine }, 'audit store open');
      return store;
    } catch (error) {
      if (!config.DATABASE_URL) throw error;
      const target = targetOf(config.DATABASE_URL);
      const code = errorCodeOf(error);
      if (code === undefined || !TRANSIENT.has(code)) {
        // A SQLSTATE (login, database, permissions): the server answered; waiting changes nothing.
        if (code !== undefined && /^[0-9A-Z]{5}$/.test(code))
          throw new StoreUnreachableError(target, 0, error);
        throw error;
      }
      const waited = Date.now() - started;
      if (waited >= waitMs)
        throw new StoreUnreachableError(target, Math.round(waitMs / 1000), error);
      const delayMs = Math.min(2_000, 250 * 2 ** (attempt - 1), waitMs - waited);
      log.warn(
        { target, code, attempt, retryInMs: delayMs },
        'PostgreSQL (DATABASE_URL) does not take connections yet; waiting for it',
      );
      await new Promise((retry) => setTimeout(retry, delayMs));
    }
  }
}

/** The running worker and retention schedule. */
export interface Drain {
  worker: AuditWorker;
  retention: AuditRetention;
  /**
   * Stop the schedule and let the worker store its current batch, side by side; both are
   * bounded (they give up and drop their connections while Redis does not answer).
   */
  close(): Promise<void>;
}

/** Start draining the audit queue into `store`, with the retention schedule. */
export function startDrain(config: DrainConfig, store: AuditStore, log: Logger): Drain {
  const logger = auditLoggerOf(log);
  const prefix = config.AUDIT_PREFIX ? { prefix: config.AUDIT_PREFIX } : {};
  const worker = createAuditWorker({
    connection: config.REDIS_URL,
    queue: config.AUDIT_QUEUE,
    ...prefix,
    store,
    scrub: createPiiScrubber(),
    logger,
    ...(config.AUDIT_BATCH_SIZE ? { batchSize: config.AUDIT_BATCH_SIZE } : {}),
    ...(config.AUDIT_WORKER_CONCURRENCY ? { concurrency: config.AUDIT_WORKER_CONCURRENCY } : {}),
  });
  const retention = startAuditRetention({
    connection: config.REDIS_URL,
    queue: `${config.AUDIT_QUEUE}-retention`,
    ...prefix,
    store,
    retentionDays: config.AUDIT_RETENTION_DAYS,
    logger,
  });
  return {
    worker,
    retention,
    async close() {
      await Promise.all([retention.close(), worker.close()]);
    },
  };
}
