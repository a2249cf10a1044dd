/**
 * Client-chosen text in a kit service's telemetry. Anyone who passes the bearer check (anyone
 * at all when no token is set) chooses an invocation's `name`, `event` and `phase`: none of
 * it may name a span, fill an attribute or an exception event, or reach a log line as it
 * was sent. A 1 MiB name used to make a 1 MiB span name, a 1 MiB attribute and a 2 MiB
 * exception event; an event made up under a wildcard hook (`tools/bob@example.com`) was
 * exported as it was.
 */
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { beforeEach, describe, expect, it } from 'vitest';
import { allow, defineValidator } from '../src/index.ts';
import { rawPost } from '../src/testing.ts';
import { inMemoryTracing, serveInterceptors, serveObserved } from './helpers.ts';

const { exporter, provider } = inMemoryTracing();
beforeEach(() => exporter.reset());

const PII = 'bob@example.com';
const MIB = 'x'.repeat(1024 * 1024);

const interceptors = [
  defineValidator({
    name: 'gate',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: () => allow(),
  }),
  // Hooked on everything: any event a client makes up reaches the handler.
  defineValidator({
    name: 'watch',
    hooks: [
      { events: ['*'], phase: 'request' },
      { events: ['*'], phase: 'response' },
    ],
    handler: (payload) => {
      const what = (payload as { what?: string } | null)?.what;
      if (what === 'crash') throw new Error(`cannot read ${'y'.repeat(10_000)}`);
      if (what === 'slow') return new Promise(() => undefined);
      return allow();
    },
  }),
];

function invoke(params: Record<string, unknown>) {
  return { jsonrpc: '2.0', id: 1, method: 'interceptor/invoke', params };
}

/** Everything a span exports as text: its name, attributes, events and status. */
function exported(span: ReadableSpan): string {
  return JSON.stringify({
    name: span.name,
    attributes: span.attributes,
    events: span.events,
    status: span.status,
  });
}

async function spans(): Promise<ReadableSpan[]> {
  await provider.forceFlush();
  return exporter.getFinishedSpans().filter((s) => s.name.startsWith('interceptor/invoke'));
}

describe('client-chosen text in the server span', () => {
  it('names an unknown interceptor `other` in the span name and attribute', async () => {
    const { url } = await serveInterceptors(interceptors);
    for (const name of [MIB, PII, 'made-up-1'])
      expect(
        (await rawPost(url, invoke({ name, event: 'tools/call', phase: 'request', payload: {} })))
          .json.error?.code,
      ).toBe(-32602);
    const all = await spans();
    expect(all.map((s) => s.name)).toEqual([
      'interceptor/invoke other',
      'interceptor/invoke other',
      'interceptor/invoke other',
    ]);
    for (const span of all) {
      expect(span.attributes['fleet.interceptor.name']).toBe('other');
      expect(exported(span).length).toBeLessThan(2000);
      expect(exported(span)).not.toContain(PII);
      expect(exported(span)).not.toContain('made-up');
    }
  });

  it.each([
    ['an MCP method under a wildcard', 'watch', 'tools/call', 'tools/call'],
    ['another MCP method under a wildcard', 'watch', 'resources/read', 'resources/read'],
    ['a server-to-client method', 'watch', 'sampling/createMessage', 'sampling/createMessage'],
    // Not in the SDK's schemas; `other` until the kit used @fleet/core's known methods.
    ['a 2026-07-28 method under a wildcard', 'watch', 'server/discover', 'server/discover'],
    ['an event a hook names', 'gate', 'tools/call', 'tools/call'],
    // Matched only through the wildcard: made up by the caller.
    ['a made-up event with PII under a wildcard', 'watch', `tools/${PII}`, 'other'],
    ['a 1 MiB made-up event under a wildcard', 'watch', `e/${MIB}`, 'other'],
    ['a made-up event under a wildcard', 'watch', 'made/up', 'other'],
    // Not hooked at all (-32602).
    ['an event no hook matches', 'gate', `tools/${PII}`, 'other'],
    ['any event of an unknown interceptor', 'other-name', `tools/${PII}`, 'other'],
  ])('shows %s as it is only when known (%s)', async (_what, name, event, shown) => {
    const { url } = await serveInterceptors(interceptors);
    await rawPost(url, invoke({ name, event, phase: 'request', payload: {} }));
    const [span] = await spans();
    expect(span?.attributes['fleet.chain.event']).toBe(shown);
    expect(exported(span as ReadableSpan).length).toBeLessThan(2000);
  });

  it('shows a phase other than request or response as `other`', async () => {
    const { url } = await serveInterceptors(interceptors);
    for (const phase of [MIB, PII, 'both'])
      await rawPost(url, invoke({ name: 'gate', event: 'tools/call', phase, payload: {} }));
    await rawPost(url, invoke({ name: 'watch', event: 'tools/call', phase: 'response' }));
    expect((await spans()).map((s) => s.attributes['fleet.chain.phase'])).toEqual([
      'other',
      'other',
      'other',
      'response',
    ]);
  });

  it('records failures without the message text or stack: a fixed message per code', async () => {
    const { url } = await serveInterceptors(interceptors);
    await rawPost(url, invoke({ name: PII, event: 'tools/call', phase: 'request', payload: {} }));
    await rawPost(
      url,
      invoke({ name: 'watch', event: 'tools/call', phase: 'request', payload: { what: 'crash' } }),
    );
    await rawPost(
      url,
      invoke({
        name: 'watch',
        event: 'tools/call',
        phase: 'request',
        payload: { what: 'slow' },
        timeoutMs: 20,
      }),
    );
    const summary = (await spans()).map((span) => ({
      status: span.status,
      exceptions: span.events.map((e) => e.attributes),
    }));
    expect(summary).toEqual([
      {
        status: { code: 2, message: 'Invalid params' },
        exceptions: [{ 'exception.type': '-32602', 'exception.message': 'Invalid params' }],
      },
      {
        status: { code: 2, message: 'Interceptor execution failed' },
        exceptions: [
          { 'exception.type': '-32603', 'exception.message': 'Interceptor execution failed' },
        ],
      },
      {
        status: { code: 2, message: 'Interceptor execution timeout' },
        exceptions: [
          { 'exception.type': '-32603', 'exception.message': 'Interceptor execution timeout' },
        ],
      },
    ]);
  });
});

describe('client-chosen text in metrics and logs (observeInvocations)', () => {
  it('labels no metric with a made-up name or event, and logs neither', async () => {
    const { url, recorded, lines } = await serveObserved(interceptors);
    for (let i = 0; i < 20; i++)
      await rawPost(url, invoke({ name: `made-up-${i}`, event: 'tools/call', phase: 'request' }));
    await rawPost(url, invoke({ name: 'gate', event: 'ev/made-up', phase: 'request' }));
    await rawPost(url, invoke({ name: 'gate', event: 'tools/call', phase: MIB }));
    await rawPost(
      url,
      invoke({
        name: 'watch',
        event: `tools/${PII}`,
        phase: 'request',
        payload: { what: 'crash' },
      }),
    );
    await rawPost(
      url,
      invoke({ name: 'watch', event: `e/${MIB}`, phase: 'response', payload: { what: 'crash' } }),
    );
    // Only the two invocations that reached a handler are recorded, by known values only.
    expect(recorded).toEqual([
      {
        interceptor: 'watch',
        outcome: 'failed',
        type: 'validation',
        mode: 'active',
        phase: 'request',
      },
      {
        interceptor: 'watch',
        outcome: 'failed',
        type: 'validation',
        mode: 'active',
        phase: 'response',
      },
    ]);
    expect(lines.map((l) => ({ event: l.obj.event, phase: l.obj.phase }))).toEqual([
      { event: 'other', phase: 'request' },
      { event: 'other', phase: 'response' },
    ]);
    // The handler's own reason is kept (documented), cut to a bounded length.
    for (const line of lines) {
      expect(String(line.obj.reason)).toMatch(/^cannot read y+… \(10012 characters\)$/);
      expect(JSON.stringify(line).length).toBeLessThan(1000);
      expect(JSON.stringify(line)).not.toContain(PII);
    }
  });
});
