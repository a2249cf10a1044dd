/**
 * The audit producer: `enqueue` a record and return at once; a single background pump sends
 * batches to the BullMQ queue with `addBulk` (job id = record id, so a record sent twice is
 * stored once). While Redis is away, records wait in a bounded in-memory buffer and spill,
 * oldest first, to an append-only NDJSON journal; once Redis answers again the journal is
 * replayed first, then the buffer, so records reach the queue in the order they were
 * enqueued. Records are lost only when the journal cannot be written, and that is counted
 * and logged as an error.
 *
 * Ordering invariant: every journaled record is older than every buffered one. The pump is
 * the only code that sends, spills or replays, one step at a time, which keeps it so.
 */
import { resolve } from 'node:path';
import { type DefaultJobOptions, Queue } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { raceTimeout } from './closing.ts';
import { AuditJournalInUseError, createJournal, lockJournal } from './journal.ts';
import { type AuditLogger, createStderrLogger, errorFields, safeLogger } from './logger.ts';
import {
  AUDIT_BATCH_JOB_NAME,
  AUDIT_JOB_NAME,
  AUDIT_QUEUE,
  type AuditRecord,
  type AuditRecordBatch,
} from './record.ts';
import { openWriteAhead, recoverWriteAhead, type WriteAheadLog } from './write-ahead.ts';

/** Where the journal goes unless `journalPath` says otherwise (relative to the cwd). */
export const DEFAULT_JOURNAL_PATH = '.fleet/audit-journal.ndjson';

/** The Redis the producer talks to unless `connection` says otherwise. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** Records a producer holds in memory unless `maxBuffered` says otherwise. */
export const DEFAULT_MAX_BUFFERED = 10_000;

/**
 * Job options of every audit job. Completed jobs are dropped soon (the store keeps the
 * record); failed ones stay a week for inspection; the worker retries a transient failure
 * with exponential backoff.
 */
export const AUDIT_JOB_OPTIONS: DefaultJobOptions = {
  removeOnComplete: { count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
  attempts: 8,
  backoff: { type: 'exponential', delay: 1000 },
};

/** Options for {@link createAuditProducer}. */
export interface AuditProducerOptions {
  /**
   * The Redis to send to: a `redis://` URL or ioredis options. The producer opens and owns
   * its connection (fail-fast settings are forced, see the README). Default
   * {@link DEFAULT_REDIS_URL}.
   */
  connection?: string | RedisOptions;
  /** Queue name. Default {@link AUDIT_QUEUE}. */
  queue?: string;
  /** BullMQ key prefix. Default BullMQ's own (`bull`). */
  prefix?: string;
  /** Most records per `addBulk` (or per batch job). Default 500. */
  batchSize?: number;
  /**
   * Send each batch as one `audit-batch` job instead of one `audit` job per record: one
   * BullMQ job (a few Redis round trips) per batch rather than per record, which is what
   * lifts the pipeline past BullMQ's per-job rate (see the benchmark). The worker reads both
   * shapes. Default false: one job per record, job id = record id.
   */
  batchJobs?: boolean;
  /** How long a record may wait for companions before its batch is sent. Default 50 ms. */
  flushIntervalMs?: number;
  /**
   * Most records held in memory while Redis is slow or away; older ones spill to the
   * journal. Checked between sends, so during one send (at most `sendTimeoutMs`) what
   * arrives meanwhile may exceed it. `0`: every record goes through the journal. Default
   * {@link DEFAULT_MAX_BUFFERED}.
   */
  maxBuffered?: number;
  /**
   * The spill journal (NDJSON; its directory is created). One producer per file: a lock
   * file `<journalPath>.lock` holds the owner's pid, so two producers (two services started
   * from one directory, say) cannot share it. Default {@link DEFAULT_JOURNAL_PATH}.
   */
  journalPath?: string;
  /**
   * Write every record to a write-ahead log beside the journal (`<journalPath>.wal.0` and
   * `.wal.1`; one `write` to the page cache per record, no fsync) before `enqueue` returns,
   * so that records waiting in memory for their batch survive the process being killed
   * (SIGKILL, the OOM killer); the next producer on the journal replays them. It costs a
   * `JSON.stringify` and a `write` per record, and a record that cannot be serialised is
   * rejected at `enqueue` rather than when its batch is sent. Default false: a killed
   * process loses what it held in memory (at most `flushIntervalMs` of records while Redis
   * is up). Segments a previous run left are replayed whether or not this is on.
   */
  writeAhead?: boolean;
  /** Where the producer reports. Default: JSON lines on stderr. */
  logger?: AuditLogger;
  /** Longest wait for one `addBulk` before it counts as failed. Default 2000 ms. */
  sendTimeoutMs?: number;
  /** How long `close()` tries to deliver before it journals the rest. Default 2000 ms. */
  closeTimeoutMs?: number;
  /** Upper bound of the reconnect backoff. Default 2000 ms. */
  maxReconnectDelayMs?: number;
}

/** Counters and gauges of a producer. */
export interface AuditProducerMetrics {
  /** Records accepted by `enqueue`. */
  enqueued: number;
  /** Records in memory now. */
  buffered: number;
  /** Records ever written to the journal. */
  journaled: number;
  /** Records in the journal now, waiting to be replayed. */
  journalPending: number;
  /** Records from the journal that Redis accepted. */
  replayed: number;
  /** Records Redis accepted (replayed ones included). */
  sent: number;
  /** Successful `addBulk` calls. */
  batches: number;
  /** Failed or timed-out `addBulk` calls. */
  sendFailures: number;
  /** Records lost: the journal could not be written, or a journal line could not be read. */
  dropped: number;
  /**
   * `dropped` by cause: the journal could not be written (`journalWrite`), or lines of it
   * could not be read back, a torn write (`journalRead`).
   */
  droppedBy: { journalWrite: number; journalRead: number };
  /**
   * Records the write-ahead log could not take (a failed write: disk full, I/O error);
   * they are delivered as usual but would be lost if the process were killed first.
   */
  writeAheadFailures: number;
  /** Records a previous run left in the write-ahead log, moved into the journal at start. */
  writeAheadRecovered: number;
  /** Records refused as unusable (no ULID `id`, or not serialisable). */
  rejected: number;
  /**
   * `rejected` by cause: no ULID `id` (`invalidId`, also a journal line without one), or not
   * JSON-serialisable (`unserialisable`).
   */
  rejectedBy: { invalidId: number; unserialisable: number };
  /** True while the Redis connection is up. */
  connected: boolean;
}

/** A running producer. */
export interface AuditProducer {
  /**
   * Queue a record for delivery and return at once: no I/O, no validation beyond a ULID
   * `id` (the worker parses). Never throws. The producer owns the record from here on: do
   * not change it. After `close()` the record is appended to the journal synchronously.
   */
  enqueue(record: AuditRecord): void;
  /**
   * Deliver everything buffered and journaled so far, waiting for Redis up to `timeoutMs`
   * (default 5000 ms). Resolves when all is delivered or time is up; never rejects.
   * `metrics()` tells what is still pending.
   */
  flush(timeoutMs?: number): Promise<void>;
  /**
   * Deliver what can be delivered within `closeTimeoutMs` (without waiting for a Redis that
   * is away), journal the rest, and close the connection. Nothing is lost. Idempotent.
   */
  close(): Promise<void>;
  /** A snapshot of the counters. */
  metrics(): AuditProducerMetrics;
}

const DEFAULT_FLUSH_TIMEOUT_MS = 5000;
const MIN_RETRY_DELAY_MS = 100;
const MAX_RETRY_DELAY_MS = 5000;
const QUIT_TIMEOUT_MS = 1000;
// Crockford base32, 26 characters, first at most 7: what BullMQ needs of a job id and the
// store of a key. Cheap enough for the request path.
const ULID_PATTERN = /^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$/;

type SendResult = { ok: true } | { ok: false; error: unknown };

/** What the `audit records rejected` log line says for each cause. */
const REJECT_WHY = {
  invalidId: 'no ULID id',
  unserialisable: 'not serialisable',
} as const;

function checkNumber(name: string, value: number, min: number): number {
  if (!Number.isFinite(value) || value < min)
    throw new RangeError(`${name} must be a number >= ${min}, got ${value}`);
  return value;
}

function checkInteger(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min)
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

function hasUlidId(record: unknown): record is AuditRecord {
  const id = (record as { id?: unknown } | null | undefined)?.id;
  return typeof id === 'string' && ULID_PATTERN.test(id);
}

/** The job id of a batch job: its first and last record ids and its size. */
function batchJobId(records: readonly AuditRecord[]): string {
  return `batch-${records[0]?.id}-${records.at(-1)?.id}-${records.length}`;
}

function isSerialisable(record: unknown): boolean {
  try {
    return typeof JSON.stringify(record) === 'string';
  } catch {
    return false;
  }
}

function codedError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * Start a producer: it takes its journal's lock, connects (in the background) and replays a
 * journal left by a previous run as soon as Redis answers.
 * @throws RangeError for a numeric option out of range.
 * @throws AuditJournalInUseError when another live producer holds the journal.
 */
export function createAuditProducer(options: AuditProducerOptions = {}): AuditProducer {
  const {
    connection = DEFAULT_REDIS_URL,
    queue: queueName = AUDIT_QUEUE,
    prefix,
    journalPath = DEFAULT_JOURNAL_PATH,
    batchJobs = false,
    writeAhead = false,
  } = options;
  const batchSize = checkInteger('batchSize', options.batchSize ?? 500, 1);
  const flushIntervalMs = checkNumber('flushIntervalMs', options.flushIntervalMs ?? 50, 0);
  const maxBuffered = checkInteger('maxBuffered', options.maxBuffered ?? DEFAULT_MAX_BUFFERED, 0);
  const sendTimeoutMs = checkNumber('sendTimeoutMs', options.sendTimeoutMs ?? 2000, 1);
  const closeTimeoutMs = checkNumber('closeTimeoutMs', options.closeTimeoutMs ?? 2000, 0);
  const maxReconnectDelayMs = checkNumber(
    'maxReconnectDelayMs',
    options.maxReconnectDelayMs ?? 2000,
    1,
  );
  const logger = safeLogger(options.logger ?? createStderrLogger());
  const journal = createJournal(resolve(journalPath));
  let unlockJournal = (): void => undefined;
  let locked = false;
  try {
    unlockJournal = lockJournal(journal.path);
    locked = true;
  } catch (error) {
    if (error instanceof AuditJournalInUseError) throw error;
    // A journal we cannot even lock will not take writes either; delivery to Redis still
    // works, so start and say so (each record lost later is logged again).
    logger.error('the audit journal is unusable; records Redis cannot take will be lost', {
      path: journal.path,
      error: errorFields(error),
    });
  }
  let writeAheadRecovered = 0;
  let wal: WriteAheadLog | undefined;
  if (locked) {
    try {
      const { records, tornBytes } = recoverWriteAhead(journal.path);
      writeAheadRecovered = records;
      if (records > 0 || tornBytes > 0)
        logger.warn('moved the audit write-ahead log of a run that did not close to the journal', {
          path: journal.path,
          records,
          ...(tornBytes > 0 ? { tornBytes } : {}),
        });
    } catch (error) {
      logger.error('cannot recover the audit write-ahead log of a previous run; left in place', {
        path: journal.path,
        error: errorFields(error),
      });
    }
    if (writeAhead) {
      try {
        wal = openWriteAhead(journal.path);
      } catch (error) {
        logger.error(
          'cannot open the audit write-ahead log; records in memory are lost if the process is killed',
          { path: journal.path, error: errorFields(error) },
        );
      }
    }
  }

  const redisOptions: RedisOptions = {
    connectionName: 'fleet-audit-producer',
    ...(typeof connection === 'string' ? {} : connection),
    // Commands fail at once while Redis is away, so records wait in our buffer and journal
    // (bounded, observable), never in a hidden ioredis offline queue.
    enableOfflineQueue: false,
    maxRetriesPerRequest: null,
    lazyConnect: false,
    // Reconnect forever, backing off to maxReconnectDelayMs.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 16), maxReconnectDelayMs),
  };
  let created: Redis | undefined;
  let queue: Queue<AuditRecord | AuditRecordBatch>;
  try {
    created =
      typeof connection === 'string'
        ? new Redis(connection, redisOptions)
        : new Redis(redisOptions);
    queue = new Queue<AuditRecord | AuditRecordBatch>(queueName, {
      connection: created,
      ...(prefix === undefined ? {} : { prefix }),
      // The version probe runs once per Queue; if it failed (Redis gone right after
      // connecting) it would leave this Queue unusable for good.
      skipVersionCheck: true,
      defaultJobOptions: AUDIT_JOB_OPTIONS,
    });
  } catch (error) {
    // A bad queue name or connection option: leave nothing behind.
    created?.disconnect();
    unlockJournal();
    throw error;
  }
  const client: Redis = created;

  let state: 'open' | 'closing' | 'closed' = 'open';
  let memory: AuditRecord[] = [];
  // With the write-ahead log: the number of each record in memory (same order), and the next.
  let memorySeqs: number[] = [];
  let nextSeq = 0;
  let writeAheadFailures = 0;
  let writeAheadFailing = false;
  // Records on their way from memory to the journal (a spill being written).
  let spilling = 0;
  const counters = {
    enqueued: 0,
    journaled: 0,
    replayed: 0,
    sent: 0,
    batches: 0,
    sendFailures: 0,
  };
  const droppedBy = { journalWrite: 0, journalRead: 0 };
  const rejectedBy = { invalidId: 0, unserialisable: 0 };
  let pumping: Promise<void> | undefined;
  let flushTimer: NodeJS.Timeout | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let immediate: NodeJS.Immediate | undefined;
  let retryDelayMs = 0;
  let backoffUntil = 0;
  let sendDeadline = Number.POSITIVE_INFINITY;
  let outageSince: number | undefined;
  let spillWarned = false;
  let closing: Promise<void> | undefined;
  let lateWarned = false;

  /** Take the oldest `count` records out of memory. */
  const takeFront = (count: number): AuditRecord[] => {
    if (wal) memorySeqs.splice(0, count);
    return memory.splice(0, count);
  };

  /** Empty the write-ahead segments whose records have all left memory. */
  const releaseWriteAhead = (): void => {
    try {
      wal?.release(memorySeqs[0] ?? nextSeq);
    } catch (error) {
      logger.error('cannot empty an audit write-ahead segment', { error: errorFields(error) });
    }
  };

  /** Write `record` ahead; false when it cannot be serialised (rejected here). */
  const writeAheadOf = (log: WriteAheadLog, record: AuditRecord): boolean => {
    let line: string | undefined;
    try {
      line = JSON.stringify(record);
    } catch {
      line = undefined;
    }
    if (typeof line !== 'string') {
      reject([record], 'unserialisable');
      return false;
    }
    try {
      log.append(`${line}\n`, nextSeq);
      if (writeAheadFailing) {
        writeAheadFailing = false;
        logger.info('the audit write-ahead log takes writes again', { path: journal.path });
      }
    } catch (error) {
      writeAheadFailures++;
      if (!writeAheadFailing) {
        writeAheadFailing = true;
        logger.error(
          'cannot write the audit write-ahead log; records wait in memory only and are lost if the process is killed',
          { path: journal.path, error: errorFields(error) },
        );
      }
    }
    memorySeqs.push(nextSeq++);
    return true;
  };

  const enterOutage = (reason: string, error: unknown): void => {
    // Shutdown closes the connection on purpose: not an outage.
    if (outageSince !== undefined || state !== 'open') return;
    outageSince = Date.now();
    logger.warn('audit queue unreachable; buffering records', {
      queue: queueName,
      reason,
      error: errorFields(error),
      buffered: memory.length,
      journalPending: journal.pending,
    });
  };

  const leaveOutage = (how: string): void => {
    if (outageSince === undefined) return;
    logger.info('audit queue reachable again; delivering buffered records', {
      queue: queueName,
      how,
      downMs: Date.now() - outageSince,
      buffered: memory.length,
      journalPending: journal.pending,
    });
    outageSince = undefined;
    spillWarned = false;
  };

  const journalReady = journal.open().then(
    (pending) => {
      if (pending > 0)
        logger.warn('replaying the audit journal of a previous run', {
          path: journal.path,
          records: pending,
        });
    },
    (error: unknown) => {
      logger.error('cannot read the audit journal; its records are not replayed', {
        path: journal.path,
        error: errorFields(error),
      });
    },
  );

  const canSend = (): boolean => {
    const now = Date.now();
    return (
      state !== 'closed' && client.status === 'ready' && now >= backoffUntil && now < sendDeadline
    );
  };
  const hasWork = (): boolean => memory.length > 0 || spilling > 0 || journal.pending > 0;

  const reject = (
    records: readonly unknown[],
    cause: keyof typeof rejectedBy,
    why: string = REJECT_WHY[cause],
  ): void => {
    rejectedBy[cause] += records.length;
    logger.error('audit records rejected', {
      why,
      count: records.length,
      ids: records.slice(0, 10).map((r) => (r as { id?: unknown } | null)?.id),
    });
  };

  const scheduleRetry = (error: unknown): void => {
    retryDelayMs = retryDelayMs
      ? Math.min(retryDelayMs * 2, MAX_RETRY_DELAY_MS)
      : MIN_RETRY_DELAY_MS;
    backoffUntil = Date.now() + retryDelayMs;
    enterOutage('send failed', error);
    if (retryTimer) clearTimeout(retryTimer);
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void kick();
    }, retryDelayMs);
    retryTimer.unref();
  };

  const send = async (records: readonly AuditRecord[]): Promise<SendResult> => {
    const timeoutMs = Math.max(0, Math.min(sendTimeoutMs, sendDeadline - Date.now()));
    const attempt = queue.addBulk(
      batchJobs
        ? [
            {
              name: AUDIT_BATCH_JOB_NAME,
              data: { records: [...records] },
              // The same batch sent again (a timed-out send) collapses into one job.
              opts: { jobId: batchJobId(records) },
            },
          ]
        : records.map((record) => ({
            name: AUDIT_JOB_NAME,
            data: record,
            opts: { jobId: record.id },
          })),
    );
    // Settles after a timeout too; a late success is harmless (job ids collapse duplicates).
    attempt.catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    let onClose: (() => void) | undefined;
    try {
      await Promise.race([
        attempt,
        new Promise<never>((_, fail) => {
          timer = setTimeout(
            () => fail(codedError('SEND_TIMEOUT', `addBulk took longer than ${timeoutMs} ms`)),
            timeoutMs,
          );
          // A dropped connection fails the send now rather than after the timeout.
          onClose = () => fail(codedError('CONNECTION_CLOSED', 'Redis connection closed'));
          client.once('close', onClose);
        }),
      ]);
      counters.batches++;
      retryDelayMs = 0;
      leaveOutage('send succeeded');
      return { ok: true };
    } catch (error) {
      counters.sendFailures++;
      return { ok: false, error };
    } finally {
      clearTimeout(timer);
      if (onClose) client.off('close', onClose);
    }
  };

  const spill = async (count: number, why: 'overflow' | 'shutdown'): Promise<void> => {
    const records = takeFront(count);
    if (records.length === 0) return;
    if (why === 'overflow' && !spillWarned) {
      spillWarned = true;
      logger.warn('audit buffer full; spilling records to the journal', {
        path: journal.path,
        maxBuffered,
      });
    }
    spilling += records.length;
    try {
      const { written, unserializable } = await journal.append(records);
      counters.journaled += written;
      if (unserializable.length > 0) reject(unserializable, 'unserialisable');
    } catch (error) {
      droppedBy.journalWrite += records.length;
      logger.error('AUDIT RECORDS LOST: the journal cannot be written', {
        path: journal.path,
        lost: records.length,
        lostTotal: droppedBy.journalWrite + droppedBy.journalRead,
        error: errorFields(error),
      });
    } finally {
      spilling -= records.length;
    }
  };

  const replayBatch = async (): Promise<boolean> => {
    const batch = await journal.read(batchSize);
    if (!batch) return true;
    const records = batch.records.filter(hasUlidId);
    if (records.length > 0) {
      const result = await send(records);
      if (!result.ok) {
        scheduleRetry(result.error);
        return false;
      }
      counters.replayed += records.length;
      counters.sent += records.length;
    }
    await journal.commit(batch);
    if (records.length < batch.records.length)
      reject(
        batch.records.filter((record) => !hasUlidId(record)),
        'invalidId',
        'journal line without a ULID id',
      );
    if (batch.corrupt > 0) {
      droppedBy.journalRead += batch.corrupt;
      logger.error('AUDIT RECORDS LOST: unreadable journal lines skipped (a torn write)', {
        path: journal.path,
        lost: batch.corrupt,
      });
    }
    return true;
  };

  const sendBuffered = async (): Promise<boolean> => {
    const batch = memory.slice(0, batchSize);
    const result = await send(batch);
    if (result.ok) {
      // Only the pump removes from the front, so these are still the first records.
      takeFront(batch.length);
      counters.sent += batch.length;
      return true;
    }
    if (client.status === 'ready') {
      // A record BullMQ cannot serialise would fail every batch it is in: take it out.
      const bad = new Set(batch.filter((record) => !isSerialisable(record)));
      if (bad.size > 0) {
        if (wal) memorySeqs = memorySeqs.filter((_, i) => !bad.has(memory[i] as AuditRecord));
        memory = memory.filter((record) => !bad.has(record));
        reject([...bad], 'unserialisable');
        return true;
      }
    }
    scheduleRetry(result.error);
    return false;
  };

  const runPump = async (): Promise<void> => {
    await journalReady;
    for (; ; releaseWriteAhead()) {
      if (memory.length > maxBuffered) {
        await spill(Math.max(memory.length - maxBuffered, batchSize), 'overflow');
        continue;
      }
      if (!canSend()) return;
      if (journal.pending > 0) {
        if (!(await replayBatch())) return;
        continue;
      }
      if (memory.length === 0) return;
      if (!(await sendBuffered())) return;
    }
  };

  const kick = (): Promise<void> => {
    if (state === 'closed') return Promise.resolve();
    pumping ??= runPump()
      .catch((error: unknown) => {
        logger.error('audit producer pump failed; retrying', { error: errorFields(error) });
        scheduleRetry(error);
      })
      .finally(() => {
        pumping = undefined;
        // Records that arrived while the pump was finishing.
        if (memory.length > maxBuffered || (memory.length >= batchSize && canSend()))
          scheduleImmediate();
      });
    return pumping;
  };

  const scheduleImmediate = (): void => {
    if (immediate || state === 'closed') return;
    immediate = setImmediate(() => {
      immediate = undefined;
      void kick();
    });
  };

  const waitForReady = (ms: number): Promise<void> =>
    new Promise((done) => {
      const finish = (): void => {
        clearTimeout(timer);
        client.off('ready', finish);
        done();
      };
      const timer = setTimeout(finish, ms);
      client.once('ready', finish);
    });

  const drain = async (deadline: number, waitForConnection: boolean): Promise<void> => {
    await journalReady;
    while (hasWork() && state !== 'closed') {
      const left = deadline - Date.now();
      if (left <= 0) return;
      if (client.status !== 'ready') {
        if (!waitForConnection) return;
        await waitForReady(left);
      } else if (Date.now() < backoffUntil) {
        if (!waitForConnection) return;
        await raceTimeout(new Promise((done) => setTimeout(done, backoffUntil - Date.now())), left);
      } else {
        await raceTimeout(kick(), left);
      }
    }
  };

  client.on('error', (error: unknown) => enterOutage('connection error', error));
  client.on('close', () =>
    enterOutage('connection closed', codedError('CONNECTION_CLOSED', 'Redis connection closed')),
  );
  client.on('ready', () => {
    backoffUntil = 0;
    retryDelayMs = 0;
    leaveOutage('reconnected');
    void kick();
  });
  // The Queue re-emits connection errors (already handled above); without a listener an
  // 'error' event would be thrown.
  queue.on('error', () => undefined);

  const appendAfterClose = (record: AuditRecord): void => {
    if (!lateWarned) {
      lateWarned = true;
      logger.warn('audit record enqueued after close; appending it to the journal', {
        path: journal.path,
      });
    }
    try {
      const { written, unserializable } = journal.appendSync([record]);
      counters.journaled += written;
      if (unserializable.length > 0) reject(unserializable, 'unserialisable');
    } catch (error) {
      droppedBy.journalWrite++;
      logger.error('AUDIT RECORDS LOST: the journal cannot be written', {
        path: journal.path,
        lost: 1,
        lostTotal: droppedBy.journalWrite + droppedBy.journalRead,
        error: errorFields(error),
      });
    }
  };

  return {
    enqueue(record) {
      if (!hasUlidId(record)) {
        reject([record], 'invalidId');
        return;
      }
      if (state === 'closed') {
        counters.enqueued++;
        appendAfterClose(record);
        return;
      }
      if (wal && !writeAheadOf(wal, record)) return;
      counters.enqueued++;
      memory.push(record);
      if (memory.length === 1 && !flushTimer) {
        flushTimer = setTimeout(() => {
          flushTimer = undefined;
          void kick();
        }, flushIntervalMs);
        flushTimer.unref();
      }
      if (!pumping && (memory.length >= batchSize || memory.length > maxBuffered))
        scheduleImmediate();
    },

    flush(timeoutMs = DEFAULT_FLUSH_TIMEOUT_MS) {
      return drain(Date.now() + timeoutMs, true).catch((error: unknown) => {
        logger.error('audit flush failed', { error: errorFields(error) });
      });
    },

    close() {
      closing ??= (async () => {
        state = 'closing';
        clearTimeout(flushTimer);
        clearTimeout(retryTimer);
        if (immediate) clearImmediate(immediate);
        flushTimer = retryTimer = immediate = undefined;
        const deadline = Date.now() + closeTimeoutMs;
        sendDeadline = deadline;
        try {
          await drain(deadline, false);
          // A send still running is bounded by sendDeadline.
          await pumping;
          while (memory.length > 0) await spill(memory.length, 'shutdown');
          // Everything is in Redis or the journal now.
          wal?.close();
          wal = undefined;
        } finally {
          // From here on enqueue appends to the journal synchronously.
          state = 'closed';
        }
        if (journal.pending > 0)
          logger.warn(
            'audit producer closed with records in the journal; the next start replays them',
            {
              path: journal.path,
              records: journal.pending,
            },
          );
        await journal.close().catch((error: unknown) => {
          logger.error('cannot close the audit journal', { error: errorFields(error) });
        });
        unlockJournal();
        await queue.close().catch(() => undefined);
        if (client.status === 'ready')
          await raceTimeout(
            client.quit().catch(() => undefined),
            QUIT_TIMEOUT_MS,
          );
        client.disconnect();
      })();
      return closing;
    },

    metrics() {
      return {
        ...counters,
        dropped: droppedBy.journalWrite + droppedBy.journalRead,
        droppedBy: { ...droppedBy },
        rejected: rejectedBy.invalidId + rejectedBy.unserialisable,
        rejectedBy: { ...rejectedBy },
        writeAheadFailures,
        writeAheadRecovered,
        buffered: memory.length,
        journalPending: journal.pending,
        connected: state !== 'closed' && client.status === 'ready',
      };
    },
  };
}
