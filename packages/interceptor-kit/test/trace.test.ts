/**
 * With OpenTelemetry active, the server side continues the caller's trace, and the client
 * side sends the active span's context.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allow, createRemoteService, defineValidator, type HandlerContext } from '../src/index.ts';
import { defer, serveInterceptors } from './helpers.ts';

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
});

describe('trace context across the interceptor hop', () => {
  it('continues the caller trace in a server span and hands the ids to the handler', async () => {
    const seen: HandlerContext[] = [];
    const handlerSpans: Array<string | undefined> = [];
    const { url } = await serveInterceptors([
      defineValidator({
        name: 'traced',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: (_payload, ctx) => {
          seen.push(ctx);
          handlerSpans.push(trace.getActiveSpan()?.spanContext().traceId);
          return allow();
        },
      }),
    ]);
    const service = createRemoteService({ url });
    defer(() => service.close());
    const tracer = trace.getTracer('test');
    let callerTraceId = '';
    let callerSpanId = '';
    await tracer.startActiveSpan('caller', async (span) => {
      callerTraceId = span.spanContext().traceId;
      callerSpanId = span.spanContext().spanId;
      await service.invoke(
        { name: 'traced', event: 'tools/call', phase: 'request', payload: {} },
        { signal: AbortSignal.timeout(5000) },
      );
      span.end();
    });
    await provider.forceFlush();
    const server = exporter.getFinishedSpans().find((s) => s.name === 'interceptor/invoke traced');
    expect(server).toBeDefined();
    expect(server?.spanContext().traceId).toBe(callerTraceId);
    expect(server?.parentSpanContext?.spanId).toBe(callerSpanId);
    expect(server?.attributes['fleet.interceptor.name']).toBe('traced');
    expect(handlerSpans[0]).toBe(callerTraceId);
    expect(seen[0]?.context).toMatchObject({ traceId: callerTraceId, spanId: callerSpanId });
  });
});
