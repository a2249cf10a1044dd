/**
 * W3C trace context on the interceptor hop. Depends on `@opentelemetry/api` only: without
 * an SDK registered these calls are cheap no-ops, and the `traceparent` still travels
 * (built from the invocation context), so one trace id reaches every interceptor whether
 * or not spans are exported.
 */
import {
  context,
  isSpanContextValid,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { failureLabel } from './labels.ts';

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The ids of a `traceparent` header. */
export interface TraceParent {
  traceId: string;
  spanId: string;
  flags: string;
}

/** Parse a W3C `traceparent`; undefined when malformed or all-zero. */
export function parseTraceparent(value: unknown): TraceParent | undefined {
  if (typeof value !== 'string') return undefined;
  const match = TRACEPARENT.exec(value.trim().toLowerCase());
  if (!match || match[1] === 'ff') return undefined;
  const [, , traceId = '', spanId = '', flags = '00'] = match;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, flags };
}

/** Format a W3C `traceparent` (version 00). */
export function formatTraceparent(traceId: string, spanId: string, flags = '01'): string {
  return `00-${traceId}-${spanId}-${flags}`;
}

/**
 * The trace context to send on an outgoing hop: the active span's when OpenTelemetry has
 * one, else the given ids. Returns the headers to add (`traceparent`, maybe `tracestate`).
 */
export function outgoingTraceHeaders(fallback?: {
  traceId?: string | undefined;
  spanId?: string | undefined;
}): Record<string, string> {
  const carrier: Record<string, string> = {};
  const active = trace.getSpanContext(context.active());
  if (active && isSpanContextValid(active)) {
    propagation.inject(context.active(), carrier);
    if (!carrier.traceparent) {
      const flags = (active.traceFlags & 1).toString(16).padStart(2, '0');
      carrier.traceparent = formatTraceparent(active.traceId, active.spanId, flags);
    }
    return carrier;
  }
  if (fallback?.traceId && fallback.spanId) {
    const parsed = parseTraceparent(formatTraceparent(fallback.traceId, fallback.spanId));
    if (parsed) carrier.traceparent = formatTraceparent(parsed.traceId, parsed.spanId);
  }
  return carrier;
}

/** The active span's ids, if any. */
export function activeTraceIds(): { traceId: string; spanId: string } | undefined {
  const active = trace.getSpanContext(context.active());
  if (!active || !isSpanContextValid(active)) return undefined;
  return { traceId: active.traceId, spanId: active.spanId };
}

const tracer = () => trace.getTracer('@fleet/interceptor-kit');

/**
 * Run `fn` in a SERVER span that continues the caller's trace (from the `traceparent`
 * header, else `params._meta.traceparent`). A thrown error is recorded on the span as its
 * JSON-RPC code and a fixed message ({@link failureLabel}: never its own message or stack,
 * which may quote what the caller sent) and rethrown.
 */
export async function withServerSpan<T>(
  name: string,
  carrier: { traceparent?: string | undefined; tracestate?: string | undefined },
  attributes: Record<string, string>,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const headers: Record<string, string> = {};
  if (carrier.traceparent) headers.traceparent = carrier.traceparent;
  if (carrier.tracestate) headers.tracestate = carrier.tracestate;
  const parent = propagation.extract(ROOT_CONTEXT, headers);
  return tracer().startActiveSpan(
    name,
    { kind: SpanKind.SERVER, attributes },
    parent,
    async (span) => {
      try {
        return await fn(span);
      } catch (error) {
        try {
          const failure = failureLabel(error);
          span.recordException(failure);
          span.setStatus({ code: SpanStatusCode.ERROR, message: failure.message });
        } catch {
          // Telemetry never breaks a request.
        }
        throw error;
      } finally {
        span.end();
      }
    },
  );
}
