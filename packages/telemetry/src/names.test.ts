/** The name table is a contract: dashboards, alerts and other services spell names this way. */
import {
  ATTR_CPU_MODE,
  ATTR_NODEJS_EVENTLOOP_STATE,
  ATTR_V8JS_GC_TYPE,
  ATTR_V8JS_HEAP_SPACE_NAME,
  METRIC_NODEJS_EVENTLOOP_DELAY_MAX,
  METRIC_NODEJS_EVENTLOOP_DELAY_MEAN,
  METRIC_NODEJS_EVENTLOOP_DELAY_MIN,
  METRIC_NODEJS_EVENTLOOP_DELAY_P50,
  METRIC_NODEJS_EVENTLOOP_DELAY_P90,
  METRIC_NODEJS_EVENTLOOP_DELAY_P99,
  METRIC_NODEJS_EVENTLOOP_DELAY_STDDEV,
  METRIC_NODEJS_EVENTLOOP_TIME,
  METRIC_NODEJS_EVENTLOOP_UTILIZATION,
  METRIC_PROCESS_CPU_TIME,
  METRIC_PROCESS_MEMORY_USAGE,
  METRIC_PROCESS_UPTIME,
  METRIC_V8JS_GC_DURATION,
  METRIC_V8JS_MEMORY_HEAP_SPACE_SIZE,
  METRIC_V8JS_MEMORY_HEAP_USED,
} from '@opentelemetry/semantic-conventions/incubating';
import { describe, expect, it } from 'vitest';
import {
  ATTR,
  chainStageSpanName,
  FLEET_NAMES,
  interceptorInvokeSpanName,
  METRIC,
  mcpSpanName,
  QUEUE,
  RUNTIME_METRIC,
  SPAN,
} from './names.ts';

describe('FLEET_NAMES', () => {
  it('holds the names the fleet relies on', () => {
    expect(Object.values(ATTR)).toEqual(
      expect.arrayContaining([
        'mcp.method.name',
        'mcp.tool.name',
        'mcp.prompt.name',
        'mcp.resource.uri',
        'mcp.session.id',
        'fleet.principal.id',
        'fleet.principal.type',
        'fleet.backend.id',
        'fleet.interceptor.name',
        'fleet.interceptor.type',
        'fleet.interceptor.mode',
        'fleet.interceptor.outcome',
        'fleet.interceptor.service',
        'fleet.chain.phase',
        'fleet.chain.event',
        'fleet.chain.status',
        'fleet.chain.stage',
        'fleet.audit.outcome',
        'fleet.audit.reason',
        'fleet.audit.job.state',
        'fleet.pins.drift.kind',
        'fleet.pins.action',
        'fleet.rejection.kind',
        'fleet.refusal.reason',
        'fleet.call.origin',
      ]),
    );
    expect(METRIC).toEqual({
      REQUEST_DURATION: 'fleet.request.duration',
      CHAIN_DURATION: 'fleet.chain.duration',
      INTERCEPTOR_DURATION: 'fleet.interceptor.duration',
      CHAIN_ABORTS: 'fleet.chain.aborts',
      BACKEND_DURATION: 'fleet.backend.duration',
      INGRESS_REJECTIONS: 'fleet.ingress.rejections',
      BACKEND_REFUSALS: 'fleet.backend.refusals',
      AUDIT_PRODUCER_RECORDS: 'fleet.audit.producer.records',
      AUDIT_PRODUCER_BATCHES: 'fleet.audit.producer.batches',
      AUDIT_PRODUCER_PENDING: 'fleet.audit.producer.pending',
      AUDIT_PRODUCER_CONNECTED: 'fleet.audit.producer.connected',
      AUDIT_WORKER_RECORDS: 'fleet.audit.worker.records',
      AUDIT_WORKER_BATCHES: 'fleet.audit.worker.batches',
      AUDIT_WORKER_JOBS: 'fleet.audit.worker.jobs',
      AUDIT_WORKER_PENDING: 'fleet.audit.worker.pending',
      AUDIT_WORKER_STORE_UNAVAILABLE: 'fleet.audit.worker.store_unavailable',
      AUDIT_QUEUE_JOBS: 'fleet.audit.queue.jobs',
      PINS_DRIFT_DETECTIONS: 'fleet.pins.drift.detections',
      PINS_DRIFTED_TOOLS: 'fleet.pins.drifted_tools',
      PINS_PINNED_TOOLS: 'fleet.pins.pinned_tools',
      PINS_UNPINNED: 'fleet.pins.unpinned',
    });
    expect(QUEUE.AUDIT).toBe('fleet-audit');
  });

  it('sections are views of the one table', () => {
    expect(SPAN).toBe(FLEET_NAMES.span);
    expect(ATTR).toBe(FLEET_NAMES.attribute);
    expect(METRIC).toBe(FLEET_NAMES.metric);
    expect(RUNTIME_METRIC).toBe(FLEET_NAMES.runtimeMetric);
    expect(QUEUE).toBe(FLEET_NAMES.queue);
  });

  it('spells attribute and metric names in dotted lower snake case, each once', () => {
    const names = [
      ...Object.values(ATTR),
      ...Object.values(METRIC),
      ...Object.values(RUNTIME_METRIC),
    ];
    for (const name of names) expect(name).toMatch(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/);
    expect(new Set(names).size).toBe(names.length);
    expect(new Set(Object.values(SPAN)).size).toBe(Object.values(SPAN).length);
  });
});

describe('runtime metric names', () => {
  // The incubating entry point is imported here only: names are copied into the table, as
  // the semantic-conventions package advises, and this test catches a rename on upgrade.
  it('are the semantic-convention names, with no deprecated one', () => {
    expect(RUNTIME_METRIC).toEqual({
      EVENTLOOP_DELAY_MIN: METRIC_NODEJS_EVENTLOOP_DELAY_MIN,
      EVENTLOOP_DELAY_MAX: METRIC_NODEJS_EVENTLOOP_DELAY_MAX,
      EVENTLOOP_DELAY_MEAN: METRIC_NODEJS_EVENTLOOP_DELAY_MEAN,
      EVENTLOOP_DELAY_STDDEV: METRIC_NODEJS_EVENTLOOP_DELAY_STDDEV,
      EVENTLOOP_DELAY_P50: METRIC_NODEJS_EVENTLOOP_DELAY_P50,
      EVENTLOOP_DELAY_P90: METRIC_NODEJS_EVENTLOOP_DELAY_P90,
      EVENTLOOP_DELAY_P99: METRIC_NODEJS_EVENTLOOP_DELAY_P99,
      EVENTLOOP_UTILIZATION: METRIC_NODEJS_EVENTLOOP_UTILIZATION,
      EVENTLOOP_TIME: METRIC_NODEJS_EVENTLOOP_TIME,
      GC_DURATION: METRIC_V8JS_GC_DURATION,
      HEAP_USED: METRIC_V8JS_MEMORY_HEAP_USED,
      HEAP_SPACE_SIZE: METRIC_V8JS_MEMORY_HEAP_SPACE_SIZE,
      PROCESS_MEMORY_USAGE: METRIC_PROCESS_MEMORY_USAGE,
      PROCESS_CPU_TIME: METRIC_PROCESS_CPU_TIME,
      PROCESS_UPTIME: METRIC_PROCESS_UPTIME,
    });
    expect(ATTR.V8JS_GC_TYPE).toBe(ATTR_V8JS_GC_TYPE);
    expect(ATTR.V8JS_HEAP_SPACE_NAME).toBe(ATTR_V8JS_HEAP_SPACE_NAME);
    expect(ATTR.CPU_MODE).toBe(ATTR_CPU_MODE);
    expect(ATTR.NODEJS_EVENTLOOP_STATE).toBe(ATTR_NODEJS_EVENTLOOP_STATE);
  });
});

describe('span names', () => {
  it.each([
    ['tools/call', 'get_weather', 'tools/call get_weather'],
    ['resources/read', 'file:///a.txt', 'resources/read file:///a.txt'],
    ['tools/list', undefined, 'tools/list'],
  ])('mcpSpanName(%s, %s) = %s', (method, target, expected) => {
    expect(mcpSpanName(method, target)).toBe(expected);
  });

  it('names a chain stage by phase and stage', () => {
    expect(chainStageSpanName('request', 'validators')).toBe('fleet.chain request validators');
    expect(chainStageSpanName('response', 'mutators')).toBe('fleet.chain response mutators');
  });

  it('names an invocation like the interceptor-kit server span', () => {
    expect(interceptorInvokeSpanName('pii-redactor')).toBe('interceptor/invoke pii-redactor');
  });

  // Only prefixes of spans some process creates: the orchestrator (chain stages, invocations),
  // the interceptor-kit (invocations) and the audit worker (`process {queue}`). Nothing creates
  // a span for `interceptors/list` or for enqueueing an audit record.
  it('holds exactly the span name prefixes the fleet uses', () => {
    expect(SPAN).toEqual({
      CHAIN_STAGE: 'fleet.chain',
      INTERCEPTOR_INVOKE: 'interceptor/invoke',
      AUDIT_PROCESS: 'process',
    });
    expect(`${SPAN.AUDIT_PROCESS} ${QUEUE.AUDIT}`).toBe('process fleet-audit');
  });
});
