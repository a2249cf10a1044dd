/**
 * The tracer provider of a service that exports no spans (`OTEL_TRACES_EXPORTER=none`, or
 * nothing configured). Trace context must still flow through the service (its interceptor
 * calls, backend calls and audit records share the caller's trace id, and a downstream
 * service may export what this one does not), but building, timing and dropping recording
 * spans nobody reads is most of what tracing costs a request. Spans here are non-recording
 * spans with real ids: a new span id each, the parent's trace id (or a new one), and the
 * sampled flag the configured sampler decides, so downstream sampling is unchanged.
 */
import {
  type Context,
  context,
  INVALID_SPAN_CONTEXT,
  SamplingDecision,
  type Span,
  SpanKind,
  type SpanOptions,
  TraceFlags,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';
import { isTracingSuppressed } from '@opentelemetry/core';
import { RandomIdGenerator, type Sampler } from '@opentelemetry/sdk-trace';

const NO_ATTRIBUTES = Object.freeze({});

class UnrecordedTracer implements Tracer {
  readonly #sampler: Sampler;
  readonly #ids = new RandomIdGenerator();

  constructor(sampler: Sampler) {
    this.#sampler = sampler;
  }

  startSpan(name: string, options: SpanOptions = {}, parent: Context = context.active()): Span {
    const ctx = options.root ? trace.deleteSpan(parent) : parent;
    if (isTracingSuppressed(ctx)) return trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
    const parentContext = trace.getSpanContext(ctx);
    const valid = parentContext !== undefined && trace.isSpanContextValid(parentContext);
    const traceId = valid ? parentContext.traceId : this.#ids.generateTraceId();
    const sampling = this.#sampler.shouldSample(
      ctx,
      traceId,
      name,
      options.kind ?? SpanKind.INTERNAL,
      options.attributes ?? NO_ATTRIBUTES,
      options.links ?? [],
    );
    const traceState = sampling.traceState ?? (valid ? parentContext.traceState : undefined);
    return trace.wrapSpanContext({
      traceId,
      spanId: this.#ids.generateSpanId(),
      traceFlags:
        sampling.decision === SamplingDecision.RECORD_AND_SAMPLED
          ? TraceFlags.SAMPLED
          : TraceFlags.NONE,
      ...(traceState === undefined ? {} : { traceState }),
    });
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    parent: Context,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    ...rest: [F] | [SpanOptions, F] | [SpanOptions, Context, F]
  ): ReturnType<F> {
    const fn = rest[rest.length - 1] as F;
    const options = (rest.length > 1 ? rest[0] : {}) as SpanOptions;
    const parent = rest.length > 2 ? (rest[1] as Context) : context.active();
    const span = this.startSpan(name, options, parent);
    return context.with(
      trace.setSpan(parent, span),
      fn as (span: Span) => ReturnType<F>,
      undefined,
      span,
    );
  }
}

/** A tracer provider whose spans carry trace context but record nothing. */
export class UnrecordedTracerProvider implements TracerProvider {
  readonly #tracer: UnrecordedTracer;

  constructor(sampler: Sampler) {
    this.#tracer = new UnrecordedTracer(sampler);
  }

  getTracer(): Tracer {
    return this.#tracer;
  }

  /** Nothing is buffered. */
  forceFlush(_options?: { timeoutMillis?: number }): Promise<void> {
    return Promise.resolve();
  }

  /** Nothing to release. */
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}
