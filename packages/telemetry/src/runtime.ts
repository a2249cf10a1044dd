/**
 * Node.js runtime and process metrics after the OpenTelemetry semantic conventions
 * (`nodejs.eventloop.*`, `v8js.*`, `process.*`), read from Node's own `perf_hooks`, `v8` and
 * `process` APIs. Nothing runs per request. Almost everything is read when the metrics are
 * collected (a scrape of `/metrics`); between collections only two things run: the
 * event-loop delay histogram (a native libuv timer every `eventLoopDelayResolutionMs`) and a
 * GC `PerformanceObserver` (one callback per batch of collections).
 *
 * Why not `@opentelemetry/instrumentation-runtime-node`: its current release needs Node
 * >= 22.15 and `@opentelemetry/instrumentation` 0.300.x, the last one for Node 20 pulls
 * `@opentelemetry/instrumentation` 0.223 and `@opentelemetry/core` 2.x beside our 0.301/3.1.
 */
import {
  constants,
  type EventLoopUtilization,
  monitorEventLoopDelay,
  PerformanceObserver,
  performance,
} from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import {
  type Attributes,
  type BatchObservableCallback,
  type Meter,
  type Observable,
  ValueType,
} from '@opentelemetry/api';
import { ATTR, RUNTIME_METRIC } from './names.ts';
import type { RuntimeMetricsOptions } from './types.ts';

/**
 * Bucket boundaries of `v8js.gc.duration` in seconds: a scavenge takes well under a
 * millisecond, a full mark-compact of a large heap hundreds; tail latency cares about both.
 */
export const GC_DURATION_BUCKETS_S: readonly number[] = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
];

/** Default sampling interval of the event-loop delay histogram. */
export const DEFAULT_EVENT_LOOP_DELAY_RESOLUTION_MS = 20;

/** Runtime metrics that are being observed. */
export interface RuntimeMetrics {
  /** Stop the event-loop delay timer and the GC observer, and stop observing. Idempotent. */
  stop(): void;
}

// Attribute objects are built once: the GC observer and the collection reuse them.
const GC_TYPE = new Map<number, Attributes>([
  [constants.NODE_PERFORMANCE_GC_MINOR, { [ATTR.V8JS_GC_TYPE]: 'minor' }],
  [constants.NODE_PERFORMANCE_GC_MAJOR, { [ATTR.V8JS_GC_TYPE]: 'major' }],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, { [ATTR.V8JS_GC_TYPE]: 'incremental' }],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, { [ATTR.V8JS_GC_TYPE]: 'weakcb' }],
]);
/** A kind a future Node might add: still counted, under one bounded value. */
const GC_TYPE_OTHER: Attributes = { [ATTR.V8JS_GC_TYPE]: 'other' };
const CPU_USER: Attributes = { [ATTR.CPU_MODE]: 'user' };
const CPU_SYSTEM: Attributes = { [ATTR.CPU_MODE]: 'system' };
const LOOP_ACTIVE: Attributes = { [ATTR.NODEJS_EVENTLOOP_STATE]: 'active' };
const LOOP_IDLE: Attributes = { [ATTR.NODEJS_EVENTLOOP_STATE]: 'idle' };

const NS_PER_S = 1e9;
const MS_PER_S = 1e3;
const US_PER_S = 1e6;

function resolution(value: number | undefined): number {
  // monitorEventLoopDelay throws for anything but an integer >= 1.
  if (value === undefined || !Number.isFinite(value)) return DEFAULT_EVENT_LOOP_DELAY_RESOLUTION_MS;
  return Math.max(1, Math.round(value));
}

/**
 * Observe the Node.js runtime and process metrics of {@link RUNTIME_METRIC} on `meter`.
 * `startTelemetry` calls it; with a no-op meter nothing is recorded and nothing breaks.
 *
 * The event-loop delay gauges and `nodejs.eventloop.utilization` describe the time since the
 * previous collection (the delay histogram is reset at each), so one scraper should read
 * them; the counters (`nodejs.eventloop.time`, `process.cpu.time`, `v8js.gc.duration`) are
 * cumulative and safe for any number.
 */
export function startRuntimeMetrics(
  meter: Meter,
  options: RuntimeMetricsOptions = {},
): RuntimeMetrics {
  const { eventLoopDelayResolutionMs } = options;

  const gauge = (name: string, description: string, unit: string) =>
    meter.createObservableGauge(name, { description, unit, valueType: ValueType.DOUBLE });
  const bytes = (name: string, description: string) =>
    meter.createObservableUpDownCounter(name, {
      description,
      unit: 'By',
      valueType: ValueType.INT,
    });
  const seconds = (name: string, description: string) =>
    meter.createObservableCounter(name, { description, unit: 's', valueType: ValueType.DOUBLE });

  const delayMin = gauge(RUNTIME_METRIC.EVENTLOOP_DELAY_MIN, 'Event loop minimum delay.', 's');
  const delayMax = gauge(RUNTIME_METRIC.EVENTLOOP_DELAY_MAX, 'Event loop maximum delay.', 's');
  const delayMean = gauge(RUNTIME_METRIC.EVENTLOOP_DELAY_MEAN, 'Event loop mean delay.', 's');
  const delayStddev = gauge(
    RUNTIME_METRIC.EVENTLOOP_DELAY_STDDEV,
    'Event loop standard deviation delay.',
    's',
  );
  const delayP50 = gauge(
    RUNTIME_METRIC.EVENTLOOP_DELAY_P50,
    'Event loop 50 percentile delay.',
    's',
  );
  const delayP90 = gauge(
    RUNTIME_METRIC.EVENTLOOP_DELAY_P90,
    'Event loop 90 percentile delay.',
    's',
  );
  const delayP99 = gauge(
    RUNTIME_METRIC.EVENTLOOP_DELAY_P99,
    'Event loop 99 percentile delay.',
    's',
  );
  const utilization = gauge(RUNTIME_METRIC.EVENTLOOP_UTILIZATION, 'Event loop utilization.', '1');
  const loopTime = seconds(
    RUNTIME_METRIC.EVENTLOOP_TIME,
    'Cumulative duration of time the event loop has been in each state.',
  );
  const heapUsed = bytes(RUNTIME_METRIC.HEAP_USED, 'Heap Memory size allocated.');
  const heapSpaceSize = bytes(
    RUNTIME_METRIC.HEAP_SPACE_SIZE,
    'Total heap memory size pre-allocated for a heap space.',
  );
  const rss = bytes(RUNTIME_METRIC.PROCESS_MEMORY_USAGE, 'The amount of physical memory in use.');
  const cpuTime = seconds(
    RUNTIME_METRIC.PROCESS_CPU_TIME,
    'Total CPU seconds broken down by different CPU modes.',
  );
  const uptime = gauge(
    RUNTIME_METRIC.PROCESS_UPTIME,
    'The time the process has been running.',
    's',
  );
  const gcDuration = meter.createHistogram(RUNTIME_METRIC.GC_DURATION, {
    description: 'Garbage collection duration.',
    unit: 's',
    valueType: ValueType.DOUBLE,
    advice: { explicitBucketBoundaries: [...GC_DURATION_BUCKETS_S] },
  });

  const delay = monitorEventLoopDelay({ resolution: resolution(eventLoopDelayResolutionMs) });
  delay.enable();

  const gcObserver = new PerformanceObserver((list) => {
    try {
      for (const entry of list.getEntries()) {
        // Node >= 16 puts the GC kind in `detail`; @types/node 20 does not declare it.
        const kind = (entry as { detail?: { kind?: number } | null }).detail?.kind;
        gcDuration.record(
          entry.duration / MS_PER_S,
          (kind !== undefined && GC_TYPE.get(kind)) || GC_TYPE_OTHER,
        );
      }
    } catch {
      // Telemetry never breaks the process it observes.
    }
  });
  gcObserver.observe({ entryTypes: ['gc'] });

  let lastLoop: EventLoopUtilization = performance.eventLoopUtilization();
  const spaceAttributes = new Map<string, Attributes>();

  const collect: BatchObservableCallback = (result) => {
    try {
      // An empty histogram reports min 2^63 and NaN: observe nothing until it has a sample.
      if (delay.count > 0) {
        result.observe(delayMin, delay.min / NS_PER_S);
        result.observe(delayMax, delay.max / NS_PER_S);
        result.observe(delayMean, delay.mean / NS_PER_S);
        result.observe(delayStddev, delay.stddev / NS_PER_S);
        result.observe(delayP50, delay.percentile(50) / NS_PER_S);
        result.observe(delayP90, delay.percentile(90) / NS_PER_S);
        result.observe(delayP99, delay.percentile(99) / NS_PER_S);
        delay.reset();
      }

      const loop = performance.eventLoopUtilization();
      result.observe(utilization, performance.eventLoopUtilization(loop, lastLoop).utilization);
      lastLoop = loop;
      result.observe(loopTime, loop.active / MS_PER_S, LOOP_ACTIVE);
      result.observe(loopTime, loop.idle / MS_PER_S, LOOP_IDLE);

      for (const space of getHeapSpaceStatistics()) {
        let attributes = spaceAttributes.get(space.space_name);
        if (!attributes) {
          // Bounded: the spaces are fixed by the V8 version.
          attributes = { [ATTR.V8JS_HEAP_SPACE_NAME]: space.space_name };
          spaceAttributes.set(space.space_name, attributes);
        }
        result.observe(heapUsed, space.space_used_size, attributes);
        result.observe(heapSpaceSize, space.space_size, attributes);
      }

      result.observe(rss, process.memoryUsage.rss());
      const cpu = process.cpuUsage();
      result.observe(cpuTime, cpu.user / US_PER_S, CPU_USER);
      result.observe(cpuTime, cpu.system / US_PER_S, CPU_SYSTEM);
      result.observe(uptime, process.uptime());
    } catch {
      // A failed reading leaves these metrics out of this collection; the scrape goes on.
    }
  };
  const observables: Observable[] = [
    delayMin,
    delayMax,
    delayMean,
    delayStddev,
    delayP50,
    delayP90,
    delayP99,
    utilization,
    loopTime,
    heapUsed,
    heapSpaceSize,
    rss,
    cpuTime,
    uptime,
  ];
  meter.addBatchObservableCallback(collect, observables);

  let stopped = false;
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      delay.disable();
      gcObserver.disconnect();
      meter.removeBatchObservableCallback(collect, observables);
    },
  };
}
