/** The fleet's instruments, collected through a real SDK meter provider. */
import { createNoopMeter, type Meter } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import {
  DataPointType,
  type HistogramMetricData,
  MeterProvider,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { afterEach, describe, expect, it } from 'vitest';
import { createFleetMetrics, DURATION_BUCKETS_MS } from './metrics.ts';
import { METRIC } from './names.ts';

let provider: MeterProvider | undefined;
afterEach(async () => {
  await provider?.shutdown();
  provider = undefined;
});

function setup() {
  const reader = new PrometheusExporter({ preventServerStart: true });
  provider = new MeterProvider({ readers: [reader] });
  const fleet = createFleetMetrics(provider.getMeter('metrics-test'));
  const collect = async (): Promise<Map<string, MetricData>> => {
    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).toEqual([]);
    const byName = new Map<string, MetricData>();
    for (const scope of resourceMetrics.scopeMetrics)
      for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric);
    return byName;
  };
  return { fleet, collect };
}

describe('createFleetMetrics', () => {
  it('records every histogram in ms with the fleet buckets and table attribute names', async () => {
    const { fleet, collect } = setup();
    fleet.recordRequest(3, { method: 'tools/call', status: 'error', errorType: 'TIMEOUT' });
    fleet.recordChain(0.7, { event: 'tools/call', phase: 'request', status: 'success' });
    fleet.recordInterceptor(0.2, {
      interceptor: 'pii-redactor',
      outcome: 'modified',
      service: 'svc-1',
      type: 'mutation',
      mode: 'active',
      phase: 'response',
    });
    fleet.recordBackend(120, { backend: 'everything', method: 'tools/call', status: 'ok' });

    const metrics = await collect();
    const expected: Record<string, Record<string, string>> = {
      [METRIC.REQUEST_DURATION]: {
        'mcp.method.name': 'tools/call',
        'fleet.request.status': 'error',
        'error.type': 'TIMEOUT',
      },
      [METRIC.CHAIN_DURATION]: {
        'fleet.chain.event': 'tools/call',
        'fleet.chain.phase': 'request',
        'fleet.chain.status': 'success',
      },
      [METRIC.INTERCEPTOR_DURATION]: {
        'fleet.interceptor.name': 'pii-redactor',
        'fleet.interceptor.outcome': 'modified',
        'fleet.interceptor.service': 'svc-1',
        'fleet.interceptor.type': 'mutation',
        'fleet.interceptor.mode': 'active',
        'fleet.chain.phase': 'response',
      },
      [METRIC.BACKEND_DURATION]: {
        'fleet.backend.id': 'everything',
        'mcp.method.name': 'tools/call',
        'fleet.request.status': 'ok',
      },
    };
    for (const [name, attributes] of Object.entries(expected)) {
      const metric = metrics.get(name) as HistogramMetricData | undefined;
      expect(metric?.dataPointType, name).toBe(DataPointType.HISTOGRAM);
      expect(metric?.descriptor.unit).toBe('ms');
      const [point] = metric?.dataPoints ?? [];
      expect(point?.attributes).toEqual(attributes);
      expect(point?.value.buckets.boundaries).toEqual(DURATION_BUCKETS_MS);
      expect(point?.value.count).toBe(1);
    }
  });

  it('counts aborts, leaving out attributes that were not given', async () => {
    const { fleet, collect } = setup();
    fleet.countAbort({ type: 'timeout', phase: 'request' });
    fleet.countAbort({ type: 'timeout', phase: 'request' });
    const metrics = await collect();
    const aborts = metrics.get(METRIC.CHAIN_ABORTS);
    expect(aborts?.dataPointType).toBe(DataPointType.SUM);
    expect(aborts?.dataPoints).toEqual([
      expect.objectContaining({
        attributes: { 'fleet.chain.abort.type': 'timeout', 'fleet.chain.phase': 'request' },
        value: 2,
      }),
    ]);
  });

  it('counts backend refusals by backend id, reason and origin', async () => {
    const { fleet, collect } = setup();
    fleet.countBackendRefusal('fx', 'overloaded', 'client');
    fleet.countBackendRefusal('fx', 'overloaded', 'client');
    fleet.countBackendRefusal('fx', 'circuit_open', 'client');
    fleet.countBackendRefusal('fx', 'circuit_open', 'gateway');
    const refusals = (await collect()).get(METRIC.BACKEND_REFUSALS);
    expect(refusals?.dataPointType).toBe(DataPointType.SUM);
    expect(refusals?.descriptor.unit).toBe('{call}');
    expect(refusals?.dataPoints).toEqual([
      expect.objectContaining({
        attributes: {
          'fleet.backend.id': 'fx',
          'fleet.refusal.reason': 'overloaded',
          'fleet.call.origin': 'client',
        },
        value: 2,
      }),
      expect.objectContaining({
        attributes: {
          'fleet.backend.id': 'fx',
          'fleet.refusal.reason': 'circuit_open',
          'fleet.call.origin': 'client',
        },
        value: 1,
      }),
      expect.objectContaining({
        attributes: {
          'fleet.backend.id': 'fx',
          'fleet.refusal.reason': 'circuit_open',
          'fleet.call.origin': 'gateway',
        },
        value: 1,
      }),
    ]);
  });

  it('buckets resolve sub-millisecond to 30 s latencies', () => {
    expect(DURATION_BUCKETS_MS[0]).toBeLessThan(1);
    expect(DURATION_BUCKETS_MS.at(-1)).toBe(30000);
    expect([...DURATION_BUCKETS_MS].sort((a, b) => a - b)).toEqual(DURATION_BUCKETS_MS);
  });

  it('never throws when the underlying instruments do', () => {
    const noop = createNoopMeter();
    const fail = () => {
      throw new Error('meter broke');
    };
    // A meter whose instruments fail on every call.
    const broken: Meter = {
      ...noop,
      createHistogram: () => ({ record: fail }),
      createCounter: () => ({ add: fail }),
    };
    const fleet = createFleetMetrics(broken);
    expect(() => {
      fleet.recordRequest(1, { method: 'm', status: 'ok' });
      fleet.recordChain(1, { event: 'e', phase: 'request', status: 'success' });
      fleet.recordInterceptor(1, { interceptor: 'i', outcome: 'allowed' });
      fleet.countAbort({ type: 'validation' });
      fleet.recordBackend(1, { backend: 'b', method: 'm', status: 'ok' });
      fleet.countBackendRefusal('b', 'overloaded', 'client');
    }).not.toThrow();
  });

  it('is a harmless no-op on the bare API meter', () => {
    const fleet = createFleetMetrics(createNoopMeter());
    expect(() => fleet.recordRequest(1, { method: 'm', status: 'ok' })).not.toThrow();
  });
});
