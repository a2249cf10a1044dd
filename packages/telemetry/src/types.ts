/** Public types of @fleet/telemetry. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AttributeValue, Context, Meter, SpanKind, Tracer } from '@opentelemetry/api';

/** Where finished spans go. `otlp` is OTLP/HTTP with JSON bodies; `console` prints to stdout. */
export type TraceExporterName = 'otlp' | 'console';

/** The standard `OTEL_TRACES_SAMPLER` values. */
export type SamplerName =
  | 'always_on'
  | 'always_off'
  | 'traceidratio'
  | 'parentbased_always_on'
  | 'parentbased_always_off'
  | 'parentbased_traceidratio';

/**
 * Auto-instrumentations that can be switched on. None is on by default: the fleet creates
 * its own spans and sets `traceparent` itself, and `undici` would add a second
 * `traceparent` header to requests that already carry one.
 */
export type InstrumentationName = 'http' | 'undici';

/** Where telemetry reports its own problems. A pino logger fits. */
export interface TelemetryLogger {
  warn(details: Record<string, unknown>, message: string): void;
}

/** How spans are sampled and exported. */
export interface TracesOptions {
  /** Exporters for finished spans. Empty: spans are created and propagate, nothing is exported. Default `[]`. */
  exporters?: readonly TraceExporterName[];
  /** The full OTLP/HTTP traces URL (ending in `/v1/traces`). Default `http://localhost:4318/v1/traces`. */
  endpoint?: string;
  /** Headers sent with every export request (e.g. an API key). Default none. */
  headers?: Readonly<Record<string, string>>;
  /** Time limit of one export request, retries included. Default 10000. */
  exportTimeoutMs?: number;
  /** Delay between two batch exports (`OTEL_BSP_SCHEDULE_DELAY`). Default 5000. */
  scheduledDelayMs?: number;
  /** Default `parentbased_always_on`. */
  sampler?: SamplerName;
  /** Ratio for the `traceidratio` samplers, 0..1. Default 1. */
  samplerRatio?: number;
}

/** Options of the Node.js runtime metrics (`nodejs.eventloop.*`, `v8js.*`, `process.*`). */
export interface RuntimeMetricsOptions {
  /**
   * Sampling interval of the event-loop delay histogram, in whole milliseconds (at least 1).
   * Each sample includes the interval itself, so an idle loop reports about this much.
   * Default 20.
   */
  eventLoopDelayResolutionMs?: number;
}

/** Options for {@link startTelemetry}; {@link telemetryOptionsFromEnv} builds them from `OTEL_*` variables. */
export interface TelemetryOptions {
  /** `service.name` of the resource. */
  serviceName: string;
  /** `service.version` of the resource. Default none. */
  serviceVersion?: string;
  /** More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`). Default none. */
  resourceAttributes?: Readonly<Record<string, string>>;
  /** Default: no export, `parentbased_always_on`. */
  traces?: TracesOptions;
  /** Auto-instrumentations to enable. Default `[]`. */
  instrumentations?: readonly InstrumentationName[];
  /**
   * Serve the Node.js runtime and process metrics (event-loop delay and utilization, GC
   * pauses, V8 heap, RSS, CPU time) on `/metrics`; `false` leaves them out. Default `true`.
   */
  runtimeMetrics?: boolean | RuntimeMetricsOptions;
  /** Upper bound of {@link Telemetry.shutdown} and {@link Telemetry.forceFlush}. Default 5000. */
  shutdownTimeoutMs?: number;
  /** Route OpenTelemetry's own warnings and errors (export failures, ...) to `logger`. Default true. */
  diagnostics?: boolean;
  /** Default: one JSON line per warning on stderr. */
  logger?: TelemetryLogger;
  /** Problems found while reading the configuration; {@link startTelemetry} logs each. */
  warnings?: readonly string[];
}

/** Fallbacks for {@link telemetryOptionsFromEnv} when the environment does not say. */
export interface TelemetryEnvDefaults {
  /** Used when neither `OTEL_SERVICE_NAME` nor `service.name` in `OTEL_RESOURCE_ATTRIBUTES` is set. */
  serviceName?: string;
  /** Used when `OTEL_RESOURCE_ATTRIBUTES` has no `service.version`. */
  serviceVersion?: string;
}

/** A node request handler; express accepts it as a route handler. */
export type NodeRequestHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** A started telemetry pipeline. Every method is safe to call in a request: none throws. */
export interface Telemetry {
  /** A tracer named after the service. */
  readonly tracer: Tracer;
  /** A meter named after the service. */
  readonly meter: Meter;
  /** The fleet's instruments, on {@link Telemetry.meter}. */
  readonly metrics: FleetMetrics;
  /** Serves every metric in Prometheus text format (mount it at `/metrics`). */
  readonly metricsHandler: NodeRequestHandler;
  /** Export what is buffered; resolves (never rejects) within `shutdownTimeoutMs`. */
  forceFlush(): Promise<void>;
  /**
   * Flush, stop exporters and instrumentations, and unregister the globals this pipeline
   * registered. Idempotent; resolves (never rejects) within `shutdownTimeoutMs` even when
   * no collector answers.
   */
  shutdown(): Promise<void>;
}

/** Span attributes to set; `undefined` values are skipped. */
export type SpanAttributesInput = Readonly<Record<string, AttributeValue | undefined>>;

/** Options for {@link withSpan}. */
export interface WithSpanOptions {
  /** Default INTERNAL. */
  kind?: SpanKind;
  /** Attributes set when the span starts. */
  attributes?: SpanAttributesInput;
  /** Parent context (e.g. extracted from a request). Default: the active context. */
  parent?: Context;
}

/** The ids of the active span. */
export interface TraceIds {
  traceId: string;
  spanId: string;
}

/** Attributes of {@link FleetMetrics.recordRequest}. */
export interface RequestMetricAttributes {
  /** MCP method. */
  method: string;
  /** `ok` | `denied` | `error`. */
  status: string;
  /** A low-cardinality error class when status is `error`. */
  errorType?: string;
}

/** Attributes of {@link FleetMetrics.recordChain}. */
export interface ChainMetricAttributes {
  event: string;
  phase: string;
  /** Chain result status, e.g. `success`, `validation_failed`. */
  status: string;
}

/** Attributes of {@link FleetMetrics.recordInterceptor}. */
export interface InterceptorMetricAttributes {
  interceptor: string;
  /** e.g. `allowed`, `denied`, `modified`, `failed`, `timeout`. */
  outcome: string;
  /** Interceptor service id. */
  service?: string;
  /** `validation` | `mutation`. */
  type?: string;
  /** `active` | `audit`. */
  mode?: string;
  phase?: string;
}

/** Attributes of {@link FleetMetrics.countAbort}. */
export interface AbortMetricAttributes {
  /** `validation` | `mutation` | `invocation` | `timeout`. */
  type: string;
  /** The interceptor that caused the abort, if one did. */
  interceptor?: string;
  /**
   * How that interceptor's invocation turned out (`denied` `failed` `timeout` `rejected`), so an
   * abort over the caller's input (`rejected`: the service refused the params with -32602) can
   * be told from one over a broken service.
   */
  outcome?: string;
  phase?: string;
}

/** Attributes of {@link FleetMetrics.recordBackend}. */
export interface BackendMetricAttributes {
  backend: string;
  method: string;
  /** `ok` | `error`. */
  status: string;
  errorType?: string;
}

/**
 * The fleet's metric instruments with typed attributes. Recording never throws: a failure
 * inside the SDK is swallowed.
 */
export interface FleetMetrics {
  /** `fleet.request.duration` (ms). */
  recordRequest(durationMs: number, attributes: RequestMetricAttributes): void;
  /** `fleet.chain.duration` (ms). */
  recordChain(durationMs: number, attributes: ChainMetricAttributes): void;
  /** `fleet.interceptor.duration` (ms). */
  recordInterceptor(durationMs: number, attributes: InterceptorMetricAttributes): void;
  /** `fleet.chain.aborts` += 1. */
  countAbort(attributes: AbortMetricAttributes): void;
  /** `fleet.backend.duration` (ms). */
  recordBackend(durationMs: number, attributes: BackendMetricAttributes): void;
  /** `fleet.ingress.rejections` += 1, by `fleet.rejection.kind`. */
  countRejection(kind: string): void;
  /**
   * `fleet.backend.refusals` += 1, by `fleet.backend.id`, `fleet.refusal.reason` and
   * `fleet.call.origin` (`client` | `gateway`).
   */
  countBackendRefusal(backend: string, reason: string, origin: string): void;
}
