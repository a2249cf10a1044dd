/**
 * With OpenTelemetry active, the server side continues the caller's trace, and the client
 * side sends the active span's context.
 */
import { JsonRpcCode, ProtocolError } from '@fleet/core';
import { trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import {
  allow,
  createRemoteService,
  defineMutator,
  defineValidator,
  deny,
  type HandlerContext,
  modified,
} from '../src/index.ts';
import { defer, inMemoryTracing, serveInterceptors } from './helpers.ts';

const { exporter, provider } = inMemoryTracing();

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
    expect(server?.attributes).toMatchObject({
      'mcp.method.name': 'interceptor/invoke',
      'fleet.interceptor.name': 'traced',
      'fleet.chain.event': 'tools/call',
      'fleet.chain.phase': 'request',
      'fleet.interceptor.type': 'validation',
      'fleet.interceptor.mode': 'active',
      'fleet.interceptor.outcome': 'allowed',
    });
    expect(server?.attributes).not.toHaveProperty('fleet.event');
    expect(server?.attributes).not.toHaveProperty('fleet.phase');
    expect(handlerSpans[0]).toBe(callerTraceId);
    expect(seen[0]?.context).toMatchObject({ traceId: callerTraceId, spanId: callerSpanId });
  });

  it('names type, mode and outcome on the server span: denied, modified, failed, rejected, timeout', async () => {
    exporter.reset();
    const { url } = await serveInterceptors([
      defineValidator({
        name: 'no',
        mode: 'audit',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => deny('no'),
      }),
      defineMutator({
        name: 'tag',
        hooks: [{ events: ['tools/call'], phase: 'response' }],
        handler: (payload) => modified({ ...(payload as object), tagged: true }),
      }),
      defineValidator({
        name: 'broken',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => {
          throw new Error('boom');
        },
      }),
      defineValidator({
        name: 'refuses',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        // As the pii-redactor refuses a payload over its engine's limits.
        handler: () => {
          throw new ProtocolError(JsonRpcCode.INVALID_PARAMS, 'Invalid params: too deep', {
            name: 'refuses',
            reason: 'limit_exceeded',
          });
        },
      }),
      defineValidator({
        name: 'sleepy',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => new Promise((resolve) => setTimeout(() => resolve(allow()), 500)),
      }),
    ]);
    const service = createRemoteService({ url });
    defer(() => service.close());
    const invoke = (name: string, phase: 'request' | 'response', timeoutMs?: number) =>
      service
        .invoke(
          { name, event: 'tools/call', phase, payload: {}, ...(timeoutMs ? { timeoutMs } : {}) },
          { signal: AbortSignal.timeout(5000) },
        )
        .catch(() => undefined);
    await invoke('no', 'request');
    await invoke('tag', 'response');
    await invoke('broken', 'request');
    await invoke('refuses', 'request');
    await invoke('made-up', 'request');
    await invoke('sleepy', 'request', 50);
    await provider.forceFlush();
    const spanOf = (name: string) =>
      exporter.getFinishedSpans().find((s) => s.name === `interceptor/invoke ${name}`);
    // [type, mode, outcome, status code] of each span.
    const summary = (name: string) => {
      const span = spanOf(name);
      return [
        span?.attributes['fleet.interceptor.type'],
        span?.attributes['fleet.interceptor.mode'],
        span?.attributes['fleet.interceptor.outcome'],
        span?.status.code,
      ];
    };
    expect(
      Object.fromEntries(
        ['no', 'tag', 'broken', 'refuses', 'other', 'sleepy'].map((n) => [n, summary(n)]),
      ),
    ).toEqual({
      no: ['validation', 'audit', 'denied', 0],
      tag: ['mutation', 'active', 'modified', 0],
      broken: ['validation', 'active', 'failed', 2],
      refuses: ['validation', 'active', 'rejected', 2],
      // The kit's own -32602 (no such interceptor) too.
      other: [undefined, undefined, 'rejected', 2],
      sleepy: ['validation', 'active', 'timeout', 2],
    });
  });
});
