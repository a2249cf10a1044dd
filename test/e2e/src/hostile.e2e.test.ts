/**
 * Hostile payloads against every interceptor service of the real fleet (processes, Redis,
 * PostgreSQL): for each interceptor each service lists, and each event and phase it hooks,
 * fast-check sends arbitrary JSON payloads, huge strings, invalid UTF-16, deep nesting and
 * hostile contexts through `interceptor/invoke`. Every answer is a well-formed result for the
 * interceptor's type or a specific JSON-RPC error (never an internal error, never silence);
 * no process dies; each service still answers a good invocation afterwards.
 */
import {
  type InterceptorInfo,
  type InvokeParams,
  ProtocolError,
  parseInvokeResult,
} from '@fleet/core';
import { createRemoteService, type RemoteService } from '@fleet/interceptor-kit';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type E2eFleet, startE2eFleet } from './fleet.ts';

const SERVICES = ['pii-redactor', 'policy-validator', 'audit-logger'] as const;

let e2e: E2eFleet;
const remotes = new Map<string, { remote: RemoteService; interceptors: InterceptorInfo[] }>();

beforeAll(async () => {
  e2e = await startE2eFleet({ postgres: true });
  for (const service of SERVICES) {
    const remote = createRemoteService({
      url: `${e2e.fleet.urls[service]}/mcp`,
      token: e2e.fleet.fleetToken,
    });
    const { interceptors } = await remote.list();
    expect(interceptors.length).toBeGreaterThan(0);
    remotes.set(service, { remote, interceptors });
  }
}, 180_000);

afterAll(async () => {
  for (const { remote } of remotes.values()) await remote.close();
  await e2e?.stop();
}, 60_000);

/** Every (interceptor, event, phase) a service hooks, with `*` standing for tools/call. */
function targets(interceptors: InterceptorInfo[]) {
  return interceptors.flatMap((i) =>
    i.hooks.flatMap((h) =>
      h.events.map((event) => ({
        info: i,
        event: event.includes('*') ? 'tools/call' : event,
        phase: h.phase,
      })),
    ),
  );
}

const deep = (depth: number): unknown => JSON.parse(deepText(depth));

/** `depth` levels of `{"a":[...]}` as JSON text (too deep for a recursive JSON.stringify). */
const deepText = (depth: number): string => `${'{"a":['.repeat(depth)}"leaf"${']}'.repeat(depth)}`;

/** Payloads a hostile or broken peer could send: any JSON, and the nasty corners of it. */
const payloads: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc.record({ name: fc.string(), arguments: fc.jsonValue({ maxDepth: 3 }) }),
  fc.record({
    content: fc.array(
      fc.record({
        type: fc.constantFrom('text', 'image', 42),
        text: fc.string({ unit: 'binary' }),
      }),
      { maxLength: 3 },
    ),
  }),
  // Lone surrogates, control characters and long runs inside otherwise plausible arguments.
  fc
    .string({ unit: 'binary', maxLength: 64 })
    .map((s) => ({ name: 'echo', arguments: { text: `${s}\ud800${s}\u0000`.repeat(50) } })),
  fc.constantFrom(
    { name: 'echo', arguments: deep(40) },
    JSON.parse(
      '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}',
    ),
  ),
);

const contexts: fc.Arbitrary<Record<string, unknown>> = fc.record({
  timestamp: fc.constantFrom(new Date().toISOString(), 'not a date'),
  principal: fc.oneof(
    fc.record({ type: fc.constantFrom('user', 'service'), id: fc.string({ maxLength: 40 }) }),
    fc.constant({ type: 'user', id: 'x'.repeat(10_000) }),
  ),
  sessionId: fc.string({ maxLength: 40 }),
});

async function expectAnswered(
  remote: RemoteService,
  info: InterceptorInfo,
  params: InvokeParams,
): Promise<void> {
  try {
    const raw = await remote.invoke(params, { signal: AbortSignal.timeout(20_000) });
    // A result must be one the chain engine accepts for this interceptor.
    parseInvokeResult(raw, {
      interceptor: info.name,
      type: info.type,
      phase: params.phase,
      payload: params.payload,
    });
  } catch (error) {
    // Refusing hostile input is fine; failing on it is not.
    expect(error).toBeInstanceOf(ProtocolError);
    const { code, message } = error as ProtocolError;
    expect(code).not.toBe(-32603);
    expect(message.length).toBeGreaterThan(0);
  }
}

describe.each(SERVICES)('%s under hostile payloads', (service) => {
  it('answers every hostile invocation with a result or a specific error, and keeps serving', async () => {
    const entry = remotes.get(service);
    if (!entry) throw new Error(`${service} not started`);
    const { remote, interceptors } = entry;
    const all = targets(interceptors);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...all),
        payloads,
        contexts,
        async ({ info, event, phase }, payload, context) => {
          await expectAnswered(remote, info, {
            name: info.name,
            event,
            phase,
            payload,
            context: context as InvokeParams['context'],
            timeoutMs: 10_000,
          });
        },
      ),
      { numRuns: 40 },
    );
    // Still alive and still right: a plain invocation of each interceptor succeeds.
    const health = await fetch(`${e2e.fleet.urls[service]}/healthz`);
    expect(health.status).toBe(200);
    for (const { info, event, phase } of all) {
      const raw = await remote.invoke(
        {
          name: info.name,
          event,
          phase,
          payload:
            phase === 'request'
              ? { name: 'echo', arguments: { text: 'hello' } }
              : { content: [{ type: 'text', text: 'hello' }] },
          context: { timestamp: new Date().toISOString(), principal: { type: 'user', id: 'a' } },
        },
        { signal: AbortSignal.timeout(10_000) },
      );
      expect(raw).toBeTypeOf('object');
    }
  }, 240_000);

  it('answers 10,000-deep nesting and multi-megabyte strings with a result or a specific error', async () => {
    const entry = remotes.get(service);
    if (!entry) throw new Error(`${service} not started`);
    const { info, event, phase } = targets(entry.interceptors)[0] ?? {};
    if (!info) throw new Error(`${service} lists no interceptor`);
    const bodies = [
      deepText(10_000),
      JSON.stringify({ name: 'echo', arguments: { text: 'x'.repeat(2 * 1024 * 1024) } }),
      JSON.stringify({ name: 'echo', arguments: { text: '\u00e9'.repeat(500_000) } }),
    ];
    for (const payload of bodies) {
      const body = `{"jsonrpc":"2.0","id":1,"method":"interceptor/invoke","params":{"name":${JSON.stringify(info.name)},"event":"${event}","phase":"${phase}","context":{"timestamp":"${new Date().toISOString()}"},"payload":${payload}}}`;
      const res = await fetch(`${e2e.fleet.urls[service]}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${e2e.fleet.fleetToken}`,
        },
        body,
      });
      const reply = (await res.json()) as {
        result?: unknown;
        error?: { code: number; message: string };
      };
      if (reply.error) {
        expect(reply.error.code).not.toBe(-32603);
        expect(reply.error.message.length).toBeGreaterThan(0);
      } else expect(reply.result).toBeTypeOf('object');
    }
    expect((await fetch(`${e2e.fleet.urls[service]}/healthz`)).status).toBe(200);
  }, 120_000);
});
