/**
 * W3C trace context in and out of carriers (HTTP headers, `params._meta`). Uses the global
 * propagator and falls back to W3C Trace Context + Baggage when none is registered, so one
 * trace id crosses every hop whether or not an SDK is running.
 */
import {
  type Context,
  context,
  isSpanContextValid,
  propagation,
  ROOT_CONTEXT,
  trace,
} from '@opentelemetry/api';
import {
  CompositePropagator,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';

const w3c = new CompositePropagator({
  propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
});

/** A carrier to read trace context from: node's `IncomingHttpHeaders`, `params._meta`, ... */
export type TraceCarrier = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * The trace headers (`traceparent`, maybe `tracestate` and `baggage`) for an outgoing hop
 * from `ctx` (default: the active context). Empty when `ctx` holds no valid span. Never throws.
 */
export function injectTraceHeaders(ctx: Context = context.active()): Record<string, string> {
  const carrier: Record<string, string> = {};
  try {
    propagation.inject(ctx, carrier);
    const spanContext = trace.getSpanContext(ctx);
    if (!carrier.traceparent && spanContext && isSpanContextValid(spanContext)) {
      w3c.inject(ctx, carrier, {
        set: (c: Record<string, string>, key, value) => {
          c[key] = value;
        },
      });
    }
  } catch {
    // Telemetry never breaks a request.
  }
  return carrier;
}

/**
 * The context a server should continue: `base` (default ROOT) with the remote span context
 * and baggage read from `carrier`. Returns `base` unchanged when the carrier holds none or is
 * malformed. Never throws.
 */
export function extractTraceContext(carrier: TraceCarrier, base: Context = ROOT_CONTEXT): Context {
  try {
    const extracted = propagation.extract(base, carrier);
    const spanContext = trace.getSpanContext(extracted);
    if (spanContext && isSpanContextValid(spanContext)) return extracted;
    return w3c.extract(base, carrier, {
      keys: (c) => Object.keys(c),
      get: (c, key) => {
        const value = c[key];
        return typeof value === 'string' ? value : value?.[0];
      },
    });
  } catch {
    return base;
  }
}
