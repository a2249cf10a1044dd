/**
 * Retention: records older than the retention period are deleted by a repeatable BullMQ job
 * (a job scheduler, so any number of replicas keep one schedule and one of them runs each
 * occurrence), and on demand with {@link runRetention}.
 */
import { Queue, Worker } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { closeWorkerPromptly } from './closing.ts';
import { type AuditLogger, createStderrLogger, errorFields, safeLogger } from './logger.ts';
import { DEFAULT_REDIS_URL } from './producer.ts';
import { AUDIT_QUEUE } from './record.ts';
import type { AuditStore } from './store.ts';

/** Days a record is kept unless configured otherwise (`AUDIT_RETENTION_DAYS`). */
export const DEFAULT_RETENTION_DAYS = 30;
/** The queue the retention job runs on (beside the audit queue). */
export const RETENTION_QUEUE = `${AUDIT_QUEUE}-retention`;
/** The job scheduler id: one schedule however many workers start. */
export const RETENTION_SCHEDULER_ID = 'audit-retention';
/** How often retention runs unless configured otherwise: hourly. */
export const DEFAULT_RETENTION_EVERY_MS = 3_600_000;

const DAY_MS = 86_400_000;
const RESCHEDULE_DELAY_MS = 5000;

/** What one retention run did. */
export interface RetentionResult {
  /** Records before this instant were deleted. */
  cutoff: Date;
  deleted: number;
}

/**
 * Delete records older than `retentionDays` before `now`, now.
 * @throws RangeError when `retentionDays` is not a positive number.
 */
export async function runRetention(
  store: AuditStore,
  retentionDays: number,
  now: Date = new Date(),
): Promise<RetentionResult> {
  if (!(Number.isFinite(retentionDays) && retentionDays > 0))
    throw new RangeError(`retentionDays must be a positive number, got ${retentionDays}`);
  const cutoff = new Date(now.getTime() - retentionDays * DAY_MS);
  return { cutoff, deleted: await store.deleteOlderThan(cutoff) };
}

/** Options for {@link startAuditRetention}. */
export interface AuditRetentionOptions {
  store: AuditStore;
  /** Redis URL or ioredis options; owned by the retention runner. Default {@link DEFAULT_REDIS_URL}. */
  connection?: string | RedisOptions;
  /** Default {@link RETENTION_QUEUE}. */
  queue?: string;
  /** BullMQ key prefix. Default BullMQ's. */
  prefix?: string;
  /** Default {@link DEFAULT_RETENTION_DAYS}. */
  retentionDays?: number;
  /** Default {@link DEFAULT_RETENTION_EVERY_MS}. */
  everyMs?: number;
  /** Default: JSON lines on stderr. */
  logger?: AuditLogger;
  /**
   * Longest `close()` waits for a running retention job while Redis answers; past it (or at
   * once while Redis is away) the connection is dropped and the job runs again later.
   * Default 5000 ms.
   */
  closeTimeoutMs?: number;
}

/** A running retention schedule. */
export interface AuditRetention {
  /** Resolves once the schedule is registered in Redis. */
  scheduled(): Promise<void>;
  /** Run retention now, in this process. */
  runNow(): Promise<RetentionResult>;
  /**
   * Stop running scheduled jobs (the schedule stays for other replicas). Resolves within
   * `closeTimeoutMs` whether Redis answers or not. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Register the hourly retention job scheduler (retrying in the background while Redis is
 * away) and run its occurrences in this process.
 * @throws RangeError for `retentionDays` or `everyMs` out of range.
 */
export function startAuditRetention(options: AuditRetentionOptions): AuditRetention {
  const {
    store,
    connection = DEFAULT_REDIS_URL,
    queue: queueName = RETENTION_QUEUE,
    prefix,
    retentionDays = DEFAULT_RETENTION_DAYS,
    everyMs = DEFAULT_RETENTION_EVERY_MS,
    closeTimeoutMs = 5000,
  } = options;
  if (!(Number.isFinite(retentionDays) && retentionDays > 0))
    throw new RangeError(`retentionDays must be a positive number, got ${retentionDays}`);
  if (!(Number.isInteger(everyMs) && everyMs >= 1000))
    throw new RangeError(`everyMs must be an integer >= 1000, got ${everyMs}`);
  if (!(Number.isInteger(closeTimeoutMs) && closeTimeoutMs >= 0))
    throw new RangeError(`closeTimeoutMs must be an integer >= 0, got ${closeTimeoutMs}`);
  const logger = safeLogger(options.logger ?? createStderrLogger());
  const redisOptions: RedisOptions = {
    connectionName: 'fleet-audit-retention',
    ...(typeof connection === 'string' ? {} : connection),
    maxRetriesPerRequest: null,
  };
  const client =
    typeof connection === 'string' ? new Redis(connection, redisOptions) : new Redis(redisOptions);
  client.on('error', () => undefined);
  const base = { connection: client, ...(prefix === undefined ? {} : { prefix }) };
  const queue = new Queue(queueName, base);
  queue.on('error', () => undefined);

  const runNow = async (): Promise<RetentionResult> => {
    const result = await runRetention(store, retentionDays);
    logger.info('audit retention ran', {
      cutoff: result.cutoff.toISOString(),
      deleted: result.deleted,
      retentionDays,
    });
    return result;
  };
  const worker = new Worker(queueName, () => runNow().then(() => undefined), {
    ...base,
    concurrency: 1,
  });
  worker.on('error', () => undefined);
  worker.on('failed', (_job, error) =>
    logger.error('audit retention failed', { error: errorFields(error) }),
  );

  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let markScheduled: () => void = () => undefined;
  const registered = new Promise<void>((done) => {
    markScheduled = done;
  });
  const schedule = async (): Promise<void> => {
    try {
      await queue.upsertJobScheduler(
        RETENTION_SCHEDULER_ID,
        { every: everyMs },
        { name: 'retention', opts: { removeOnComplete: 100, removeOnFail: 100 } },
      );
      markScheduled();
    } catch (error) {
      if (closed) return;
      logger.warn('audit retention not scheduled yet; retrying', { error: errorFields(error) });
      retry = setTimeout(() => void schedule(), RESCHEDULE_DELAY_MS);
      retry.unref();
    }
  };
  void schedule();

  let closing: Promise<void> | undefined;
  return {
    scheduled: () => registered,
    runNow,
    close() {
      closing ??= (async () => {
        closed = true;
        clearTimeout(retry);
        await closeWorkerPromptly({
          what: 'audit retention',
          worker,
          queue,
          client,
          timeoutMs: closeTimeoutMs,
          logger,
        });
      })();
      return closing;
    },
  };
}
