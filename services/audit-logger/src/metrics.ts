/**
 * The audit pipeline's metrics, observed from the producer's and the worker's counters at
 * scrape time (cumulative counters and gauges on the service's meter). Names in one table;
 * the attribute is `fleet.audit.outcome` from @fleet/telemetry's table.
 */
import type { AuditProducer, AuditWorker } from '@fleet/audit';
import { ATTR, type Telemetry } from '@fleet/telemetry';

type Meter = Telemetry['meter'];

/** Metric names of the audit pipeline (Prometheus adds `_total` to counters). */
export const AUDIT_METRIC = {
  /** Counter: records by what the producer did (`enqueued` `sent` `journaled` `replayed` `dropped` `rejected`). */
  PRODUCER_RECORDS: 'fleet.audit.producer.records',
  /** Gauge: records waiting in the producer (`memory`, `journal`). */
  PRODUCER_PENDING: 'fleet.audit.producer.pending',
  /** Counter: records by what the worker did (`processed` `inserted` `duplicate` `malformed` `scrub_failed`). */
  WORKER_RECORDS: 'fleet.audit.worker.records',
  /** Counter: insert batches (`committed`, `failed`). */
  WORKER_BATCHES: 'fleet.audit.worker.batches',
  /** Gauge: records the worker holds (batched or being inserted). */
  WORKER_PENDING: 'fleet.audit.worker.pending',
  /** Gauge: 1 while the worker holds records because the store does not answer, else 0. */
  WORKER_STORE_UNAVAILABLE: 'fleet.audit.worker.store_unavailable',
} as const;

/** What to observe; either may be absent (no worker in process, no producer in the worker). */
export interface AuditMetricSources {
  producer?: Pick<AuditProducer, 'metrics'> | undefined;
  worker?: Pick<AuditWorker, 'metrics'> | undefined;
}

/** Register the observable instruments on `meter`. Observation never throws. */
export function registerAuditMetrics(meter: Meter, sources: AuditMetricSources): void {
  const outcome = (value: string) => ({ [ATTR.FLEET_AUDIT_OUTCOME]: value });
  const { producer, worker } = sources;
  if (producer) {
    meter
      .createObservableCounter(AUDIT_METRIC.PRODUCER_RECORDS, {
        description: 'Audit records handled by this process’s producer',
      })
      .addCallback((result) => {
        const m = producer.metrics();
        result.observe(m.enqueued, outcome('enqueued'));
        result.observe(m.sent, outcome('sent'));
        result.observe(m.journaled, outcome('journaled'));
        result.observe(m.replayed, outcome('replayed'));
        result.observe(m.dropped, outcome('dropped'));
        result.observe(m.rejected, outcome('rejected'));
      });
    meter
      .createObservableGauge(AUDIT_METRIC.PRODUCER_PENDING, {
        description: 'Audit records waiting in the producer for Redis',
      })
      .addCallback((result) => {
        const m = producer.metrics();
        result.observe(m.buffered, { state: 'memory' });
        result.observe(m.journalPending, { state: 'journal' });
      });
  }
  if (worker) {
    meter
      .createObservableCounter(AUDIT_METRIC.WORKER_RECORDS, {
        description: 'Audit jobs handled by this process’s worker',
      })
      .addCallback((result) => {
        const m = worker.metrics();
        result.observe(m.processed, outcome('processed'));
        result.observe(m.inserted, outcome('inserted'));
        result.observe(m.duplicates, outcome('duplicate'));
        result.observe(m.malformed, outcome('malformed'));
        result.observe(m.scrubFailures, outcome('scrub_failed'));
      });
    meter
      .createObservableCounter(AUDIT_METRIC.WORKER_BATCHES, {
        description: 'Audit insert batches',
      })
      .addCallback((result) => {
        const m = worker.metrics();
        result.observe(m.batches, outcome('committed'));
        result.observe(m.failedBatches, outcome('failed'));
      });
    meter
      .createObservableGauge(AUDIT_METRIC.WORKER_PENDING, {
        description: 'Audit records batched or being inserted',
      })
      .addCallback((result) => result.observe(worker.metrics().pending));
    meter
      .createObservableGauge(AUDIT_METRIC.WORKER_STORE_UNAVAILABLE, {
        description: 'Audit store unavailable: records held until it answers (1) or not (0)',
      })
      .addCallback((result) => result.observe(worker.metrics().storeUnavailable ? 1 : 0));
  }
}
