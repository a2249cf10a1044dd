import { allow, defineMutator, defineValidator, deny, modified } from '@fleet/interceptor-kit';
import type { ReceivedSpan } from '@fleet/telemetry/testing';
import { startHttpBackend } from '@fleet/test-fixtures';
import { beforeEach, describe, expect, it } from 'vitest';
import { connectClient, defer, serveInterceptors, startGateway } from './harness.ts';
import { startMirrorBackend } from './mirror-backend.ts';
import { invocationSpans, pipelineForFile } from './pipeline.ts';

const pipeline = pipelineForFile({ traces: true });

beforeEach(() => pipeline.receiver.clear());

/** Every span received once one SERVER span of the gateway has ended with `predicate`. */
async function spansWhen(predicate: (spans: readonly ReceivedSpan[]) => boolean) {
  await pipeline.telemetry.forceFlush();
  return pipeline.receiver.waitFor(predicate, 10_000);
}

/** Every string in a span: its name, attribute values, status message, event attributes. */
function textsOf(span: ReceivedSpan): string[] {
  const texts = [span.name, span.status.message ?? ''];
  const add = (attributes: Record<string, unknown>) => {
    for (const value of Object.values(attributes)) texts.push(JSON.stringify(value));
  };
  add(span.attributes);
  for (const event of span.events) add(event.attributes);
  return texts;
}

/** The gateway's SERVER span of one MCP request (the kit's SERVER spans share the process). */
function isGatewayServer(span: ReceivedSpan): boolean {
  return span.kind === 2 && span.scopeName === '@fleet/orchestrator';
}

const EMAIL = 'ada.lovelace@example.com';
const CARD = '4111111111111111';

describe('gateway spans: client-chosen text is scrubbed', () => {
  it('never puts a raw email or card number from a tool name or resource URI in a span', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const served = await serveInterceptors([
      defineValidator({
        name: 'watch',
        hooks: [{ events: ['*'], phase: 'request' }],
        handler: () => allow(),
      }),
    ]);
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${served.url}"\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    const uri = `file:///home/${EMAIL}/card-${CARD}.txt`;
    await client.readResource({ uri }).catch(() => undefined);
    await client.callTool({ name: EMAIL, arguments: {} }).catch(() => undefined);
    await client.getPrompt({ name: `prompt ${EMAIL}` }).catch(() => undefined);

    const spans = await spansWhen((all) => all.filter(isGatewayServer).length >= 3);
    const server = spans.filter(isGatewayServer);
    const read = server.find((s) => s.attributes['mcp.method.name'] === 'resources/read');
    expect(read?.attributes['mcp.resource.uri']).toBe(
      'file:///home/[EMAIL_ADDRESS]/card-[CREDIT_CARD].txt',
    );
    // Named `{method} {target}` (mcpSpanName), with the scrubbed target.
    expect(read?.name).toBe('resources/read file:///home/[EMAIL_ADDRESS]/card-[CREDIT_CARD].txt');
    const call = server.find((s) => s.attributes['mcp.method.name'] === 'tools/call');
    expect(call?.attributes['mcp.tool.name']).toBe('[EMAIL_ADDRESS]');
    const prompt = server.find((s) => s.attributes['mcp.method.name'] === 'prompts/get');
    expect(prompt?.attributes['mcp.prompt.name']).toBe('prompt [EMAIL_ADDRESS]');
    // Nowhere else either: span names, error messages, exception events, child spans.
    for (const span of spans) {
      for (const text of textsOf(span)) {
        expect(text).not.toContain(EMAIL);
        expect(text).not.toContain(CARD);
      }
    }
  });
});

describe('gateway spans: interceptor invocations', () => {
  it('carry name, type, mode and outcome on each CLIENT span', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const served = await serveInterceptors([
      defineValidator({
        name: 'watch',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => allow(),
      }),
      defineValidator({
        name: 'tap',
        mode: 'audit',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => allow(),
      }),
      defineMutator({
        name: 'tag',
        hooks: [{ events: ['tools/call'], phase: 'response' }],
        handler: (payload) => modified({ ...(payload as object), tagged: true }),
      }),
    ]);
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${served.url}"\nchain: {auditBatchMs: 1}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    const spans = await spansWhen((all) =>
      ['watch', 'tap', 'tag'].every((name) => invocationSpans(all, name).length > 0),
    );
    const attributesOf = (name: string) => {
      const { attributes, status } = invocationSpans(spans, name)[0] as ReceivedSpan;
      return {
        type: attributes['fleet.interceptor.type'],
        mode: attributes['fleet.interceptor.mode'],
        outcome: attributes['fleet.interceptor.outcome'],
        status: status.code,
      };
    };
    // Names from the table: `{method} {target}`, `fleet.chain {phase} {stage}`,
    // `interceptor/invoke {name}`.
    const root = spans.find(
      (s) => isGatewayServer(s) && s.attributes['mcp.method.name'] === 'tools/call',
    );
    expect(root?.name).toBe('tools/call echo');
    const stages = spans.filter((s) => s.scopeName === '@fleet/orchestrator' && s.kind === 1);
    expect(stages.map((s) => s.name).sort()).toEqual([
      'fleet.chain request validators',
      'fleet.chain response mutators',
    ]);
    expect(invocationSpans(spans, 'watch')[0]?.name).toBe('interceptor/invoke watch');
    expect(invocationSpans(spans, 'watch')[0]?.parentSpanId).toBe(
      stages.find((s) => s.name === 'fleet.chain request validators')?.spanId,
    );
    expect(attributesOf('watch')).toEqual({
      type: 'validation',
      mode: 'active',
      outcome: 'allowed',
      status: 0,
    });
    expect(attributesOf('tap')).toEqual({
      type: 'validation',
      mode: 'audit',
      outcome: 'allowed',
      status: 0,
    });
    expect(attributesOf('tag')).toEqual({
      type: 'mutation',
      mode: 'active',
      outcome: 'modified',
      status: 0,
    });
  });

  it('ends a timed-out invocation with the chain’s outcome, not the late answer', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const served = await serveInterceptors([
      defineValidator({
        name: 'slowpoke',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => {
          // Busy, not waiting: the service's own timer cannot fire either, so it answers
          // "allowed" just after the chain stopped waiting for it.
          const until = performance.now() + 150;
          while (performance.now() < until);
          return allow();
        },
      }),
    ]);
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${served.url}"\n    overrides: {slowpoke: {timeoutMs: 50, failOpen: true}}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    const outcome = gateway.executions.find((e) => e.result.phase === 'request')?.result.results[0];
    expect(outcome).toMatchObject({ interceptor: 'slowpoke', outcome: 'timeout' });
    const spans = await spansWhen((all) => invocationSpans(all, 'slowpoke').length > 0);
    // Give the late answer time to arrive: it must not change the span.
    await new Promise((r) => setTimeout(r, 100));
    const [span] = invocationSpans(spans, 'slowpoke');
    expect(span?.attributes['fleet.interceptor.outcome']).toBe('timeout');
    expect(span?.attributes['fleet.interceptor.type']).toBe('validation');
    expect(span?.status.code).toBe(2);
  });
});

/** The Prometheus sample lines of `metric` whose labels include every one of `labels`. */
function samples(text: string, metric: string, labels: Record<string, string>): string[] {
  return text
    .split('\n')
    .filter(
      (line) =>
        line.startsWith(`${metric}{`) &&
        Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)),
    );
}

/** The sum of the sample values of Prometheus `lines`. */
function sum(lines: string[]): number {
  return lines.reduce((total, line) => total + Number(line.split(' ').at(-1)), 0);
}

describe('gateway metrics and request status', () => {
  it('counts a denial as denied (not error), tells an invocation failure from a denial, and labels aborts from the names table', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const served = await serveInterceptors([
      defineValidator({
        name: 'metrics-guard',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: (payload) =>
          JSON.stringify(payload).includes('forbidden') ? deny('forbidden word') : allow(),
      }),
      defineValidator({
        name: 'metrics-broken',
        hooks: [{ events: ['prompts/get'], phase: 'request' }],
        handler: () => {
          throw new Error('boom');
        },
      }),
    ]);
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${served.url}"\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    const before = await pipeline.scrape();
    await expect(
      client.callTool({ name: 'echo', arguments: { text: 'forbidden' } }),
    ).rejects.toMatchObject({ code: -32602 });
    await expect(client.getPrompt({ name: 'plain' })).rejects.toMatchObject({ code: -32603 });
    const text = await pipeline.scrape();
    /** How much `metric` (summed over lines with `labels`) grew during the two calls. */
    const grew = (metric: string, labels: Record<string, string>) =>
      sum(samples(text, metric, labels)) - sum(samples(before, metric, labels));

    const request = 'fleet_request_duration_count';
    expect(grew(request, { mcp_method_name: 'tools/call', fleet_request_status: 'denied' })).toBe(
      1,
    );
    expect(grew(request, { mcp_method_name: 'tools/call', fleet_request_status: 'error' })).toBe(0);
    expect(
      grew(request, {
        mcp_method_name: 'prompts/get',
        fleet_request_status: 'error',
        error_type: '-32603',
      }),
    ).toBe(1);
    const chain = 'fleet_chain_duration_count';
    expect(
      grew(chain, { fleet_chain_event: 'tools/call', fleet_chain_status: 'validation_failed' }),
    ).toBe(1);
    expect(
      grew(chain, { fleet_chain_event: 'prompts/get', fleet_chain_status: 'invocation_failed' }),
    ).toBe(1);
    expect(
      grew(chain, { fleet_chain_event: 'prompts/get', fleet_chain_status: 'validation_failed' }),
    ).toBe(0);
    const aborts = 'fleet_chain_aborts_total';
    expect(
      grew(aborts, {
        fleet_chain_abort_type: 'validation',
        fleet_interceptor_name: 'metrics-guard',
        fleet_chain_phase: 'request',
      }),
    ).toBe(1);
    expect(
      grew(aborts, {
        fleet_chain_abort_type: 'invocation',
        fleet_interceptor_name: 'metrics-broken',
        fleet_chain_phase: 'request',
      }),
    ).toBe(1);
    expect(text).not.toMatch(/fleet_chain_aborts_total\{[^}]*\btype=/);
    // The documented buckets (@fleet/telemetry DURATION_BUCKETS_MS), on every histogram.
    for (const le of ['0.1', '2.5', '10000', '30000'])
      expect(samples(text, 'fleet_request_duration_bucket', { le })).not.toEqual([]);
    expect(samples(text, 'fleet_request_duration_bucket', { le: '2' })).toEqual([]);

    // The denial's SERVER span says so, without an exception event. This session's spans
    // only: a span of an earlier test's gateway may still arrive after the receiver is cleared.
    const sessionId = client.transport?.sessionId;
    expect(sessionId).toBeTypeOf('string');
    const ours = (s: ReceivedSpan, method: string) =>
      isGatewayServer(s) &&
      s.attributes['mcp.session.id'] === sessionId &&
      s.attributes['mcp.method.name'] === method;
    const spans = await spansWhen(
      (all) => all.some((s) => ours(s, 'tools/call')) && all.some((s) => ours(s, 'prompts/get')),
    );
    const denied = spans.find((s) => ours(s, 'tools/call'));
    expect(denied?.attributes['fleet.request.status']).toBe('denied');
    expect(denied?.attributes['rpc.response.status_code']).toBe('-32602');
    expect(denied?.events.filter((e) => e.name === 'exception')).toEqual([]);
    const failed = spans.find((s) => ours(s, 'prompts/get'));
    expect(failed?.attributes['fleet.request.status']).toBe('error');
    expect(failed?.status.code).toBe(2);
  });
});

describe('trace context to backends', () => {
  it('replaces a forwarded params._meta.traceparent with the gateway’s backend span', async () => {
    const backend = await startMirrorBackend();
    const gateway = await startGateway(`backends:\n  - {id: mirror, url: "${backend.url}"}\n`, {
      redis: false,
    });
    const client = await connectClient(gateway.mcpUrl);
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const clientSpan = '00f067aa0ba902b7';
    await client.callTool({
      name: 'meta',
      arguments: {},
      _meta: { traceparent: `00-${traceId}-${clientSpan}-01`, tracestate: 'vendor=1' },
    });
    const spans = await spansWhen((all) =>
      all.some((s) => s.kind === 3 && s.name === 'tools/call mirror'),
    );
    const backendSpan = spans.find((s) => s.kind === 3 && s.name === 'tools/call mirror');
    expect(backendSpan?.traceId).toBe(traceId);
    const meta = backend.calls.find((c) => c.name === 'meta')?.meta;
    // The backend's parent is the gateway's CLIENT span, as the HTTP header says, not the
    // client's own span (which the gateway's SERVER span is a child of).
    expect(meta?.traceparent).toBe(`00-${traceId}-${backendSpan?.spanId}-01`);
    expect(meta?.tracestate).toBe('vendor=1');
  });
});
