/**
 * startTelemetry against real collaborators: spans go to the in-test OTLP receiver over
 * HTTP, metrics are fetched from a real node HTTP server, trace context propagates with
 * export switched off, and shutdown stays bounded when no collector answers.
 */
import { execFile } from 'node:child_process';
import { createServer, get, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { context, diag, metrics, propagation, SpanKind, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { ATTR, chainStageSpanName, METRIC, RUNTIME_METRIC } from './names.ts';
import { extractTraceContext, injectTraceHeaders } from './propagation.ts';
import { currentTraceIds, withSpan } from './spans.ts';
import { DEFAULT_OTLP_TRACES_URL, startTelemetry, telemetryOptionsFromEnv } from './telemetry.ts';
import { type OtlpReceiver, startOtlpReceiver } from './testing/index.ts';
import type { Telemetry, TelemetryLogger, TelemetryOptions } from './types.ts';

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
  // Belt and braces: whatever a test registered globally is gone before the next one.
  trace.disable();
  context.disable();
  propagation.disable();
  metrics.disable();
  diag.disable();
});

/** A logger that keeps what telemetry reports about itself. */
function recordingLogger(): TelemetryLogger & { messages: string[] } {
  const messages: string[] = [];
  return { messages, warn: (_details, message) => messages.push(message) };
}

function start(options: TelemetryOptions): Telemetry {
  const telemetry = startTelemetry(options);
  cleanups.push(() => telemetry.shutdown());
  return telemetry;
}

async function receiver(): Promise<OtlpReceiver> {
  const started = await startOtlpReceiver();
  cleanups.push(() => started.close());
  return started;
}

async function serve(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('telemetryOptionsFromEnv', () => {
  const cases: Array<{
    name: string;
    env: Record<string, string | undefined>;
    expected: TelemetryOptions;
  }> = [
    {
      name: 'nothing set: no export, unknown service',
      env: {},
      expected: { serviceName: 'unknown_service:node', traces: { exporters: [] } },
    },
    {
      name: 'OTEL_NODE_DISABLED_INSTRUMENTATIONS naming runtime-node turns runtime metrics off',
      env: { OTEL_NODE_DISABLED_INSTRUMENTATIONS: 'fs, runtime-node' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: [] },
        runtimeMetrics: false,
      },
    },
    {
      name: 'other disabled instrumentations leave runtime metrics on',
      env: { OTEL_NODE_DISABLED_INSTRUMENTATIONS: 'fs,dns' },
      expected: { serviceName: 'unknown_service:node', traces: { exporters: [] } },
    },
    {
      name: 'empty values count as unset',
      env: { OTEL_SERVICE_NAME: '', OTEL_EXPORTER_OTLP_ENDPOINT: ' ', OTEL_TRACES_EXPORTER: '' },
      expected: { serviceName: 'unknown_service:node', traces: { exporters: [] } },
    },
    {
      name: 'a base endpoint turns OTLP export on and gets /v1/traces appended',
      env: { OTEL_SERVICE_NAME: 'orchestrator', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318' },
      expected: {
        serviceName: 'orchestrator',
        traces: { exporters: ['otlp'], endpoint: 'http://otel:4318/v1/traces' },
      },
    },
    {
      name: 'a base endpoint with a path and trailing slash',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318/prefix/' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: ['otlp'], endpoint: 'http://otel:4318/prefix/v1/traces' },
      },
    },
    {
      name: 'the traces endpoint wins over the base one and is used as is',
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:9999/custom',
      },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: ['otlp'], endpoint: 'http://traces:9999/custom' },
      },
    },
    {
      name: 'OTEL_TRACES_EXPORTER=none stops export even with an endpoint',
      env: { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318' },
      expected: { serviceName: 'unknown_service:node', traces: { exporters: [] } },
    },
    {
      name: 'OTEL_SDK_DISABLED=true stops export',
      env: { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318' },
      expected: { serviceName: 'unknown_service:node', traces: { exporters: [] } },
    },
    {
      name: 'an explicit otlp exporter without endpoint uses the spec default',
      env: { OTEL_TRACES_EXPORTER: 'otlp' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: ['otlp'], endpoint: DEFAULT_OTLP_TRACES_URL },
      },
    },
    {
      name: 'an exporter list is deduplicated, unknown names are reported',
      env: { OTEL_TRACES_EXPORTER: 'console, OTLP,console,jaeger' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: ['console', 'otlp'], endpoint: DEFAULT_OTLP_TRACES_URL },
        warnings: ['OTEL_TRACES_EXPORTER: unsupported exporter "jaeger" ignored'],
      },
    },
    {
      name: 'OTEL_SERVICE_NAME wins over the resource attribute; version and the rest are kept',
      env: {
        OTEL_SERVICE_NAME: 'pii-redactor',
        OTEL_RESOURCE_ATTRIBUTES:
          'service.name=ignored,service.version=1.2.3,deployment.environment.name=prod,team=a%20b',
      },
      expected: {
        serviceName: 'pii-redactor',
        serviceVersion: '1.2.3',
        resourceAttributes: { 'deployment.environment.name': 'prod', team: 'a b' },
        traces: { exporters: [] },
      },
    },
    {
      name: 'service.name from the resource attributes when OTEL_SERVICE_NAME is unset',
      env: { OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attrs' },
      expected: { serviceName: 'from-attrs', traces: { exporters: [] } },
    },
    {
      name: 'headers: general then traces-specific, percent-decoded',
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-a=1,authorization=Bearer%20one',
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'authorization=Bearer%20two',
      },
      expected: {
        serviceName: 'unknown_service:node',
        traces: {
          exporters: ['otlp'],
          endpoint: 'http://otel:4318/v1/traces',
          headers: { 'x-a': '1', authorization: 'Bearer two' },
        },
      },
    },
    {
      name: 'timeouts: traces-specific wins; malformed ones are reported',
      env: { OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: 'soon', OTEL_EXPORTER_OTLP_TIMEOUT: '2500' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: [], exportTimeoutMs: 2500 },
        warnings: [
          'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT must be a positive number of milliseconds (got "soon")',
        ],
      },
    },
    {
      name: 'batch schedule delay',
      env: { OTEL_BSP_SCHEDULE_DELAY: '100' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: [], scheduledDelayMs: 100 },
      },
    },
    {
      name: 'sampler and ratio',
      env: { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: [], sampler: 'parentbased_traceidratio', samplerRatio: 0.25 },
      },
    },
    {
      name: 'a ratio outside [0, 1] and an unknown sampler are reported',
      env: { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: [], sampler: 'traceidratio' },
        warnings: ['OTEL_TRACES_SAMPLER_ARG must be a ratio in [0, 1] (got 2)'],
      },
    },
    {
      name: 'an unknown sampler is reported and the default kept',
      env: { OTEL_TRACES_SAMPLER: 'jaeger_remote' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: [] },
        warnings: ['OTEL_TRACES_SAMPLER: unsupported sampler "jaeger_remote" ignored'],
      },
    },
    {
      name: 'protobuf is asked for but JSON is sent',
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: ['otlp'], endpoint: 'http://otel:4318/v1/traces' },
        warnings: [
          'OTEL_EXPORTER_OTLP_PROTOCOL "http/protobuf" is not supported; spans are sent as http/json',
        ],
      },
    },
    {
      name: 'a malformed endpoint is reported and does not turn export on',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: [] },
        warnings: ['OTEL_EXPORTER_OTLP_ENDPOINT is not a URL ("not a url/v1/traces"); ignored'],
      },
    },
    {
      name: 'instrumentations are opt-in by name',
      env: { OTEL_NODE_ENABLED_INSTRUMENTATIONS: 'http, fs,http' },
      expected: {
        serviceName: 'unknown_service:node',
        traces: { exporters: [] },
        instrumentations: ['http'],
        warnings: ['OTEL_NODE_ENABLED_INSTRUMENTATIONS: unsupported instrumentation "fs" ignored'],
      },
    },
  ];

  it.each(cases)('$name', ({ env, expected }) => {
    expect(telemetryOptionsFromEnv(env)).toEqual(expected);
  });

  it('falls back to the service defaults the caller passes', () => {
    expect(
      telemetryOptionsFromEnv({}, { serviceName: 'audit-logger', serviceVersion: '0.1.0' }),
    ).toEqual({ serviceName: 'audit-logger', serviceVersion: '0.1.0', traces: { exporters: [] } });
  });
});

describe('startTelemetry: traces', () => {
  it('exports spans over OTLP/HTTP JSON with service name, parent ids, attributes and headers', async () => {
    const otlp = await receiver();
    const telemetry = start({
      ...telemetryOptionsFromEnv({
        OTEL_SERVICE_NAME: 'orchestrator',
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=secret',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
      }),
      logger: recordingLogger(),
    });
    let ids: { parent?: string; child?: string; trace?: string } = {};
    await withSpan(
      telemetry.tracer,
      'tools/call get_weather',
      { kind: SpanKind.SERVER, attributes: { [ATTR.MCP_METHOD_NAME]: 'tools/call' } },
      async () => {
        // A library's tracer from the global API lands in the same trace.
        await withSpan(
          trace.getTracer('library'),
          chainStageSpanName('request', 'validators'),
          {
            attributes: {
              [ATTR.FLEET_CHAIN_EVENT]: 'tools/call',
              [ATTR.FLEET_CHAIN_PHASE]: 'request',
              'test.count': 3,
              'test.flag': true,
              'test.skipped': undefined,
            },
          },
          async () => {
            ids = { child: currentTraceIds()?.spanId, trace: currentTraceIds()?.traceId };
          },
        );
        ids.parent = currentTraceIds()?.spanId;
      },
    );
    await telemetry.forceFlush();
    const spans = await otlp.waitFor((all) => all.length >= 2);
    const parent = spans.find((s) => s.name === 'tools/call get_weather');
    const child = spans.find((s) => s.name === chainStageSpanName('request', 'validators'));

    expect(parent).toMatchObject({
      traceId: ids.trace,
      spanId: ids.parent,
      parentSpanId: undefined,
      kind: 2,
      serviceName: 'orchestrator',
      scopeName: 'orchestrator',
      attributes: { 'mcp.method.name': 'tools/call' },
    });
    expect(parent?.resourceAttributes).toMatchObject({
      'service.name': 'orchestrator',
      'deployment.environment.name': 'test',
      'telemetry.sdk.language': 'nodejs',
    });
    expect(child).toMatchObject({
      traceId: ids.trace,
      spanId: ids.child,
      parentSpanId: ids.parent,
      kind: 1,
      serviceName: 'orchestrator',
      scopeName: 'library',
      attributes: {
        'fleet.chain.event': 'tools/call',
        'fleet.chain.phase': 'request',
        'test.count': 3,
        'test.flag': true,
      },
    });
    expect(child?.attributes).not.toHaveProperty('test.skipped');
    expect(otlp.requests()[0]?.headers).toMatchObject({
      'x-api-key': 'secret',
      'content-type': 'application/json',
    });
  });

  it('records a failed operation as an exported ERROR span with an exception event', async () => {
    const otlp = await receiver();
    const telemetry = start({
      serviceName: 'svc',
      traces: { exporters: ['otlp'], endpoint: otlp.tracesUrl },
    });
    const failure = new TypeError('backend said no');
    await expect(
      withSpan(telemetry.tracer, 'failing', {}, () => Promise.reject(failure)),
    ).rejects.toBe(failure);
    await telemetry.forceFlush();
    const [span] = await otlp.waitFor((all) => all.length === 1);
    expect(span?.status).toEqual({ code: 2, message: 'backend said no' });
    expect(span?.attributes['error.type']).toBe('TypeError');
    expect(span?.events[0]).toMatchObject({
      name: 'exception',
      attributes: { 'exception.type': 'TypeError', 'exception.message': 'backend said no' },
    });
  });

  it('with OTEL_TRACES_EXPORTER=none exports nothing but still propagates trace context', async () => {
    const otlp = await receiver();
    const telemetry = start(
      telemetryOptionsFromEnv({
        OTEL_SERVICE_NAME: 'svc',
        OTEL_TRACES_EXPORTER: 'none',
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      }),
    );
    const carrier: Record<string, string> = {};
    let ids: ReturnType<typeof currentTraceIds>;
    let helperHeaders: Record<string, string> = {};
    await withSpan(telemetry.tracer, 'not exported', {}, () => {
      propagation.inject(context.active(), carrier);
      helperHeaders = injectTraceHeaders();
      ids = currentTraceIds();
    });
    expect(ids).toBeDefined();
    expect(carrier.traceparent).toBe(`00-${ids?.traceId}-${ids?.spanId}-01`);
    expect(helperHeaders.traceparent).toBe(carrier.traceparent);

    await telemetry.forceFlush();
    await telemetry.shutdown();
    expect(otlp.requests()).toEqual([]);
  });

  it('continues a remote parent taken from a traceparent header', async () => {
    const otlp = await receiver();
    const telemetry = start({
      serviceName: 'svc',
      traces: { exporters: ['otlp'], endpoint: otlp.tracesUrl },
    });
    const remoteTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const remoteSpan = '00f067aa0ba902b7';
    const parent = propagation.extract(context.active(), {
      traceparent: `00-${remoteTrace}-${remoteSpan}-01`,
    });
    await withSpan(telemetry.tracer, 'server', { kind: SpanKind.SERVER, parent }, () => undefined);
    await telemetry.forceFlush();
    const [span] = await otlp.waitFor((all) => all.length === 1);
    expect(span).toMatchObject({ traceId: remoteTrace, parentSpanId: remoteSpan });
  });

  it('logs export failures and never throws when no collector listens', async () => {
    // A port that was free a moment ago: connections are refused.
    const closed = await startOtlpReceiver();
    await closed.close();
    const logger = recordingLogger();
    const telemetry = start({
      serviceName: 'svc',
      traces: { exporters: ['otlp'], endpoint: closed.tracesUrl, exportTimeoutMs: 500 },
      shutdownTimeoutMs: 2000,
      logger,
    });
    const result = await withSpan(telemetry.tracer, 'still works', {}, () => 42);
    expect(result).toBe(42);
    await telemetry.forceFlush();
    await telemetry.shutdown();
    expect(logger.messages.some((m) => m.includes('ECONNREFUSED'))).toBe(true);
  });

  it('shuts down within the bound when the collector accepts but never answers', async () => {
    const hanging = await serve(() => {
      // Never respond.
    });
    const logger = recordingLogger();
    const telemetry = start({
      serviceName: 'svc',
      traces: { exporters: ['otlp'], endpoint: `${hanging}/v1/traces`, exportTimeoutMs: 2000 },
      shutdownTimeoutMs: 300,
      logger,
    });
    await withSpan(telemetry.tracer, 'pending', {}, () => undefined);
    const started = Date.now();
    await telemetry.shutdown();
    expect(Date.now() - started).toBeLessThan(1500);
    expect(logger.messages).toContain('trace shutdown did not finish within 300 ms');
  });

  it('does not throw for a malformed endpoint: logs it and runs without that exporter', async () => {
    const logger = recordingLogger();
    const telemetry = start({
      serviceName: 'svc',
      traces: { exporters: ['otlp'], endpoint: 'no scheme here' },
      logger,
    });
    expect(logger.messages.some((m) => m.startsWith('trace exporter otlp not started'))).toBe(true);
    await withSpan(telemetry.tracer, 'fine', {}, () => {
      expect(currentTraceIds()).toBeDefined();
    });
  });

  it('honours the sampler: always_off records nothing but still propagates', async () => {
    const otlp = await receiver();
    const telemetry = start({
      serviceName: 'svc',
      traces: { exporters: ['otlp'], endpoint: otlp.tracesUrl, sampler: 'always_off' },
    });
    let headers: Record<string, string> = {};
    await withSpan(telemetry.tracer, 'dropped', {}, (span) => {
      expect(span.isRecording()).toBe(false);
      headers = injectTraceHeaders();
    });
    await telemetry.forceFlush();
    expect(headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(otlp.spans()).toEqual([]);
  });

  it('shutdown unregisters its globals, is idempotent, and a new pipeline can start', async () => {
    const first = startTelemetry({ serviceName: 'first' });
    await first.shutdown();
    await first.shutdown();
    expect(trace.getTracer('x').startSpan('y').isRecording()).toBe(false);
    expect(injectTraceHeaders()).toEqual({});

    const logger = recordingLogger();
    const second = start({ serviceName: 'second', logger });
    await withSpan(second.tracer, 'z', {}, (span) => {
      expect(trace.isSpanContextValid(span.spanContext())).toBe(true);
      expect(injectTraceHeaders().traceparent).toContain(span.spanContext().spanId);
    });
    expect(logger.messages).toEqual([]);
  });

  it('without an exporter, spans record nothing but carry trace context and the sampling decision', async () => {
    const telemetry = start({ serviceName: 'quiet' });
    let outer = '';
    let inner: Record<string, string> = {};
    await withSpan(telemetry.tracer, 'outer', {}, async (span) => {
      expect(span.isRecording()).toBe(false);
      outer = span.spanContext().traceId;
      await withSpan(telemetry.tracer, 'inner', {}, (child) => {
        expect(child.spanContext().traceId).toBe(outer);
        expect(child.spanContext().spanId).not.toBe(span.spanContext().spanId);
        inner = injectTraceHeaders();
      });
    });
    expect(outer).toMatch(/^[0-9a-f]{32}$/);
    expect(inner.traceparent).toMatch(new RegExp(`^00-${outer}-[0-9a-f]{16}-01$`));

    // A caller's unsampled trace stays unsampled downstream (parent-based sampling).
    const unsampled = extractTraceContext({
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00',
    });
    const headers = await context.with(unsampled, () =>
      withSpan(telemetry.tracer, 'child', {}, () => injectTraceHeaders()),
    );
    expect(headers.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-00$/);
    expect(headers.traceparent).not.toContain('b7ad6b7169203331');
  });

  it("routes OpenTelemetry's own warnings and errors to the logger, unless told not to", () => {
    const logger = recordingLogger();
    start({ serviceName: 'svc', logger });
    diag.error(JSON.stringify({ message: 'export failed', code: 'ECONNREFUSED', stack: '...' }));
    diag.warn('something odd');
    diag.info('chatter');
    expect(logger.messages).toEqual([
      'opentelemetry: export failed',
      'opentelemetry: something odd',
    ]);
  });

  it('leaves the diag logger alone with diagnostics: false', () => {
    const logger = recordingLogger();
    start({ serviceName: 'svc', logger, diagnostics: false });
    diag.error('not ours');
    expect(logger.messages).toEqual([]);
  });

  it('logs the configuration warnings it is given', () => {
    const logger = recordingLogger();
    start({ ...telemetryOptionsFromEnv({ OTEL_TRACES_SAMPLER: 'nope' }), logger });
    expect(logger.messages).toEqual(['OTEL_TRACES_SAMPLER: unsupported sampler "nope" ignored']);
  });
});

describe('startTelemetry: metrics', () => {
  it('serves recorded histograms and counters in Prometheus text through metricsHandler', async () => {
    const telemetry = start({ serviceName: 'orchestrator' });
    const base = await serve(telemetry.metricsHandler);
    telemetry.metrics.recordRequest(12, { method: 'tools/call', status: 'ok' });
    telemetry.metrics.recordRequest(0.3, { method: 'tools/call', status: 'ok' });
    telemetry.metrics.countAbort({ type: 'validation', interceptor: 'policy-validator' });

    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await response.text();
    const name = METRIC.REQUEST_DURATION.replaceAll('.', '_');
    expect(text).toContain(`# TYPE ${name} histogram`);
    expect(text).toMatch(
      new RegExp(
        `${name}_count\\{mcp_method_name="tools/call",fleet_request_status="ok"[^}]*\\} 2`,
      ),
    );
    expect(text).toMatch(new RegExp(`${name}_bucket\\{[^}]*le="0.5"\\} 1`));
    expect(text).toMatch(new RegExp(`${name}_bucket\\{[^}]*le="25"\\} 2`));
    expect(text).toMatch(
      /fleet_chain_aborts_total\{fleet_chain_abort_type="validation",fleet_interceptor_name="policy-validator"[^}]*\} 1/,
    );
    expect(text).toContain('target_info{service_name="orchestrator"');
  });

  it('registers the meter provider globally, so library meters are served too', async () => {
    const telemetry = start({ serviceName: 'svc' });
    metrics.getMeter('library').createCounter('library.calls').add(3);
    const base = await serve(telemetry.metricsHandler);
    expect(await (await fetch(`${base}/metrics`)).text()).toMatch(/library_calls_total\{[^}]*\} 3/);
  });
});

// A full, synchronous GC without starting the worker with --expose-gc.
setFlagsFromString('--expose-gc');
const forceGc = runInNewContext('gc') as () => void;

/** Values of the Prometheus samples `name{...}` whose labels include `labels`. */
function samples(text: string, name: string, labels: Record<string, string> = {}): number[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .filter((line) => Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)))
    .map((line) => Number(line.slice(line.lastIndexOf(' ') + 1)));
}

/** The Prometheus name of a runtime metric's samples: dots become underscores, counters get `_total`, histograms `_count`. */
function promName(name: string): string {
  const base = name.replaceAll('.', '_');
  if (name === RUNTIME_METRIC.EVENTLOOP_TIME || name === RUNTIME_METRIC.PROCESS_CPU_TIME)
    return `${base}_total`;
  if (name === RUNTIME_METRIC.GC_DURATION) return `${base}_count`;
  return base;
}

function busyWait(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // The event loop cannot turn.
  }
}

describe('startTelemetry: runtime metrics', () => {
  it('serves every runtime metric on /metrics with plausible values', async () => {
    const telemetry = start({ serviceName: 'svc' });
    const base = await serve(telemetry.metricsHandler);
    const scrape = async () => (await fetch(`${base}/metrics`)).text();
    const majorGcs = (text: string) =>
      samples(text, promName(RUNTIME_METRIC.GC_DURATION), { v8js_gc_type: 'major' });
    forceGc();
    // GC entries reach the observer asynchronously.
    for (let i = 0; i < 50 && majorGcs(await scrape()).length === 0; i++) await sleep(10);
    await sleep(60);
    await scrape(); // a new event-loop delay window starts here
    await sleep(60);
    busyWait(200);
    await sleep(30);
    const text = await scrape();

    for (const name of Object.values(RUNTIME_METRIC)) {
      expect(text, name).toContain(`# TYPE ${name.replaceAll('.', '_')}`);
      expect(samples(text, promName(name)).length, name).toBeGreaterThan(0);
    }
    expect(majorGcs(text)[0]).toBeGreaterThanOrEqual(1);
    const heapUsed = samples(text, 'v8js_memory_heap_used').reduce((a, b) => a + b, 0);
    expect(heapUsed).toBeGreaterThan(0);
    expect(samples(text, 'process_memory_usage')[0]).toBeGreaterThan(heapUsed);
    expect(samples(text, 'process_cpu_time_total', { cpu_mode: 'user' })[0]).toBeGreaterThan(0);
    expect(samples(text, 'nodejs_eventloop_delay_max')[0]).toBeGreaterThanOrEqual(0.2);
    expect(samples(text, 'nodejs_eventloop_delay_min')[0]).toBeLessThan(0.2);
    expect(text).toContain('otel_scope_name="@fleet/telemetry/runtime"');
  });

  it('serves none of them with runtimeMetrics: false', async () => {
    const telemetry = start({ serviceName: 'svc', runtimeMetrics: false });
    telemetry.metrics.countAbort({ type: 'validation' });
    const base = await serve(telemetry.metricsHandler);
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toContain('fleet_chain_aborts_total');
    for (const name of Object.values(RUNTIME_METRIC))
      expect(text, name).not.toContain(name.replaceAll('.', '_'));
  });

  it('takes the event-loop delay resolution from the options', async () => {
    const telemetry = start({
      serviceName: 'svc',
      runtimeMetrics: { eventLoopDelayResolutionMs: 50 },
    });
    const base = await serve(telemetry.metricsHandler);
    await sleep(250);
    const text = await (await fetch(`${base}/metrics`)).text();
    // Each sample spans at least one interval.
    expect(samples(text, 'nodejs_eventloop_delay_min')[0]).toBeGreaterThanOrEqual(0.045);
  });

  it('leaves nothing behind that keeps a process alive after shutdown', async () => {
    // A real process: start, serve one scrape, stop; it must exit on its own.
    const index = pathToFileURL(fileURLToPath(new URL('./index.ts', import.meta.url))).href;
    const script = `
      import { createServer, get } from 'node:http';
      import { setTimeout as sleep } from 'node:timers/promises';
      import { startTelemetry } from ${JSON.stringify(index)};
      const before = process.getActiveResourcesInfo().sort();
      const telemetry = startTelemetry({ serviceName: 'exit-test' });
      const server = createServer(telemetry.metricsHandler);
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      await sleep(100);
      const text = await new Promise((resolve, reject) => {
        get({ host: '127.0.0.1', port: server.address().port, path: '/metrics', agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => { body += chunk; });
          res.on('end', () => resolve(body));
        }).on('error', reject);
      });
      await new Promise((resolve) => server.close(resolve));
      await telemetry.shutdown();
      await sleep(50); // closed sockets leave the handle list on the next loop turn
      process.stdout.write(JSON.stringify({
        served: text.includes('nodejs_eventloop_delay_p99') && text.includes('v8js_memory_heap_used'),
        before,
        after: process.getActiveResourcesInfo().sort(),
      }));
    `;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--conditions=@fleet/source', '--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: fileURLToPath(new URL('..', import.meta.url)), timeout: 15_000 },
    );
    const { served, before, after } = JSON.parse(stdout);
    expect(served).toBe(true);
    expect(after).toEqual(before);
  });
});

describe('startTelemetry: instrumentations', () => {
  it('traces node http only when asked, and not the /metrics and health paths', async () => {
    const otlp = await receiver();
    const telemetry = start({
      serviceName: 'svc',
      traces: { exporters: ['otlp'], endpoint: otlp.tracesUrl },
      instrumentations: ['http'],
    });
    const base = await serve((req, res) => {
      if (req.url === '/metrics') telemetry.metricsHandler(req, res);
      else res.end('ok');
    });
    const httpGet = (path: string) =>
      new Promise<void>((resolve, reject) => {
        get(`${base}${path}`, (res) => {
          res.resume();
          res.on('end', resolve);
        }).on('error', reject);
      });
    await httpGet('/metrics');
    await httpGet('/work');
    await telemetry.forceFlush();
    const spans = await otlp.waitFor((all) =>
      all.some((s) => s.kind === 2 && s.attributes['url.path'] === '/work'),
    );
    expect(spans.filter((s) => s.attributes['url.path'] === '/metrics')).toEqual([]);
  });
});
