/**
 * The audit worker: consumes the audit queue, validates every job, scrubs free text, and
 * stores records in batches.
 *
 * BullMQ's open-source worker hands out one job at a time, so batching happens here: the
 * worker runs with a high concurrency, each job's processor parses its record and parks it
 * in an in-memory batch, and a batch is inserted (one statement) when it is full or
 * `flushIntervalMs` after its first record. Each job's promise settles only after its batch
 * committed, so BullMQ acknowledges a job only once its record is durable; a crash before
 * that leaves the jobs active with expiring locks, and BullMQ's stalled-job check puts them
 * back for another worker. The insert is idempotent on the record id, so a redelivered job
 * whose batch did commit stores nothing twice.
 *
 * Jobs carry one record (`audit`) or a producer's whole batch (`audit-batch`, producers with
 * `batchJobs: true`); both are parked the same way. Malformed records fail their job with
 * `UnrecoverableError` (no retry; it stays in the failed set for inspection; the valid
 * records of a batch job are stored first).
 *
 * A failed insert while the store does not answer (`ping()` fails) is an outage, not a
 * failure of these jobs: the batch is held, its jobs stay active (BullMQ keeps renewing their
 * locks, and with every slot taken the worker takes no new jobs), and the insert is retried
 * once a probe of the store succeeds (capped backoff), however long that takes. No attempt
 * is spent, so an outage of any length loses nothing. A failed insert while the store answers
 * is a problem of some record in the batch: the batch is inserted again in halves, down to
 * single records, so every record the store takes is stored (once: a failed statement inserts
 * nothing) and only the jobs of the records it refuses on their own fail: at once for a data
 * exception (SQLSTATE class 22), which would recur, else retried with the job's backoff.
 */
import { type Attributes, type Link, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { closeWorkerPromptly, raceTimeout } from './closing.ts';
import {
  type AuditLogger,
  createStderrLogger,
  errorFields,
  type LogFields,
  safeLogger,
} from './logger.ts';
import { DEFAULT_REDIS_URL } from './producer.ts';
import {
  AUDIT_BATCH_JOB_NAME,
  AUDIT_QUEUE,
  type AuditRecord,
  AuditRecordError,
  parseAuditRecord,
} from './record.ts';
import { defaultScrubber, type PayloadScrubber, scrubRecord } from './scrub.ts';
import { isDataException, sqlState } from './sql.ts';
import type { AuditStore } from './store.ts';

/** Test seams around the insert of one batch (e.g. to crash a worker mid-batch). */
export interface AuditWorkerHooks {
  /**
   * Runs after a batch was taken and scrubbed, before each insert statement: the batch's, and
   * those of its parts while a record the store refuses is isolated.
   */
  beforeInsert?: (records: readonly AuditRecord[]) => void | Promise<void>;
  /** Runs after a batch (or a part of one) committed, before its jobs are acknowledged. */
  afterInsert?: (records: readonly AuditRecord[], inserted: number) => void | Promise<void>;
}

/** Options for {@link createAuditWorker}. */
export interface AuditWorkerOptions {
  /** Where the records are stored. The worker does not close it. */
  store: AuditStore;
  /**
   * The Redis to read from: a URL or ioredis options. The worker opens and owns its
   * connections. Default {@link DEFAULT_REDIS_URL}.
   */
  connection?: string | RedisOptions;
  /** Queue name. Default {@link AUDIT_QUEUE}. */
  queue?: string;
  /** BullMQ key prefix; the producers' one. Default BullMQ's (`bull`). */
  prefix?: string;
  /**
   * Scrubs `event`, `method`, `target`, `payloadPreview`, abort reasons and messages. Default
   * {@link defaultScrubber}.
   */
  scrub?: PayloadScrubber;
  /** Most records per insert. Default 100. */
  batchSize?: number;
  /** Longest a record waits for companions before its batch is inserted. Default 20 ms. */
  flushIntervalMs?: number;
  /**
   * Records held at once. For one-record jobs this is BullMQ's concurrency: at least
   * `batchSize`, so a batch can fill; more lets batches fill while earlier ones commit.
   * Batch jobs carry many records each, so the worker lowers BullMQ's concurrency to about
   * this many records' worth of jobs (at least 2 jobs). Default 4 × batchSize (measured best
   * here: BullMQ's per-job round trips, not the insert, bound the rate of one-record jobs).
   */
  concurrency?: number;
  /** BullMQ job lock: how long a crashed worker's jobs stay taken. Default 30 000 ms. */
  lockDurationMs?: number;
  /** How often stalled jobs (of crashed workers) are put back. Default 30 000 ms. */
  stalledIntervalMs?: number;
  /** How often a job may stall before it fails. Default 5. */
  maxStalledCount?: number;
  /** Start consuming at once. Default true; else call `run()`. */
  autorun?: boolean;
  /**
   * First wait before probing the store again after an insert failed because the store did
   * not answer; doubles per failed probe up to `storeRetryMaxDelayMs`. Default 1000 ms.
   */
  storeRetryDelayMs?: number;
  /** Longest wait between two probes of a store that does not answer. Default 30 000 ms. */
  storeRetryMaxDelayMs?: number;
  /**
   * Longest `close()` waits for the jobs in flight to be stored and acknowledged while Redis
   * answers; past it (or at once while Redis is away) the worker's connections are dropped
   * and its unacknowledged jobs are redelivered later. Default 10 000 ms.
   */
  closeTimeoutMs?: number;
  /** Default: JSON lines on stderr. */
  logger?: AuditLogger;
  /** Test seams; none by default. */
  hooks?: AuditWorkerHooks;
}

/** Counters of a worker since it started. */
export interface AuditWorkerMetrics {
  /** Records stored (inserted now or before), whether they came one per job or in batch jobs. */
  processed: number;
  /** Rows inserted. */
  inserted: number;
  /** Records that were stored already (redelivery) or repeated within a batch. */
  duplicates: number;
  /** Malformed records (their jobs moved to the failed set, never retried). */
  malformed: number;
  /**
   * Records the store refused on their own while it answered (their jobs failed: at once for
   * a data exception, else retried by BullMQ); the other records of their batches were stored.
   */
  refused: number;
  /**
   * Failed insert statements: while the store is unavailable each retry of a held batch
   * counts; while it answers, each try of a batch and of its parts split to isolate a refused
   * record.
   */
  failedBatches: number;
  /** Batches committed. */
  batches: number;
  /** Texts the scrubber failed on (stored blanked instead). */
  scrubFailures: number;
  /** Jobs this worker completed (acknowledged once their records were stored). */
  completedJobs: number;
  /** Job attempts that failed and that BullMQ tries again, after the job's backoff. */
  retriedJobs: number;
  /**
   * Jobs moved to the failed set: malformed or refused records (at once), or their attempts
   * spent.
   */
  failedJobs: number;
  /** Records waiting in the current batch or being inserted (held ones included). */
  pending: number;
  /** True while an insert failed and the store has not answered since: records are held. */
  storeUnavailable: boolean;
}

/**
 * Jobs in the audit queue by state. A job holds one record, or a producer's batch of them
 * (`batchJobs`), so these count jobs, not records.
 */
export interface AuditQueueCounts {
  /** Waiting to be taken (those of a paused queue included). */
  waiting: number;
  /** Taken by a worker, not yet acknowledged (held through a store outage included). */
  active: number;
  /** Waiting for a retry's backoff (or a delay a producer set). */
  delayed: number;
  /** In the failed set (kept a week, `removeOnFail`). */
  failed: number;
}

/** A running worker. */
export interface AuditWorker {
  /** Resolves once the worker is connected and consuming. */
  waitUntilReady(): Promise<void>;
  /** Start consuming (when created with `autorun: false`). */
  run(): void;
  /** True while connected and consuming. */
  isRunning(): boolean;
  /** A snapshot of the counters. */
  metrics(): AuditWorkerMetrics;
  /**
   * Read the queue's jobs by state from Redis (BullMQ `getJobCounts`: one round trip, a
   * command per state). While Redis is away it waits for the connection, like every command
   * of the worker: bound it, and do not call it per record.
   */
  jobCounts(): Promise<AuditQueueCounts>;
  /**
   * Stop taking jobs, insert what is batched, wait for in-flight jobs (at most
   * `closeTimeoutMs`, not at all while Redis is away), close connections. Resolves promptly
   * whether Redis answers or not; jobs not acknowledged by then are redelivered by BullMQ.
   * Idempotent. The store stays open.
   */
  close(): Promise<void>;
}

interface Parked {
  record: AuditRecord;
  /** Stored (no argument), or refused by the store on its own (why). */
  settle: (refused?: Error) => void;
}

/** A parked record with its scrubbed copy, the one inserted. */
interface Slot {
  entry: Parked;
  record: AuditRecord;
}

/** What the store said to one record refused on its own, as named in logs: no values. */
function refusalFields(error: unknown): LogFields {
  const { message, ...fields } = errorFields(error);
  // A data exception's message may quote the value (`out of range: "0000-01-01..."`).
  return isDataException(error) ? fields : { ...fields, message };
}

/**
 * The error a refused record's job fails with: a data exception fails the same way again, so
 * its job is not retried (`UnrecoverableError`); anything else is, with the job's backoff.
 */
function refusalError(error: unknown): Error {
  const state = sqlState(error);
  const why =
    state === undefined ? (error instanceof Error ? error.name : 'error') : `SQLSTATE ${state}`;
  const message = `the audit store refused this record (${why}): ${error instanceof Error ? error.message : String(error)}`;
  return isDataException(error)
    ? new UnrecoverableError(message)
    : new Error(message, { cause: error });
}

const tracer = trace.getTracer('@fleet/audit');
// Names as in @fleet/telemetry's table (span `process fleet-audit`, messaging semconv).
const SPAN_PROCESS = 'process';
const MAX_SPAN_LINKS = 32;
// A store probe slower than this counts as no answer.
const PING_TIMEOUT_MS = 5000;

function checkInteger(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min)
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

/**
 * Start a worker on the audit queue.
 * @throws RangeError for a numeric option out of range.
 */
export function createAuditWorker(options: AuditWorkerOptions): AuditWorker {
  const {
    store,
    connection = DEFAULT_REDIS_URL,
    queue: queueName = AUDIT_QUEUE,
    prefix,
    scrub = defaultScrubber,
    autorun = true,
    hooks = {},
  } = options;
  const batchSize = checkInteger('batchSize', options.batchSize ?? 100, 1);
  const flushIntervalMs = checkInteger('flushIntervalMs', options.flushIntervalMs ?? 20, 0);
  const concurrency = checkInteger('concurrency', options.concurrency ?? 4 * batchSize, 1);
  const lockDurationMs = checkInteger('lockDurationMs', options.lockDurationMs ?? 30_000, 100);
  const stalledIntervalMs = checkInteger(
    'stalledIntervalMs',
    options.stalledIntervalMs ?? 30_000,
    100,
  );
  const maxStalledCount = checkInteger('maxStalledCount', options.maxStalledCount ?? 5, 0);
  const closeTimeoutMs = checkInteger('closeTimeoutMs', options.closeTimeoutMs ?? 10_000, 0);
  const storeRetryDelayMs = checkInteger('storeRetryDelayMs', options.storeRetryDelayMs ?? 1000, 1);
  const storeRetryMaxDelayMs = checkInteger(
    'storeRetryMaxDelayMs',
    options.storeRetryMaxDelayMs ?? 30_000,
    storeRetryDelayMs,
  );
  const logger = safeLogger(options.logger ?? createStderrLogger());
  const maxInsertRows = Math.max(batchSize, 1000);

  const counters = {
    processed: 0,
    inserted: 0,
    duplicates: 0,
    malformed: 0,
    refused: 0,
    failedBatches: 0,
    batches: 0,
    scrubFailures: 0,
    completedJobs: 0,
    retriedJobs: 0,
    failedJobs: 0,
  };
  const batch: Parked[] = [];
  let inserting = 0;
  let timer: NodeJS.Timeout | undefined;
  let lastErrorLog = 0;

  // The store outage, if any: one probe loop that every held batch waits on.
  let outage: { since: number; answered: Promise<boolean> } | undefined;
  let closed = false;
  let wakeProbe: (() => void) | undefined;

  /** Probe the store until it answers (true), or the worker closes (false). */
  const probeUntilAnswered = async (): Promise<boolean> => {
    let delay = storeRetryDelayMs;
    for (;;) {
      await new Promise<void>((done) => {
        const sleep = setTimeout(done, delay);
        sleep.unref();
        wakeProbe = () => {
          clearTimeout(sleep);
          done();
        };
      });
      wakeProbe = undefined;
      if (closed) return false;
      if ((await raceTimeout(store.ping(), PING_TIMEOUT_MS)) === true) return true;
      delay = Math.min(delay * 2, storeRetryMaxDelayMs);
    }
  };

  /** Resolves true once the store answers again (false: the worker closed meanwhile). */
  const waitForStore = (held: number): Promise<boolean> => {
    if (closed) return Promise.resolve(false);
    if (!outage) {
      const since = Date.now();
      logger.warn('audit store unavailable; holding records until it answers', {
        records: held,
        retryDelayMs: storeRetryDelayMs,
        maxRetryDelayMs: storeRetryMaxDelayMs,
      });
      const answered = probeUntilAnswered().then((ok) => {
        if (ok)
          logger.info('audit store answers again; storing held records', {
            downMs: Date.now() - since,
            records: batch.length + inserting,
          });
        outage = undefined;
        return ok;
      });
      outage = { since, answered };
    }
    return outage.answered;
  };

  /** One statement for `slots`, in a span of its own: stored, held (the store is away), or why not. */
  const tryInsert = (slots: readonly Slot[]): Promise<'stored' | 'held' | { error: unknown }> => {
    const records = slots.map((slot) => slot.record);
    const links: Link[] = [];
    for (const record of records) {
      if (links.length >= MAX_SPAN_LINKS) break;
      if (record.traceId && record.spanId)
        links.push({ context: { traceId: record.traceId, spanId: record.spanId, traceFlags: 0 } });
    }
    const attributes: Attributes = {
      'messaging.system': 'bullmq',
      'messaging.destination.name': queueName,
      'messaging.operation.type': SPAN_PROCESS,
      'messaging.batch.message_count': records.length,
    };
    return tracer.startActiveSpan(
      `${SPAN_PROCESS} ${queueName}`,
      { kind: SpanKind.CONSUMER, attributes, links },
      async (span) => {
        try {
          await hooks.beforeInsert?.(records);
          const inserted = await store.insertBatch(records);
          await hooks.afterInsert?.(records, inserted);
          counters.batches++;
          counters.inserted += inserted;
          counters.duplicates += records.length - inserted;
          counters.processed += records.length;
          span.setAttribute('fleet.audit.inserted', inserted);
          for (const slot of slots) slot.entry.settle();
          return 'stored';
        } catch (error) {
          counters.failedBatches++;
          span.recordException(error as Error);
          span.setStatus({ code: SpanStatusCode.ERROR });
          if ((await raceTimeout(store.ping(), PING_TIMEOUT_MS)) !== true) {
            // An outage: hold the batch (its jobs stay active, no attempt spent).
            if (!outage)
              logger.warn('audit batch insert failed; the store does not answer', {
                records: records.length,
                error: errorFields(error),
              });
            return 'held';
          }
          return { error };
        } finally {
          span.end();
        }
      },
    );
  };

  /**
   * Store `slots`, holding them through an outage. An insert that fails while the store
   * answers is a problem of some record in it: the slots are split in halves, each stored the
   * same way, down to single records. A failed statement inserts nothing, so every record the
   * store takes is stored once, and only the jobs of the records it refuses on their own fail.
   * Returns the store's errors for those.
   */
  const storeIsolating = async (slots: readonly Slot[]): Promise<unknown[]> => {
    for (;;) {
      const outcome = await tryInsert(slots);
      if (outcome === 'stored') return [];
      if (outcome === 'held') {
        // Held past close: the jobs stay unacknowledged and BullMQ redelivers them.
        if (!(await waitForStore(slots.length))) return [];
        continue;
      }
      const [only] = slots;
      if (slots.length === 1 && only) {
        counters.refused++;
        only.entry.settle(refusalError(outcome.error));
        return [outcome.error];
      }
      const half = Math.ceil(slots.length / 2);
      const head = await storeIsolating(slots.slice(0, half));
      return [...head, ...(await storeIsolating(slots.slice(half)))];
    }
  };

  const insert = async (entries: Parked[]): Promise<void> => {
    inserting += entries.length;
    try {
      const slots = entries.map((entry): Slot => {
        const { record, failed } = scrubRecord(entry.record, scrub);
        counters.scrubFailures += failed;
        return { entry, record };
      });
      const refused = await storeIsolating(slots);
      if (refused.length === 0) return;
      const errors = new Map<string, LogFields>();
      for (const error of refused) {
        const fields = refusalFields(error);
        errors.set(JSON.stringify(fields), fields);
      }
      logger.warn('audit store refused records of a batch; their jobs failed', {
        records: slots.length,
        refused: refused.length,
        errors: [...errors.values()].slice(0, 5),
      });
    } finally {
      inserting -= entries.length;
    }
  };

  const flush = (): void => {
    clearTimeout(timer);
    timer = undefined;
    // Batch jobs can park more than batchSize at once: one statement per maxInsertRows.
    while (batch.length > 0) void insert(batch.splice(0, maxInsertRows));
  };

  /**
   * Add records to the batch; resolves once each of them is stored or refused by the store,
   * with the refusals' errors in the records' order (undefined: stored).
   */
  const park = (records: readonly AuditRecord[]): Promise<Array<Error | undefined>> => {
    const committed = Promise.all(
      records.map(
        (record) => new Promise<Error | undefined>((settle) => batch.push({ record, settle })),
      ),
    );
    if (batch.length >= batchSize) flush();
    else if (!timer) timer = setTimeout(flush, flushIntervalMs);
    return committed;
  };

  /** The record, or why it is malformed (counted and logged). */
  const parse = (job: Job, data: unknown, index?: number): AuditRecord | string => {
    try {
      return parseAuditRecord(data);
    } catch (error) {
      counters.malformed++;
      const issues = error instanceof AuditRecordError ? error.issues : undefined;
      logger.warn('malformed audit record moved to the failed set', {
        jobId: job.id,
        ...(index === undefined ? {} : { index }),
        issues: issues?.slice(0, 10),
      });
      return error instanceof Error ? error.message : 'malformed audit record';
    }
  };

  // Records per job, smoothed: sizes BullMQ's concurrency so about `concurrency` records
  // are held whatever the jobs' shape.
  let recordsPerJob = 1;
  const adaptConcurrency = (records: number): void => {
    recordsPerJob += (Math.max(1, records) - recordsPerJob) * 0.2;
    const jobs = Math.max(2, Math.min(concurrency, Math.round(concurrency / recordsPerJob)));
    if (jobs !== worker.concurrency) worker.concurrency = jobs;
  };

  const handle = async (job: Job): Promise<void> => {
    if (job.name !== AUDIT_BATCH_JOB_NAME) {
      if (recordsPerJob > 1.5) adaptConcurrency(1);
      const record = parse(job, job.data);
      if (typeof record === 'string') throw new UnrecoverableError(record);
      const [refused] = await park([record]);
      if (refused) throw refused;
      return;
    }
    const list = (job.data as { records?: unknown } | null)?.records;
    if (!Array.isArray(list)) {
      counters.malformed++;
      logger.warn('malformed audit batch job moved to the failed set', { jobId: job.id });
      throw new UnrecoverableError('malformed audit batch: no records array');
    }
    adaptConcurrency(list.length);
    const records: AuditRecord[] = [];
    const indexes: number[] = [];
    const problems: string[] = [];
    list.forEach((data, index) => {
      const record = parse(job, data, index);
      if (typeof record === 'string') problems.push(`[${index}] ${record}`);
      else {
        records.push(record);
        indexes.push(index);
      }
    });
    const refused: Error[] = [];
    (await park(records)).forEach((error, i) => {
      if (!error) return;
      refused.push(error);
      problems.push(`[${indexes[i]}] ${error.message}`);
    });
    // The good records are stored; the job (with the bad ones) goes to the failed set.
    if (problems.length === 0) return;
    const malformed = problems.length - refused.length;
    const counts = [
      ...(malformed > 0 ? [`${malformed} of ${list.length} audit records malformed`] : []),
      ...(refused.length > 0
        ? [`${refused.length} of ${list.length} audit records refused by the store`]
        : []),
    ];
    const message = `${counts.join(', ')}: ${problems.slice(0, 5).join('; ')}`;
    // Malformed records and data exceptions fail the same way again; another refusal is
    // retried with the job's backoff (its stored records are duplicates then).
    throw refused.every((error) => error instanceof UnrecoverableError)
      ? new UnrecoverableError(message)
      : new Error(message);
  };

  const redisOptions: RedisOptions = {
    connectionName: 'fleet-audit-worker',
    ...(typeof connection === 'string' ? {} : connection),
    maxRetriesPerRequest: null,
  };
  const client =
    typeof connection === 'string' ? new Redis(connection, redisOptions) : new Redis(redisOptions);
  client.on('error', () => undefined);
  const worker = new Worker(queueName, handle, {
    connection: client,
    ...(prefix === undefined ? {} : { prefix }),
    concurrency,
    lockDuration: lockDurationMs,
    stalledInterval: stalledIntervalMs,
    maxStalledCount,
    autorun,
  });
  worker.on('error', (error) => {
    // Connection errors repeat while Redis is away: log one per 10 s.
    const now = Date.now();
    if (now - lastErrorLog < 10_000) return;
    lastErrorLog = now;
    logger.warn('audit worker error', { queue: queueName, error: errorFields(error) });
  });
  worker.on('completed', () => {
    counters.completedJobs++;
  });
  // BullMQ emits 'failed' for every failed attempt; one that ended in the failed set has
  // finished (a retried one waits, delayed, for another attempt).
  worker.on('failed', (job) => {
    if (!job) return;
    if (job.finishedOn === undefined) counters.retriedJobs++;
    else counters.failedJobs++;
  });
  // Reads the queue's length on the worker's connection; created on first use.
  let countsQueue: Queue | undefined;

  let closing: Promise<void> | undefined;
  return {
    waitUntilReady: () => worker.waitUntilReady().then(() => undefined),
    run() {
      void worker.run().catch((error: unknown) => {
        logger.error('audit worker stopped', { error: errorFields(error) });
      });
    },
    isRunning: () => worker.isRunning() && client.status === 'ready',
    metrics: () => ({
      ...counters,
      pending: batch.length + inserting,
      storeUnavailable: outage !== undefined,
    }),
    async jobCounts() {
      if (closed) throw new Error('the audit worker is closed');
      if (!countsQueue) {
        countsQueue = new Queue(queueName, {
          connection: client,
          ...(prefix === undefined ? {} : { prefix }),
          skipVersionCheck: true,
        });
        // Connection errors are the worker's own (handled above).
        countsQueue.on('error', () => undefined);
      }
      // A paused queue keeps its jobs waiting (BullMQ 6 has no separate paused list).
      const counts = await countsQueue.getJobCounts(
        'waiting',
        'prioritized',
        'active',
        'delayed',
        'failed',
      );
      const count = (state: string): number => counts[state] ?? 0;
      return {
        waiting: count('waiting') + count('prioritized'),
        active: count('active'),
        delayed: count('delayed'),
        failed: count('failed'),
      };
    },
    close() {
      closing ??= (async () => {
        // worker.close() waits for active jobs, which wait for their batch: insert it now.
        const flushing = setInterval(flush, 5);
        // Held batches cannot commit while the store is away: do not wait for their jobs.
        const storeAway = outage !== undefined;
        closed = true;
        wakeProbe?.();
        try {
          await closeWorkerPromptly({
            what: 'audit worker',
            worker,
            ...(countsQueue ? { queue: countsQueue } : {}),
            client,
            timeoutMs: closeTimeoutMs,
            force: storeAway,
            logger,
          });
        } finally {
          clearInterval(flushing);
          // Records parked by jobs still running are inserted anyway (idempotent): stored
          // sooner; their jobs are redelivered if the acknowledgement did not make it.
          flush();
        }
      })();
      return closing;
    },
  };
}
