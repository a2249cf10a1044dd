/**
 * Tool pinning on a meter, so an operator can alert on a rug pull and on a full pin store:
 * counters of the drifts this process recorded and of the tools the full store could not pin
 * (by bounded labels only: never the tool name, which backends choose), and gauges of the pins
 * and drifts in the shared store, read from Redis when the meter is collected (a `/metrics`
 * scrape). Names from @fleet/telemetry's table. A collection or a recording never fails
 * because of them.
 */
import { ATTR, METRIC, type Telemetry } from '@fleet/telemetry';
import type { DriftKind, PinCounts, UnpinnedAction } from './pinning.ts';

/** The part of an OpenTelemetry `Meter` that {@link registerPinMetrics} uses. */
export type PinMetricsMeter = Pick<
  Telemetry['meter'],
  'createCounter' | 'createObservableGauge' | 'addBatchObservableCallback'
>;

/** Where the gauges read from. */
export interface PinMetricSources {
  /** The store's pin and drift counts (two `HLEN`s); may throw when Redis is away. */
  counts: () => Promise<PinCounts>;
  /** Whether the policy in force pins; when it does not, the gauges read nothing and are absent. */
  enabled: () => boolean;
}

/** Options of {@link registerPinMetrics}. */
export interface PinMetricsOptions {
  /**
   * Longest a collection waits for the store's counts; past it (Redis away or slow) the gauges
   * are left out of that collection. Default {@link DEFAULT_PIN_COUNTS_TIMEOUT_MS}.
   */
  countsTimeoutMs?: number;
}

/** Default of {@link PinMetricsOptions.countsTimeoutMs}. */
export const DEFAULT_PIN_COUNTS_TIMEOUT_MS = 1000;

/** What the service records as it pins. Never throws. */
export interface PinMetrics {
  /** `fleet.pins.drift.detections` += 1, by kind. */
  countDrift(kind: DriftKind): void;
  /** `fleet.pins.unpinned` += `tools`, by what became of them. */
  countUnpinned(tools: number, action: UnpinnedAction): void;
}

/** Records nothing: a service built without a meter. */
export const NO_PIN_METRICS: PinMetrics = { countDrift() {}, countUnpinned() {} };

/** `promise`'s value, or `undefined` when it fails or takes longer than `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise.catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Run a recording; telemetry never breaks the list or call being pinned. */
function guarded(record: () => void): void {
  try {
    record();
  } catch {
    // A broken meter must not fail the request.
  }
}

/**
 * Register the pinning instruments on `meter` (once per process: the names are the
 * process's). The gauges cost one `MULTI HLEN HLEN` per collection, and only while pinning is
 * on; both hashes are bounded (`maxTools`), and `HLEN` is O(1) whatever their size.
 */
export function registerPinMetrics(
  meter: PinMetricsMeter,
  sources: PinMetricSources,
  options: PinMetricsOptions = {},
): PinMetrics {
  const { countsTimeoutMs = DEFAULT_PIN_COUNTS_TIMEOUT_MS } = options;
  const drifts = meter.createCounter(METRIC.PINS_DRIFT_DETECTIONS, {
    description:
      'Tool drifts recorded: a listed tool whose definition differs from its pin (new) or from its drift (changed)',
    unit: '{drift}',
  });
  const unpinned = meter.createCounter(METRIC.PINS_UNPINNED, {
    description: 'Never-seen tools the full pin store could not pin, each time listed or called',
    unit: '{tool}',
  });
  const drifted = meter.createObservableGauge(METRIC.PINS_DRIFTED_TOOLS, {
    description: 'Tools with an unapproved drift (hidden and refused) in the shared pin store',
    unit: '{tool}',
  });
  const pinned = meter.createObservableGauge(METRIC.PINS_PINNED_TOOLS, {
    description: 'Tools pinned in the shared pin store',
    unit: '{tool}',
  });
  meter.addBatchObservableCallback(
    async (result) => {
      try {
        if (!sources.enabled()) return;
        const counts = await within(sources.counts(), countsTimeoutMs);
        if (counts === undefined) return;
        result.observe(drifted, counts.drifted);
        result.observe(pinned, counts.pinned);
      } catch {
        // A broken source leaves the gauges out of this collection, nothing more.
      }
    },
    [drifted, pinned],
  );
  return {
    countDrift: (kind) => guarded(() => drifts.add(1, { [ATTR.FLEET_PINS_DRIFT_KIND]: kind })),
    countUnpinned: (tools, action) =>
      guarded(() => unpinned.add(tools, { [ATTR.FLEET_PINS_ACTION]: action })),
  };
}
