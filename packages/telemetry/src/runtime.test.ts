/**
 * Runtime metrics collected through a real SDK meter provider and Prometheus reader, from the
 * real perf_hooks, v8 and process APIs: a real 200 ms block, a real forced GC.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createNoopMeter } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import {
  DataPointType,
  type HistogramMetricData,
  MeterProvider,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { afterEach, describe, expect, it } from 'vitest';
import { ATTR, RUNTIME_METRIC } from './names.ts';
import { GC_DURATION_BUCKETS_S, type RuntimeMetrics, startRuntimeMetrics } from './runtime.ts';
import type { RuntimeMetricsOptions } from './types.ts';

// A full, synchronous GC without starting the worker with --expose-gc.
setFlagsFromString('--expose-gc');
const forceGc = runInNewContext('gc') as () => void;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

function setup(options?: RuntimeMetricsOptions) {
  const reader = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({ readers: [reader] });
  const runtime = startRuntimeMetrics(provider.getMeter('runtime-test'), options);
  cleanups.push(() => provider.shutdown());
  cleanups.push(() => runtime.stop());
  const collect = async (): Promise<Map<string, MetricData>> => {
    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).toEqual([]);
    const byName = new Map<string, MetricData>();
    for (const scope of resourceMetrics.scopeMetrics)
      for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric);
    return byName;
  };
  return { runtime, collect };
}

/** The value of a gauge or sum point, the first one matching `attributes`. */
function value(
  metrics: Map<string, MetricData>,
  name: string,
  attributes: Record<string, string> = {},
): number | undefined {
  const metric = metrics.get(name);
  if (!metric || metric.dataPointType === DataPointType.HISTOGRAM) return undefined;
  const point = metric.dataPoints.find((p) =>
    Object.entries(attributes).every(([k, v]) => p.attributes[k] === v),
  );
  return point?.value as number | undefined;
}

function heapUsedTotal(metrics: Map<string, MetricData>): number {
  const metric = metrics.get(RUNTIME_METRIC.HEAP_USED);
  if (!metric || metric.dataPointType === DataPointType.HISTOGRAM) return 0;
  return metric.dataPoints.reduce((sum, p) => sum + (p.value as number), 0);
}

function gcCount(metrics: Map<string, MetricData>, type: string): number {
  const metric = metrics.get(RUNTIME_METRIC.GC_DURATION) as HistogramMetricData | undefined;
  const point = metric?.dataPoints.find((p) => p.attributes[ATTR.V8JS_GC_TYPE] === type);
  return point?.value.count ?? 0;
}

function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // Busy-wait: the event loop cannot turn.
  }
}

describe('startRuntimeMetrics', () => {
  it('observes heap, RSS, CPU time, uptime and the event loop with plausible values', async () => {
    const { collect } = setup();
    await sleep(100);
    const metrics = await collect();

    const used = heapUsedTotal(metrics);
    expect(used).toBeGreaterThan(0);
    expect(
      value(metrics, RUNTIME_METRIC.HEAP_USED, { [ATTR.V8JS_HEAP_SPACE_NAME]: 'old_space' }),
    ).toBeGreaterThan(0);
    expect(
      value(metrics, RUNTIME_METRIC.HEAP_SPACE_SIZE, { [ATTR.V8JS_HEAP_SPACE_NAME]: 'old_space' }),
    ).toBeGreaterThanOrEqual(
      value(metrics, RUNTIME_METRIC.HEAP_USED, { [ATTR.V8JS_HEAP_SPACE_NAME]: 'old_space' }) ?? 0,
    );
    expect(value(metrics, RUNTIME_METRIC.PROCESS_MEMORY_USAGE)).toBeGreaterThan(used);
    expect(
      value(metrics, RUNTIME_METRIC.PROCESS_CPU_TIME, { [ATTR.CPU_MODE]: 'user' }),
    ).toBeGreaterThan(0);
    expect(
      value(metrics, RUNTIME_METRIC.PROCESS_CPU_TIME, { [ATTR.CPU_MODE]: 'system' }),
    ).toBeGreaterThanOrEqual(0);
    expect(value(metrics, RUNTIME_METRIC.PROCESS_UPTIME)).toBeGreaterThan(0);
    const utilization = value(metrics, RUNTIME_METRIC.EVENTLOOP_UTILIZATION) ?? -1;
    expect(utilization).toBeGreaterThanOrEqual(0);
    expect(utilization).toBeLessThanOrEqual(1);
    expect(
      value(metrics, RUNTIME_METRIC.EVENTLOOP_TIME, { [ATTR.NODEJS_EVENTLOOP_STATE]: 'active' }),
    ).toBeGreaterThan(0);
    expect(
      value(metrics, RUNTIME_METRIC.EVENTLOOP_TIME, { [ATTR.NODEJS_EVENTLOOP_STATE]: 'idle' }),
    ).toBeGreaterThan(0);
    // About five samples at 20 ms: each at least the interval, in seconds, ordered.
    const delay = (name: string) => value(metrics, name) ?? Number.NaN;
    expect(delay(RUNTIME_METRIC.EVENTLOOP_DELAY_MIN)).toBeGreaterThan(0.01);
    expect(delay(RUNTIME_METRIC.EVENTLOOP_DELAY_MIN)).toBeLessThanOrEqual(
      delay(RUNTIME_METRIC.EVENTLOOP_DELAY_P50),
    );
    expect(delay(RUNTIME_METRIC.EVENTLOOP_DELAY_P50)).toBeLessThanOrEqual(
      delay(RUNTIME_METRIC.EVENTLOOP_DELAY_P99),
    );
    expect(delay(RUNTIME_METRIC.EVENTLOOP_DELAY_P99)).toBeLessThanOrEqual(
      delay(RUNTIME_METRIC.EVENTLOOP_DELAY_MAX),
    );
    expect(delay(RUNTIME_METRIC.EVENTLOOP_DELAY_MEAN)).toBeGreaterThan(0);
    expect(delay(RUNTIME_METRIC.EVENTLOOP_DELAY_STDDEV)).toBeGreaterThanOrEqual(0);
  });

  it('uses the semantic-convention units and instrument kinds', async () => {
    const { collect } = setup();
    await sleep(50);
    forceGc();
    await sleep(20);
    const metrics = await collect();
    const shape = (name: string) => {
      const metric = metrics.get(name);
      return metric && { unit: metric.descriptor.unit, type: metric.dataPointType };
    };
    const { GAUGE, SUM, HISTOGRAM } = DataPointType;
    for (const name of [
      RUNTIME_METRIC.EVENTLOOP_DELAY_MIN,
      RUNTIME_METRIC.EVENTLOOP_DELAY_MAX,
      RUNTIME_METRIC.EVENTLOOP_DELAY_MEAN,
      RUNTIME_METRIC.EVENTLOOP_DELAY_STDDEV,
      RUNTIME_METRIC.EVENTLOOP_DELAY_P50,
      RUNTIME_METRIC.EVENTLOOP_DELAY_P90,
      RUNTIME_METRIC.EVENTLOOP_DELAY_P99,
      RUNTIME_METRIC.PROCESS_UPTIME,
    ])
      expect(shape(name), name).toEqual({ unit: 's', type: GAUGE });
    expect(shape(RUNTIME_METRIC.EVENTLOOP_UTILIZATION)).toEqual({ unit: '1', type: GAUGE });
    expect(shape(RUNTIME_METRIC.EVENTLOOP_TIME)).toEqual({ unit: 's', type: SUM });
    expect(shape(RUNTIME_METRIC.PROCESS_CPU_TIME)).toEqual({ unit: 's', type: SUM });
    expect(metrics.get(RUNTIME_METRIC.PROCESS_CPU_TIME)).toMatchObject({ isMonotonic: true });
    for (const name of [
      RUNTIME_METRIC.HEAP_USED,
      RUNTIME_METRIC.HEAP_SPACE_SIZE,
      RUNTIME_METRIC.PROCESS_MEMORY_USAGE,
    ]) {
      expect(shape(name), name).toEqual({ unit: 'By', type: SUM });
      expect(metrics.get(name), name).toMatchObject({ isMonotonic: false });
    }
    expect(shape(RUNTIME_METRIC.GC_DURATION)).toEqual({ unit: 's', type: HISTOGRAM });
    const gc = metrics.get(RUNTIME_METRIC.GC_DURATION) as HistogramMetricData;
    expect(gc.dataPoints[0]?.value.buckets.boundaries).toEqual(GC_DURATION_BUCKETS_S);
  });

  it('event-loop delay shows a 200 ms block, and only until the next collection', async () => {
    const { collect } = setup();
    await sleep(100);
    await collect(); // starts a new window
    await sleep(60);
    block(200);
    await sleep(60);
    const blocked = await collect();
    expect(value(blocked, RUNTIME_METRIC.EVENTLOOP_DELAY_MAX)).toBeGreaterThanOrEqual(0.2);
    expect(value(blocked, RUNTIME_METRIC.EVENTLOOP_DELAY_P99)).toBeGreaterThanOrEqual(0.2);
    expect(value(blocked, RUNTIME_METRIC.EVENTLOOP_UTILIZATION)).toBeGreaterThan(0.4);

    await sleep(150);
    const quiet = await collect();
    expect(value(quiet, RUNTIME_METRIC.EVENTLOOP_DELAY_MAX)).toBeLessThan(0.2);
    expect(value(quiet, RUNTIME_METRIC.EVENTLOOP_UTILIZATION)).toBeLessThan(
      value(blocked, RUNTIME_METRIC.EVENTLOOP_UTILIZATION) ?? 0,
    );
  });

  it('records a forced GC in v8js.gc.duration as major, in seconds', async () => {
    const { collect } = setup();
    const before = gcCount(await collect(), 'major');
    forceGc();
    let metrics = await collect();
    // GC entries reach the observer asynchronously.
    for (let i = 0; i < 50 && gcCount(metrics, 'major') === before; i++) {
      await sleep(10);
      metrics = await collect();
    }
    expect(gcCount(metrics, 'major')).toBeGreaterThan(before);
    const gc = metrics.get(RUNTIME_METRIC.GC_DURATION) as HistogramMetricData;
    const major = gc.dataPoints.find((p) => p.attributes[ATTR.V8JS_GC_TYPE] === 'major');
    expect(major?.value.sum).toBeGreaterThan(0);
    expect(major?.value.sum).toBeLessThan(10);
    for (const point of gc.dataPoints) {
      expect(Object.keys(point.attributes)).toEqual([ATTR.V8JS_GC_TYPE]);
      expect(['minor', 'major', 'incremental', 'weakcb']).toContain(
        point.attributes[ATTR.V8JS_GC_TYPE],
      );
    }
  });

  it('stop() ends observation and GC recording; it is idempotent', async () => {
    const { runtime, collect } = setup();
    await sleep(30);
    forceGc();
    await sleep(30);
    const before = await collect();
    expect(before.has(RUNTIME_METRIC.PROCESS_MEMORY_USAGE)).toBe(true);
    const majorBefore = gcCount(before, 'major');
    expect(majorBefore).toBeGreaterThan(0);

    runtime.stop();
    runtime.stop();
    const uptimeBefore = value(before, RUNTIME_METRIC.PROCESS_UPTIME) ?? 0;
    forceGc();
    await sleep(50);
    const after = await collect();
    expect(gcCount(after, 'major')).toBe(majorBefore);
    // Observable callbacks no longer run: nothing newer than the last observation.
    expect(value(after, RUNTIME_METRIC.PROCESS_UPTIME) ?? uptimeBefore).toBe(uptimeBefore);
  });

  it('keeps label sets bounded: one per heap space, GC type, CPU mode and loop state', async () => {
    const { collect } = setup();
    await sleep(30);
    forceGc();
    await sleep(30);
    const metrics = await collect();
    for (const [name, metric] of metrics) {
      const keys = new Set(metric.dataPoints.flatMap((p) => Object.keys(p.attributes)));
      expect(keys.size, name).toBeLessThanOrEqual(1);
      expect(metric.dataPoints.length, name).toBeLessThanOrEqual(16);
    }
  });

  it('with a no-op meter (metrics disabled) starts, records nothing and stops', () => {
    const runtime: RuntimeMetrics = startRuntimeMetrics(createNoopMeter());
    forceGc();
    runtime.stop();
    runtime.stop();
  });

  it.each([0, -5, 2.4, Number.NaN, Number.POSITIVE_INFINITY])(
    'accepts an unusable resolution (%s) by falling back to a valid one',
    async (eventLoopDelayResolutionMs) => {
      const { collect } = setup({ eventLoopDelayResolutionMs });
      await sleep(60);
      expect(value(await collect(), RUNTIME_METRIC.EVENTLOOP_DELAY_MAX)).toBeGreaterThan(0);
    },
  );
});
