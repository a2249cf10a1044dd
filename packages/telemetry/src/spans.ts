/**
 * Span helpers on `@opentelemetry/api` only. They follow `safeExecuteInTheMiddle`: a failure
 * of the telemetry itself is swallowed, a failure of the wrapped operation is recorded on the
 * span (exception event, status ERROR, `error.type`) and rethrown unchanged.
 */
import {
  type Attributes,
  type Context,
  context,
  INVALID_SPAN_CONTEXT,
  isSpanContextValid,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { ATTR } from './names.ts';
import type { SpanAttributesInput, TraceIds, WithSpanOptions } from './types.ts';

function definedAttributes(input: SpanAttributesInput | undefined): Attributes {
  const result: Attributes = {};
  if (!input) return result;
  for (const [key, value] of Object.entries(input)) if (value !== undefined) result[key] = value;
  return result;
}

/** Set attributes on `span`, skipping `undefined` values; never throws. */
export function safeSetAttributes(span: Span, attributes: SpanAttributesInput): void {
  try {
    span.setAttributes(definedAttributes(attributes));
  } catch {
    // Telemetry never breaks a request.
  }
}

/** A low-cardinality class for `error.type`: a string `code` if the error has one, else its name. */
function errorType(error: unknown): string {
  if (error !== null && typeof error === 'object') {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && code.length > 0) return code;
    const name = (error as { name?: unknown }).name;
    if (typeof name === 'string' && name.length > 0) return name;
  }
  return '_OTHER';
}

/**
 * Record `error` on `span`: an `exception` event, status ERROR with the error's message, and
 * `error.type`. Never throws.
 */
export function recordSpanError(span: Span, error: unknown): void {
  try {
    const message = error instanceof Error ? error.message : String(error);
    span.recordException(error instanceof Error ? error : message);
    span.setStatus({ code: SpanStatusCode.ERROR, message });
    span.setAttribute(ATTR.ERROR_TYPE, errorType(error));
  } catch {
    // Telemetry never breaks a request.
  }
}

/**
 * Run `fn` inside a new active span named `name`, and end the span when `fn` settles. If
 * `fn` throws or rejects, the error is recorded on the span and the same error is rethrown.
 * If the tracer itself fails, `fn` still runs, under a non-recording span.
 */
export async function withSpan<T>(
  tracer: Tracer,
  name: string,
  options: WithSpanOptions,
  fn: (span: Span) => T | Promise<T>,
): Promise<T> {
  const { kind = SpanKind.INTERNAL, attributes, parent = context.active() } = options;
  let span: Span;
  try {
    span = tracer.startSpan(name, { kind, attributes: definedAttributes(attributes) }, parent);
  } catch {
    span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
  }
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (error) {
    recordSpanError(span, error);
    throw error;
  } finally {
    try {
      span.end();
    } catch {
      // Telemetry never breaks a request.
    }
  }
}

/** The trace and span id of the span active in `ctx` (default: the active context), if valid. */
export function currentTraceIds(ctx: Context = context.active()): TraceIds | undefined {
  const spanContext = trace.getSpanContext(ctx);
  if (!spanContext || !isSpanContextValid(spanContext)) return undefined;
  return { traceId: spanContext.traceId, spanId: spanContext.spanId };
}
