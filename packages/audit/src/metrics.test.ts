/**
 * The audit pipeline's observable instruments, collected through a meter that calls their
 * callbacks the way the OpenTelemetry SDK does at each scrape: what each instrument observes,
 * under which names and labels, and how often the queue's length is read from Redis.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ATTR, METRIC } from '@fleet/telemetry';
import { describe, expect, it } from 'vitest';
import {
  type AuditMetricsMeter,
  type AuditMetricsOptions,
  type AuditProducerMetrics,
  type AuditQueueCounts,
  type AuditWorkerMetrics,
  registerAuditMetrics,
} from './index.ts';

interface Point {
  value: number;
  attributes: Record<string, unknown>;
}

interface Registered {
  kind: 'counter' | 'gauge';
  unit: string | undefined;
  callback: (result: { observe(value: number, attributes?: object): void }) => unknown;
}

/** A meter that records what is registered and collects like the SDK (callbacks side by side). */
function collectingMeter() {
  const registered = new Map<string, Registered>();
  const instrument = (kind: Registered['kind']) => (name: string, options?: { unit?: string }) => ({
    addCallback(callback: Registered['callback']) {
      registered.set(name, { kind, unit: options?.unit, callback });
    },
    removeCallback() {},
  });
  const meter = {
    createObservableCounter: instrument('counter'),
    createObservableGauge: instrument('gauge'),
  } as unknown as AuditMetricsMeter;
  const collect = async (): Promise<Record<string, Point[]>> => {
    const collected: Record<string, Point[]> = {};
    await Promise.all(
      [...registered].map(async ([name, { callback }]) => {
        const points: Point[] = [];
        await callback({
          observe: (value, attributes = {}) =>
            points.push({ value, attributes: { ...attributes } }),
        });
        collected[name] = points;
      }),
    );
    return collected;
  };
  return { meter, registered, collect };
}

const producerMetrics: AuditProducerMetrics = {
  enqueued: 20,
  buffered: 3,
  journaled: 7,
  journalPending: 4,
  replayed: 2,
  sent: 9,
  batches: 5,
  sendFailures: 6,
  dropped: 3,
  droppedBy: { journalWrite: 2, journalRead: 1 },
  rejected: 4,
  rejectedBy: { invalidId: 1, unserialisable: 3 },
  writeAheadFailures: 8,
  writeAheadRecovered: 11,
  connected: false,
};

const workerMetrics: AuditWorkerMetrics = {
  processed: 30,
  inserted: 28,
  duplicates: 2,
  malformed: 1,
  refused: 2,
  failedBatches: 4,
  batches: 6,
  scrubFailures: 1,
  completedJobs: 11,
  retriedJobs: 3,
  failedJobs: 2,
  pending: 5,
  storeUnavailable: true,
};

const counts: AuditQueueCounts = { waiting: 4, active: 1, delayed: 3, failed: 2 };

/** A worker's instruments whose queue length comes from `jobCounts` (given the read's number, from 1). */
function observingQueue(
  jobCounts: (read: number) => Promise<AuditQueueCounts>,
  options?: AuditMetricsOptions,
) {
  const { meter, collect } = collectingMeter();
  let reads = 0;
  const worker = { metrics: () => workerMetrics, jobCounts: () => jobCounts(++reads) };
  registerAuditMetrics(meter, { worker }, options);
  return { collect, reads: () => reads };
}

const outcome = (value: string, more: Record<string, string> = {}) => ({
  [ATTR.FLEET_AUDIT_OUTCOME]: value,
  ...more,
});
const reason = (value: string) => ({ [ATTR.FLEET_AUDIT_REASON]: value });

describe('registerAuditMetrics', () => {
  it("observes the producer's counters under the table's names, dropped and rejected by reason", async () => {
    const { meter, registered, collect } = collectingMeter();
    registerAuditMetrics(meter, { producer: { metrics: () => producerMetrics } });
    expect([...registered.keys()].sort()).toEqual(
      [
        METRIC.AUDIT_PRODUCER_RECORDS,
        METRIC.AUDIT_PRODUCER_BATCHES,
        METRIC.AUDIT_PRODUCER_PENDING,
        METRIC.AUDIT_PRODUCER_CONNECTED,
      ].sort(),
    );
    expect(registered.get(METRIC.AUDIT_PRODUCER_RECORDS)).toMatchObject({
      kind: 'counter',
      unit: '{record}',
    });
    const collected = await collect();
    expect(collected[METRIC.AUDIT_PRODUCER_RECORDS]).toEqual([
      { value: 20, attributes: outcome('enqueued') },
      { value: 9, attributes: outcome('sent') },
      { value: 7, attributes: outcome('journaled') },
      { value: 2, attributes: outcome('replayed') },
      { value: 2, attributes: outcome('dropped', reason('journal_write')) },
      { value: 1, attributes: outcome('dropped', reason('journal_read')) },
      { value: 1, attributes: outcome('rejected', reason('invalid_id')) },
      { value: 3, attributes: outcome('rejected', reason('unserialisable')) },
      { value: 11, attributes: outcome('recovered') },
      { value: 8, attributes: outcome('write_ahead_failed') },
    ]);
    expect(collected[METRIC.AUDIT_PRODUCER_BATCHES]).toEqual([
      { value: 5, attributes: outcome('sent') },
      { value: 6, attributes: outcome('failed') },
    ]);
    expect(collected[METRIC.AUDIT_PRODUCER_PENDING]).toEqual([
      { value: 3, attributes: { state: 'memory' } },
      { value: 4, attributes: { state: 'journal' } },
    ]);
    expect(collected[METRIC.AUDIT_PRODUCER_CONNECTED]).toEqual([{ value: 0, attributes: {} }]);
  });

  it("observes the worker's counters and the queue's length by state", async () => {
    const { meter, registered, collect } = collectingMeter();
    registerAuditMetrics(meter, {
      worker: { metrics: () => workerMetrics, jobCounts: async () => counts },
    });
    expect([...registered.keys()].sort()).toEqual(
      [
        METRIC.AUDIT_WORKER_RECORDS,
        METRIC.AUDIT_WORKER_BATCHES,
        METRIC.AUDIT_WORKER_JOBS,
        METRIC.AUDIT_WORKER_PENDING,
        METRIC.AUDIT_WORKER_STORE_UNAVAILABLE,
        METRIC.AUDIT_QUEUE_JOBS,
      ].sort(),
    );
    expect(registered.get(METRIC.AUDIT_QUEUE_JOBS)).toMatchObject({ kind: 'gauge', unit: '{job}' });
    const collected = await collect();
    expect(collected[METRIC.AUDIT_WORKER_RECORDS]).toEqual([
      { value: 30, attributes: outcome('processed') },
      { value: 28, attributes: outcome('inserted') },
      { value: 2, attributes: outcome('duplicate') },
      { value: 1, attributes: outcome('malformed') },
      { value: 2, attributes: outcome('refused') },
      { value: 1, attributes: outcome('scrub_failed') },
    ]);
    expect(collected[METRIC.AUDIT_WORKER_BATCHES]).toEqual([
      { value: 6, attributes: outcome('committed') },
      { value: 4, attributes: outcome('failed') },
    ]);
    expect(collected[METRIC.AUDIT_WORKER_JOBS]).toEqual([
      { value: 11, attributes: outcome('completed') },
      { value: 3, attributes: outcome('retried') },
      { value: 2, attributes: outcome('failed') },
    ]);
    expect(collected[METRIC.AUDIT_WORKER_PENDING]).toEqual([{ value: 5, attributes: {} }]);
    expect(collected[METRIC.AUDIT_WORKER_STORE_UNAVAILABLE]).toEqual([
      { value: 1, attributes: {} },
    ]);
    const state = (value: string) => ({ [ATTR.FLEET_AUDIT_JOB_STATE]: value });
    expect(collected[METRIC.AUDIT_QUEUE_JOBS]).toEqual([
      { value: 4, attributes: state('waiting') },
      { value: 1, attributes: state('active') },
      { value: 3, attributes: state('delayed') },
      { value: 2, attributes: state('failed') },
    ]);
  });

  it("reads the queue's length at most once per queueCountsMaxAgeMs, however often it is scraped", async () => {
    const queue = observingQueue(
      async (read) => {
        await sleep(20);
        return { ...counts, waiting: read };
      },
      { queueCountsMaxAgeMs: 300 },
    );
    // Scrapes side by side share one read; those that follow reuse it.
    const side = await Promise.all([queue.collect(), queue.collect(), queue.collect()]);
    for (let i = 0; i < 5; i++) side.push(await queue.collect());
    expect(queue.reads()).toBe(1);
    for (const collected of side) expect(collected[METRIC.AUDIT_QUEUE_JOBS]?.[0]?.value).toBe(1);
    await sleep(350);
    expect((await queue.collect())[METRIC.AUDIT_QUEUE_JOBS]?.[0]?.value).toBe(2);
    expect(queue.reads()).toBe(2);
  });

  it("leaves the queue's length out while Redis does not answer, with one read outstanding", async () => {
    const queue = observingQueue(() => new Promise<AuditQueueCounts>(() => undefined), {
      queueCountsMaxAgeMs: 10,
      queueCountsTimeoutMs: 30,
    });
    const started = Date.now();
    const first = await queue.collect();
    expect(Date.now() - started).toBeLessThan(1000);
    expect(first[METRIC.AUDIT_QUEUE_JOBS]).toEqual([]);
    // The other instruments do not wait for Redis.
    expect(first[METRIC.AUDIT_WORKER_RECORDS]).toHaveLength(6);
    await sleep(20);
    expect((await queue.collect())[METRIC.AUDIT_QUEUE_JOBS]).toEqual([]);
    expect(queue.reads()).toBe(1);
  });

  it("leaves the queue's length out when the read fails, and reads again at the next scrape", async () => {
    const queue = observingQueue(async (read) => {
      if (read === 1) throw new Error('Connection is closed.');
      return counts;
    });
    expect((await queue.collect())[METRIC.AUDIT_QUEUE_JOBS]).toEqual([]);
    expect((await queue.collect())[METRIC.AUDIT_QUEUE_JOBS]).toHaveLength(4);
    expect(queue.reads()).toBe(2);
  });

  it('registers nothing without sources, and never throws from a callback', async () => {
    const empty = collectingMeter();
    registerAuditMetrics(empty.meter, {});
    expect(empty.registered.size).toBe(0);

    const broken = collectingMeter();
    registerAuditMetrics(broken.meter, {
      producer: {
        metrics: () => {
          throw new Error('broken');
        },
      },
    });
    const collected = await broken.collect();
    expect(collected[METRIC.AUDIT_PRODUCER_RECORDS]).toEqual([]);
  });
});
