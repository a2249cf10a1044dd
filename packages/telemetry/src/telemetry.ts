/**
 * The OpenTelemetry bootstrap of a fleet service. `main.ts` reads the environment once with
 * {@link telemetryOptionsFromEnv} and calls {@link startTelemetry} before it builds the app.
 *
 * Trace context always propagates: the context manager, the W3C propagators and a tracer
 * provider are registered whatever the exporter, so `OTEL_TRACES_EXPORTER=none` stops export
 * only. Metrics are served in Prometheus text format by the service itself (`/metrics`).
 */
import { createRequire, syncBuiltinESMExports } from 'node:module';
import {
  type Attributes,
  context,
  type DiagLogger,
  DiagLogLevel,
  diag,
  metrics,
  propagation,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  CompositePropagator,
  parseKeyPairsIntoRecord,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { type Instrumentation, registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  type Sampler,
  SimpleSpanProcessor,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { createFleetMetrics } from './metrics.ts';
import { type RuntimeMetrics, startRuntimeMetrics } from './runtime.ts';
import type {
  InstrumentationName,
  NodeRequestHandler,
  SamplerName,
  Telemetry,
  TelemetryEnvDefaults,
  TelemetryLogger,
  TelemetryOptions,
  TraceExporterName,
  TracesOptions,
} from './types.ts';
import { UnrecordedTracerProvider } from './unrecorded.ts';

/** The OTLP/HTTP traces URL used when an `otlp` exporter is asked for without an endpoint. */
export const DEFAULT_OTLP_TRACES_URL = 'http://localhost:4318/v1/traces';

const SAMPLERS: readonly SamplerName[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];
const EXPORTERS: readonly TraceExporterName[] = ['otlp', 'console'];
const INSTRUMENTATIONS: readonly InstrumentationName[] = ['http', 'undici'];
/** Paths that are polled, not served: never traced by instrumentation-http. */
const UNTRACED_PATHS = /^\/(metrics|healthz|readyz)(\?|$)/;

/** Environment values per the OTel spec: empty means unset. */
function read(env: Readonly<Record<string, string | undefined>>, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

function validUrl(value: string, name: string, warnings: string[]): string | undefined {
  try {
    return new URL(value).href;
  } catch {
    warnings.push(`${name} is not a URL (${JSON.stringify(value)}); ignored`);
    return undefined;
  }
}

function tracesUrl(
  env: Readonly<Record<string, string | undefined>>,
  warnings: string[],
): string | undefined {
  const specific = read(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (specific) return validUrl(specific, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', warnings);
  const base = read(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (!base) return undefined;
  // The base endpoint gets the signal path appended; the signal-specific one is used as is.
  return validUrl(
    `${base.endsWith('/') ? base : `${base}/`}v1/traces`,
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    warnings,
  );
}

function list(value: string | undefined): string[] {
  if (!value) return [];
  return value
    .split(',')
    .map((item) => item.trim().toLowerCase())
    .filter((item) => item.length > 0);
}

function positiveNumber(value: string | undefined, name: string, warnings: string[]) {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (Number.isFinite(number) && number > 0) return number;
  warnings.push(`${name} must be a positive number of milliseconds (got ${JSON.stringify(value)})`);
  return undefined;
}

/**
 * Read the standard OpenTelemetry environment variables into {@link TelemetryOptions}. Pure:
 * pass `process.env` from `main.ts`. Unknown or malformed values are ignored and described
 * in `warnings` (OpenTelemetry's rule: a bad variable never stops the service).
 *
 * Spans are exported when `OTEL_TRACES_EXPORTER` asks for it, or, when it is unset, when an
 * OTLP endpoint is configured. `OTEL_TRACES_EXPORTER=none` (or `OTEL_SDK_DISABLED=true`)
 * stops export only; trace context still propagates.
 */
export function telemetryOptionsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  defaults: TelemetryEnvDefaults = {},
): TelemetryOptions {
  const warnings: string[] = [];
  const resourceAttributes = parseKeyPairsIntoRecord(read(env, 'OTEL_RESOURCE_ATTRIBUTES'));
  const serviceName =
    read(env, 'OTEL_SERVICE_NAME') ??
    resourceAttributes[ATTR_SERVICE_NAME] ??
    defaults.serviceName ??
    'unknown_service:node';
  const serviceVersion = resourceAttributes[ATTR_SERVICE_VERSION] ?? defaults.serviceVersion;
  delete resourceAttributes[ATTR_SERVICE_NAME];
  delete resourceAttributes[ATTR_SERVICE_VERSION];

  const endpoint = tracesUrl(env, warnings);
  const requested = list(read(env, 'OTEL_TRACES_EXPORTER'));
  let exporters: TraceExporterName[] = [];
  if (read(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') exporters = [];
  else if (requested.length === 0) exporters = endpoint ? ['otlp'] : [];
  else if (!requested.includes('none'))
    for (const name of requested) {
      if (!EXPORTERS.includes(name as TraceExporterName))
        warnings.push(`OTEL_TRACES_EXPORTER: unsupported exporter ${JSON.stringify(name)} ignored`);
      else if (!exporters.includes(name as TraceExporterName))
        exporters.push(name as TraceExporterName);
    }

  const protocol =
    read(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? read(env, 'OTEL_EXPORTER_OTLP_PROTOCOL');
  if (protocol && protocol !== 'http/json' && exporters.includes('otlp'))
    warnings.push(
      `OTEL_EXPORTER_OTLP_PROTOCOL ${JSON.stringify(protocol)} is not supported; spans are sent as http/json`,
    );

  const headers = {
    ...parseKeyPairsIntoRecord(read(env, 'OTEL_EXPORTER_OTLP_HEADERS')),
    ...parseKeyPairsIntoRecord(read(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS')),
  };
  const exportTimeoutMs =
    positiveNumber(
      read(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT'),
      'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
      warnings,
    ) ??
    positiveNumber(read(env, 'OTEL_EXPORTER_OTLP_TIMEOUT'), 'OTEL_EXPORTER_OTLP_TIMEOUT', warnings);
  const scheduledDelayMs = positiveNumber(
    read(env, 'OTEL_BSP_SCHEDULE_DELAY'),
    'OTEL_BSP_SCHEDULE_DELAY',
    warnings,
  );

  let sampler: SamplerName | undefined;
  const samplerName = read(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase();
  if (samplerName && SAMPLERS.includes(samplerName as SamplerName))
    sampler = samplerName as SamplerName;
  else if (samplerName)
    warnings.push(
      `OTEL_TRACES_SAMPLER: unsupported sampler ${JSON.stringify(samplerName)} ignored`,
    );
  let samplerRatio: number | undefined;
  const ratio = read(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (ratio !== undefined && sampler?.endsWith('traceidratio')) {
    const number = Number(ratio);
    if (Number.isFinite(number) && number >= 0 && number <= 1) samplerRatio = number;
    else warnings.push(`OTEL_TRACES_SAMPLER_ARG must be a ratio in [0, 1] (got ${ratio})`);
  }

  const instrumentations: InstrumentationName[] = [];
  for (const name of list(read(env, 'OTEL_NODE_ENABLED_INSTRUMENTATIONS'))) {
    if (INSTRUMENTATIONS.includes(name as InstrumentationName)) {
      if (!instrumentations.includes(name as InstrumentationName))
        instrumentations.push(name as InstrumentationName);
    } else
      warnings.push(
        `OTEL_NODE_ENABLED_INSTRUMENTATIONS: unsupported instrumentation ${JSON.stringify(name)} ignored`,
      );
  }

  // The standard switch of @opentelemetry/auto-instrumentations-node, for the instrumentation
  // whose metrics our runtime module serves: `runtime-node` in the list turns them off.
  const runtimeMetricsOff = list(read(env, 'OTEL_NODE_DISABLED_INSTRUMENTATIONS')).includes(
    'runtime-node',
  );

  const traces: TracesOptions = { exporters };
  if (exporters.includes('otlp')) traces.endpoint = endpoint ?? DEFAULT_OTLP_TRACES_URL;
  if (Object.keys(headers).length > 0) traces.headers = headers;
  if (exportTimeoutMs !== undefined) traces.exportTimeoutMs = exportTimeoutMs;
  if (scheduledDelayMs !== undefined) traces.scheduledDelayMs = scheduledDelayMs;
  if (sampler) traces.sampler = sampler;
  if (samplerRatio !== undefined) traces.samplerRatio = samplerRatio;

  const options: TelemetryOptions = { serviceName, traces };
  if (serviceVersion) options.serviceVersion = serviceVersion;
  if (Object.keys(resourceAttributes).length > 0) options.resourceAttributes = resourceAttributes;
  if (instrumentations.length > 0) options.instrumentations = instrumentations;
  if (runtimeMetricsOff) options.runtimeMetrics = false;
  if (warnings.length > 0) options.warnings = warnings;
  return options;
}

/** The default logger: one JSON line per warning on stderr (stdout carries the start-up line). */
const stderrLogger: TelemetryLogger = {
  warn(details, message) {
    process.stderr.write(
      `${JSON.stringify({ level: 'warn', component: 'telemetry', ...details, msg: message })}\n`,
    );
  },
};

function createSampler(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

function describe(error: unknown): string {
  // TracerProvider.forceFlush rejects with an array of errors.
  if (Array.isArray(error)) return error.map(describe).join('; ');
  return error instanceof Error ? error.message : String(error);
}

/**
 * OpenTelemetry's default error handler hands errors to diag as a JSON dump, stack included.
 * Keep the message in the log line and the code in its details.
 */
function diagMessage(message: string, details: Record<string, unknown>): string {
  if (!message.startsWith('{')) return message;
  try {
    const parsed = JSON.parse(message) as { message?: unknown; code?: unknown };
    if (typeof parsed.message !== 'string') return message;
    if (parsed.code !== undefined) details.code = parsed.code;
    return parsed.message;
  } catch {
    return message;
  }
}

/** Resolve when `promise` settles or after `ms`, whichever is first; report which. */
async function bounded(promise: Promise<unknown>, ms: number): Promise<'done' | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise.then(() => 'done' as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Start the telemetry pipeline: register the async-hooks context manager, the W3C Trace
 * Context and Baggage propagators, a tracer provider (exporting as `options.traces` says) and
 * a meter provider read by a Prometheus exporter, all globally, and observe the Node.js
 * runtime metrics (`options.runtimeMetrics`, see `runtime.ts`). Does not throw for a
 * misconfigured exporter: the problem is logged and that exporter is left out.
 *
 * Register at most one pipeline per process; {@link Telemetry.shutdown} unregisters it.
 */
export function startTelemetry(options: TelemetryOptions): Telemetry {
  const {
    serviceName,
    serviceVersion,
    resourceAttributes = {},
    traces = {},
    instrumentations = [],
    runtimeMetrics = true,
    shutdownTimeoutMs = 5000,
    diagnostics = true,
    logger = stderrLogger,
    warnings = [],
  } = options;
  const {
    exporters = [],
    endpoint = DEFAULT_OTLP_TRACES_URL,
    headers,
    exportTimeoutMs = 10_000,
    scheduledDelayMs = 5000,
    sampler = 'parentbased_always_on',
    samplerRatio = 1,
  } = traces;

  const warn = (message: string, details: Record<string, unknown> = {}) => {
    try {
      logger.warn(details, message);
    } catch {
      // A broken logger must not break start-up or a request.
    }
  };
  for (const warning of warnings) warn(warning);

  // Undone in reverse order by shutdown(): only what this call registered.
  const undo: Array<() => void> = [];

  if (diagnostics) {
    const toLogger =
      (level: string) =>
      (message: string, ...args: unknown[]) => {
        const details: Record<string, unknown> = { otelLevel: level };
        if (args.length > 0) details.args = args.map(describe);
        warn(`opentelemetry: ${diagMessage(message, details)}`, details);
      };
    const noop = () => undefined;
    const diagLogger: DiagLogger = {
      error: toLogger('error'),
      warn: toLogger('warn'),
      info: noop,
      debug: noop,
      verbose: noop,
    };
    diag.setLogger(diagLogger, { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
    undo.push(() => diag.disable());
  }

  const contextManager = new AsyncLocalStorageContextManager().enable();
  if (context.setGlobalContextManager(contextManager)) undo.push(() => context.disable());
  else {
    contextManager.disable();
    warn('a global context manager was already registered; keeping it');
  }

  const propagator = new CompositePropagator({
    propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
  });
  if (propagation.setGlobalPropagator(propagator)) undo.push(() => propagation.disable());
  else warn('a global propagator was already registered; keeping it');

  const resourceValues: Attributes = { ...resourceAttributes, [ATTR_SERVICE_NAME]: serviceName };
  if (serviceVersion) resourceValues[ATTR_SERVICE_VERSION] = serviceVersion;
  const resource = defaultResource().merge(resourceFromAttributes(resourceValues));

  const spanProcessors: SpanProcessor[] = [];
  for (const name of exporters) {
    try {
      if (name === 'otlp') {
        const exporter = new OTLPTraceExporter({
          url: endpoint,
          timeoutMillis: exportTimeoutMs,
          ...(headers ? { headers: { ...headers } } : {}),
        });
        spanProcessors.push(
          new BatchSpanProcessor({ exporter, scheduledDelayMillis: scheduledDelayMs }),
        );
      } else {
        spanProcessors.push(new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() }));
      }
    } catch (error) {
      warn(`trace exporter ${name} not started: ${describe(error)}`, { exporter: name });
    }
  }
  // With nowhere to send spans, spans only carry trace context (see unrecorded.ts).
  const tracerProvider =
    spanProcessors.length > 0
      ? new TracerProvider({
          resource,
          sampler: createSampler(sampler, samplerRatio),
          spanProcessors,
        })
      : new UnrecordedTracerProvider(createSampler(sampler, samplerRatio));
  if (trace.setGlobalTracerProvider(tracerProvider)) undo.push(() => trace.disable());
  else warn('a global tracer provider was already registered; keeping it');

  const prometheus = new PrometheusExporter({ preventServerStart: true });
  const meterProvider = new MeterProvider({ resource, readers: [prometheus] });
  if (metrics.setGlobalMeterProvider(meterProvider)) undo.push(() => metrics.disable());
  else warn('a global meter provider was already registered; keeping it');

  let runtime: RuntimeMetrics | undefined;
  if (runtimeMetrics !== false)
    try {
      runtime = startRuntimeMetrics(
        meterProvider.getMeter('@fleet/telemetry/runtime'),
        runtimeMetrics === true ? {} : runtimeMetrics,
      );
    } catch (error) {
      warn(`runtime metrics not started: ${describe(error)}`);
    }

  const enabled: Instrumentation[] = [];
  try {
    if (instrumentations.includes('http'))
      enabled.push(
        new HttpInstrumentation({
          ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.test(req.url ?? ''),
        }),
      );
    if (instrumentations.includes('undici')) enabled.push(new UndiciInstrumentation());
    if (enabled.length > 0) {
      const unregister = registerInstrumentations({
        instrumentations: enabled,
        tracerProvider,
        meterProvider,
      });
      undo.push(unregister);
    }
    if (instrumentations.includes('http')) {
      // Instrumentations patch a module when it is next required. The builtins are loaded
      // already (and ESM imports bypass the require hook), so require them once now, then
      // sync the ESM named exports with the patched CommonJS ones.
      const require = createRequire(import.meta.url);
      require('node:http');
      require('node:https');
      syncBuiltinESMExports();
    }
  } catch (error) {
    warn(`instrumentations not enabled: ${describe(error)}`, { instrumentations });
  }

  const tracer = tracerProvider.getTracer(serviceName, serviceVersion);
  const meter = meterProvider.getMeter(serviceName, serviceVersion);

  const metricsHandler: NodeRequestHandler = (req, res) => {
    try {
      prometheus.getMetricsRequestHandler(req, res);
    } catch (error) {
      warn(`metrics not served: ${describe(error)}`);
      if (!res.headersSent) res.statusCode = 500;
      res.end();
    }
  };

  const settle = async (what: string, work: () => Promise<unknown>): Promise<void> => {
    try {
      if ((await bounded(work(), shutdownTimeoutMs)) === 'timeout')
        warn(`${what} did not finish within ${shutdownTimeoutMs} ms`, { shutdownTimeoutMs });
    } catch (error) {
      warn(`${what} failed: ${describe(error)}`);
    }
  };

  let stopping: Promise<void> | undefined;
  const shutdown = (): Promise<void> => {
    stopping ??= (async () => {
      // First, synchronously: the delay timer and GC observer stop even if export hangs.
      try {
        runtime?.stop();
      } catch (error) {
        warn(`stopping runtime metrics failed: ${describe(error)}`);
      }
      await Promise.all([
        settle('trace shutdown', () => tracerProvider.shutdown()),
        settle('metrics shutdown', () => meterProvider.shutdown()),
      ]);
      for (const step of undo.reverse()) {
        try {
          step();
        } catch (error) {
          warn(`unregistering telemetry failed: ${describe(error)}`);
        }
      }
    })();
    return stopping;
  };

  return {
    tracer,
    meter,
    metrics: createFleetMetrics(meter),
    metricsHandler,
    forceFlush: () =>
      settle('trace flush', () => tracerProvider.forceFlush({ timeoutMillis: shutdownTimeoutMs })),
    shutdown,
  };
}
