/**
 * The audit pipeline on a meter: observable instruments that read a producer's and a worker's
 * counters when the meter is collected (a `/metrics` scrape), so nothing is recorded per
 * record beyond the counters the producer and the worker keep anyway; and the audit queue's
 * length by state, read from Redis at most once per `queueCountsMaxAgeMs` however often the
 * meter is collected. Names from @fleet/telemetry's table; built on `@opentelemetry/api`'s
 * `Meter` only (the service wires the SDK). A collection never fails because of them.
 */
import { ATTR, METRIC } from '@fleet/telemetry';
import type { Attributes, Meter, ObservableResult } from '@opentelemetry/api';
import { raceTimeout } from './closing.ts';
import type { AuditProducer } from './producer.ts';
import type { AuditQueueCounts, AuditWorker } from './worker.ts';

/** The part of an OpenTelemetry `Meter` that {@link registerAuditMetrics} uses. */
export type AuditMetricsMeter = Pick<Meter, 'createObservableCounter' | 'createObservableGauge'>;

/** What to observe; either may be absent (no worker in the process, no producer in a worker). */
export interface AuditMetricSources {
  /** The process's producer: records enqueued, sent, journaled, lost; its sends; what waits. */
  producer?: Pick<AuditProducer, 'metrics'> | undefined;
  /** The process's worker: records stored and refused, batches, jobs; the queue's length. */
  worker?: Pick<AuditWorker, 'metrics' | 'jobCounts'> | undefined;
}

/** Options for {@link registerAuditMetrics}. */
export interface AuditMetricsOptions {
  /**
   * How long one reading of the queue's length serves collections: a fast scraper (or
   * several) costs Redis one `getJobCounts` per this period. Default
   * {@link DEFAULT_QUEUE_COUNTS_MAX_AGE_MS}.
   */
  queueCountsMaxAgeMs?: number;
  /**
   * Longest a collection waits for a reading of the queue's length; past it (Redis away or
   * slow) the gauge is left out of that collection, and the reading goes on for the next one
   * (never more than one at a time). Default {@link DEFAULT_QUEUE_COUNTS_TIMEOUT_MS}.
   */
  queueCountsTimeoutMs?: number;
}

/** Default of {@link AuditMetricsOptions.queueCountsMaxAgeMs}. */
export const DEFAULT_QUEUE_COUNTS_MAX_AGE_MS = 5000;
/** Default of {@link AuditMetricsOptions.queueCountsTimeoutMs}. */
export const DEFAULT_QUEUE_COUNTS_TIMEOUT_MS = 1000;

type Observe = (value: number, attributes?: Attributes) => void;

const outcome = (value: string, reason?: string): Attributes =>
  reason === undefined
    ? { [ATTR.FLEET_AUDIT_OUTCOME]: value }
    : { [ATTR.FLEET_AUDIT_OUTCOME]: value, [ATTR.FLEET_AUDIT_REASON]: reason };

/**
 * The queue's length, read by `read` at most once per `maxAgeMs` and at most one read at a
 * time; `undefined` when no reading younger than `maxAgeMs` is there within `timeoutMs`.
 */
function cachedCounts(
  read: () => Promise<AuditQueueCounts>,
  maxAgeMs: number,
  timeoutMs: number,
): () => Promise<AuditQueueCounts | undefined> {
  let last: { at: number; counts: AuditQueueCounts } | undefined;
  let reading: Promise<void> | undefined;
  const fresh = () => (last && Date.now() - last.at < maxAgeMs ? last.counts : undefined);
  return async () => {
    if (fresh()) return fresh();
    reading ??= Promise.resolve()
      .then(read)
      .then(
        (counts) => {
          last = { at: Date.now(), counts };
        },
        () => {
          last = undefined;
        },
      )
      .finally(() => {
        reading = undefined;
      });
    await raceTimeout(reading, timeoutMs);
    return fresh();
  };
}

/**
 * Register the audit pipeline's observable instruments on `meter` (once per process: the
 * names are the process's). Reading happens at collection only.
 */
export function registerAuditMetrics(
  meter: AuditMetricsMeter,
  sources: AuditMetricSources,
  options: AuditMetricsOptions = {},
): void {
  const {
    queueCountsMaxAgeMs = DEFAULT_QUEUE_COUNTS_MAX_AGE_MS,
    queueCountsTimeoutMs = DEFAULT_QUEUE_COUNTS_TIMEOUT_MS,
  } = options;
  const observe = (
    kind: 'counter' | 'gauge',
    name: string,
    description: string,
    unit: string | undefined,
    read: (observe: Observe) => void | Promise<void>,
  ): void => {
    const settings = unit === undefined ? { description } : { description, unit };
    const instrument =
      kind === 'counter'
        ? meter.createObservableCounter(name, settings)
        : meter.createObservableGauge(name, settings);
    instrument.addCallback(async (result: ObservableResult) => {
      try {
        await read((value, attributes) => result.observe(value, attributes));
      } catch {
        // A broken source leaves its instrument out of this collection, nothing more.
      }
    });
  };

  const { producer, worker } = sources;
  if (producer) {
    observe(
      'counter',
      METRIC.AUDIT_PRODUCER_RECORDS,
      'Audit records handled by this process’s producer',
      '{record}',
      (add) => {
        const m = producer.metrics();
        add(m.enqueued, outcome('enqueued'));
        add(m.sent, outcome('sent'));
        add(m.journaled, outcome('journaled'));
        add(m.replayed, outcome('replayed'));
        add(m.droppedBy.journalWrite, outcome('dropped', 'journal_write'));
        add(m.droppedBy.journalRead, outcome('dropped', 'journal_read'));
        add(m.rejectedBy.invalidId, outcome('rejected', 'invalid_id'));
        add(m.rejectedBy.unserialisable, outcome('rejected', 'unserialisable'));
        add(m.writeAheadRecovered, outcome('recovered'));
        add(m.writeAheadFailures, outcome('write_ahead_failed'));
      },
    );
    observe(
      'counter',
      METRIC.AUDIT_PRODUCER_BATCHES,
      'Sends of audit records to Redis (addBulk) by this process’s producer',
      '{batch}',
      (add) => {
        const m = producer.metrics();
        add(m.batches, outcome('sent'));
        add(m.sendFailures, outcome('failed'));
      },
    );
    observe(
      'gauge',
      METRIC.AUDIT_PRODUCER_PENDING,
      'Audit records waiting in the producer for Redis',
      '{record}',
      (add) => {
        const m = producer.metrics();
        add(m.buffered, { state: 'memory' });
        add(m.journalPending, { state: 'journal' });
      },
    );
    observe(
      'gauge',
      METRIC.AUDIT_PRODUCER_CONNECTED,
      'The audit producer’s Redis connection is up (1) or not (0)',
      undefined,
      (add) => add(producer.metrics().connected ? 1 : 0),
    );
  }
  if (worker) {
    observe(
      'counter',
      METRIC.AUDIT_WORKER_RECORDS,
      'Audit records handled by this process’s worker',
      '{record}',
      (add) => {
        const m = worker.metrics();
        add(m.processed, outcome('processed'));
        add(m.inserted, outcome('inserted'));
        add(m.duplicates, outcome('duplicate'));
        add(m.malformed, outcome('malformed'));
        add(m.refused, outcome('refused'));
        add(m.scrubFailures, outcome('scrub_failed'));
      },
    );
    observe('counter', METRIC.AUDIT_WORKER_BATCHES, 'Audit insert batches', '{batch}', (add) => {
      const m = worker.metrics();
      add(m.batches, outcome('committed'));
      add(m.failedBatches, outcome('failed'));
    });
    observe(
      'counter',
      METRIC.AUDIT_WORKER_JOBS,
      'Audit queue jobs finished by this process’s worker',
      '{job}',
      (add) => {
        const m = worker.metrics();
        add(m.completedJobs, outcome('completed'));
        add(m.retriedJobs, outcome('retried'));
        add(m.failedJobs, outcome('failed'));
      },
    );
    observe(
      'gauge',
      METRIC.AUDIT_WORKER_PENDING,
      'Audit records batched or being inserted',
      '{record}',
      (add) => add(worker.metrics().pending),
    );
    observe(
      'gauge',
      METRIC.AUDIT_WORKER_STORE_UNAVAILABLE,
      'Audit store unavailable: records held until it answers (1) or not (0)',
      undefined,
      (add) => add(worker.metrics().storeUnavailable ? 1 : 0),
    );
    const counts = cachedCounts(
      () => worker.jobCounts(),
      queueCountsMaxAgeMs,
      queueCountsTimeoutMs,
    );
    observe(
      'gauge',
      METRIC.AUDIT_QUEUE_JOBS,
      'Jobs in the audit queue by state (one record, or a producer’s batch, each)',
      '{job}',
      async (add) => {
        const c = await counts();
        if (!c) return;
        const state = (value: string): Attributes => ({ [ATTR.FLEET_AUDIT_JOB_STATE]: value });
        add(c.waiting, state('waiting'));
        add(c.active, state('active'));
        add(c.delayed, state('delayed'));
        add(c.failed, state('failed'));
      },
    );
  }
}
