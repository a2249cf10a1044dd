/**
 * @fleet/telemetry: the OpenTelemetry bootstrap of a fleet service (traces over OTLP/HTTP,
 * metrics in Prometheus text, W3C trace context always propagated), the one table of span,
 * attribute, metric and queue names, and span, metric and propagation helpers.
 */

export { createFleetMetrics, DURATION_BUCKETS_MS } from './metrics.ts';
export type { FleetAttributeName, FleetMetricName } from './names.ts';
export {
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
export type { TraceCarrier } from './propagation.ts';
export { extractTraceContext, injectTraceHeaders } from './propagation.ts';
export { GC_DURATION_BUCKETS_S } from './runtime.ts';
export { currentTraceIds, recordSpanError, safeSetAttributes, withSpan } from './spans.ts';
export { DEFAULT_OTLP_TRACES_URL, startTelemetry, telemetryOptionsFromEnv } from './telemetry.ts';
export type {
  AbortMetricAttributes,
  BackendMetricAttributes,
  ChainMetricAttributes,
  FleetMetrics,
  InstrumentationName,
  InterceptorMetricAttributes,
  NodeRequestHandler,
  RequestMetricAttributes,
  RuntimeMetricsOptions,
  SamplerName,
  SpanAttributesInput,
  Telemetry,
  TelemetryEnvDefaults,
  TelemetryLogger,
  TelemetryOptions,
  TraceExporterName,
  TraceIds,
  TracesOptions,
  WithSpanOptions,
} from './types.ts';
