/** Trace context in and out of carriers, with and without a registered SDK propagator. */
import {
  context,
  propagation,
  ROOT_CONTEXT,
  type SpanContext,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterEach, describe, expect, it } from 'vitest';
import { extractTraceContext, injectTraceHeaders } from './propagation.ts';
import { currentTraceIds } from './spans.ts';

const remote: SpanContext = {
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
  traceFlags: TraceFlags.SAMPLED,
};
const header = `00-${remote.traceId}-${remote.spanId}-01`;

afterEach(() => propagation.disable());

describe.each([
  { name: 'no propagator registered (W3C fallback)', register: () => undefined },
  {
    name: 'the W3C propagator registered globally',
    register: () => propagation.setGlobalPropagator(new W3CTraceContextPropagator()),
  },
])('with $name', ({ register }) => {
  it('injects traceparent from a context holding a span', () => {
    register();
    const ctx = trace.setSpanContext(ROOT_CONTEXT, remote);
    expect(injectTraceHeaders(ctx)).toMatchObject({ traceparent: header });
  });

  it('extracts a remote parent from node-style headers, arrays included', () => {
    register();
    expect(currentTraceIds(extractTraceContext({ traceparent: header }))).toEqual({
      traceId: remote.traceId,
      spanId: remote.spanId,
    });
    expect(currentTraceIds(extractTraceContext({ traceparent: [header] }))).toEqual({
      traceId: remote.traceId,
      spanId: remote.spanId,
    });
  });

  it('returns the base context for a missing or malformed traceparent', () => {
    register();
    expect(extractTraceContext({})).toBe(ROOT_CONTEXT);
    expect(currentTraceIds(extractTraceContext({ traceparent: '00-zz-11-01' }))).toBeUndefined();
    expect(
      currentTraceIds(
        extractTraceContext({ traceparent: `00-${'0'.repeat(32)}-${remote.spanId}-01` }),
      ),
    ).toBeUndefined();
  });

  it('injects nothing without a span', () => {
    register();
    expect(injectTraceHeaders(context.active())).toEqual({});
  });
});

describe('baggage', () => {
  it('round-trips through the fallback propagator', () => {
    const ctx = propagation.setBaggage(
      trace.setSpanContext(ROOT_CONTEXT, remote),
      propagation.createBaggage({ tenant: { value: 'acme' } }),
    );
    const headers = injectTraceHeaders(ctx);
    expect(headers.baggage).toBe('tenant=acme');
    const back = extractTraceContext(headers);
    expect(propagation.getBaggage(back)?.getEntry('tenant')?.value).toBe('acme');
  });
});
