/**
 * withSpan and friends against a real SDK tracer provider with an in-memory exporter, and
 * against the bare API (no SDK registered), where they must stay harmless.
 */
import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { currentTraceIds, recordSpanError, safeSetAttributes, withSpan } from './spans.ts';

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const tracer = provider.getTracer('spans-test');

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
afterEach(() => exporter.reset());
afterAll(async () => {
  await provider.shutdown();
  context.disable();
});

class BackendError extends Error {
  readonly code = 'BACKEND_UNAVAILABLE';
}

describe('withSpan', () => {
  it('returns the result and ends the span with its kind and defined attributes', async () => {
    const result = await withSpan(
      tracer,
      'op',
      { kind: SpanKind.CLIENT, attributes: { a: 'x', n: 2, gone: undefined } },
      async () => 'value',
    );
    expect(result).toBe('value');
    const [span] = exporter.getFinishedSpans();
    expect(span?.name).toBe('op');
    expect(span?.kind).toBe(SpanKind.CLIENT);
    expect(span?.attributes).toEqual({ a: 'x', n: 2 });
    expect(span?.status.code).toBe(SpanStatusCode.UNSET);
    expect(span?.ended).toBe(true);
  });

  it('rejects with the same error object, recorded on the span as ERROR', async () => {
    const failure = new BackendError('backend down');
    const caught = await withSpan(tracer, 'op', {}, async () => {
      throw failure;
    }).catch((error: unknown) => error);
    expect(caught).toBe(failure);
    const [span] = exporter.getFinishedSpans();
    expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'backend down' });
    expect(span?.attributes['error.type']).toBe('BACKEND_UNAVAILABLE');
    expect(span?.events.map((e) => e.name)).toEqual(['exception']);
    expect(span?.events[0]?.attributes).toMatchObject({
      'exception.message': 'backend down',
      'exception.type': 'BACKEND_UNAVAILABLE',
    });
  });

  it('also catches a synchronous throw and rethrows a non-Error value unchanged', async () => {
    const thrown = { reason: 'plain object' };
    await expect(
      withSpan(tracer, 'sync', {}, () => {
        throw thrown;
      }),
    ).rejects.toBe(thrown);
    const [span] = exporter.getFinishedSpans();
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    expect(span?.attributes['error.type']).toBe('_OTHER');
  });

  it('makes the span active inside fn and nests children under it', async () => {
    let outer: ReturnType<typeof currentTraceIds>;
    let inner: ReturnType<typeof currentTraceIds>;
    await withSpan(tracer, 'outer', {}, async (span) => {
      outer = currentTraceIds();
      expect(outer?.spanId).toBe(span.spanContext().spanId);
      await withSpan(tracer, 'inner', {}, async () => {
        await new Promise((resolve) => setTimeout(resolve, 1));
        inner = currentTraceIds();
      });
    });
    const spans = exporter.getFinishedSpans();
    const innerSpan = spans.find((s) => s.name === 'inner');
    expect(inner?.traceId).toBe(outer?.traceId);
    expect(innerSpan?.parentSpanContext?.spanId).toBe(outer?.spanId);
    expect(currentTraceIds()).toBeUndefined();
  });

  it('starts under an explicit parent context instead of the active one', async () => {
    await withSpan(tracer, 'ignored-parent', {}, async () => {
      await withSpan(tracer, 'root', { parent: ROOT_CONTEXT }, () => undefined);
    });
    const root = exporter.getFinishedSpans().find((s) => s.name === 'root');
    expect(root?.parentSpanContext).toBeUndefined();
  });

  it('runs fn even when the tracer itself throws', async () => {
    const broken = {
      startSpan: () => {
        throw new Error('tracer broke');
      },
      startActiveSpan: () => {
        throw new Error('tracer broke');
      },
    } as unknown as Parameters<typeof withSpan>[0];
    await expect(withSpan(broken, 'x', {}, () => 'still ran')).resolves.toBe('still ran');
  });

  it('works against the bare API with no SDK registered', async () => {
    const result = await withSpan(trace.getTracer('no-sdk'), 'x', {}, (span) => {
      expect(span.isRecording()).toBe(false);
      return 7;
    });
    expect(result).toBe(7);
  });
});

describe('safeSetAttributes and recordSpanError', () => {
  it('skip undefined values and never throw, even on an ended span', () => {
    const span = tracer.startSpan('attrs');
    safeSetAttributes(span, { kept: 'yes', dropped: undefined });
    span.end();
    expect(() => safeSetAttributes(span, { late: 1 })).not.toThrow();
    expect(() => recordSpanError(span, new Error('late'))).not.toThrow();
    expect(exporter.getFinishedSpans()[0]?.attributes).toEqual({ kept: 'yes' });
  });
});

describe('currentTraceIds', () => {
  it('is undefined outside a span and for an invalid span context', () => {
    expect(currentTraceIds()).toBeUndefined();
    expect(
      currentTraceIds(
        trace.setSpanContext(ROOT_CONTEXT, {
          traceId: '0'.repeat(32),
          spanId: '0'.repeat(16),
          traceFlags: 1,
        }),
      ),
    ).toBeUndefined();
  });
});
