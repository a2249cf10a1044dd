import { parseAuditRecord } from '@fleet/audit';
import { JsonRpcCode, ProtocolError } from '@fleet/core';
import { allow, defineValidator } from '@fleet/interceptor-kit';
import { startHttpBackend } from '@fleet/test-fixtures';
import type { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/app.ts';
import { auditRecordOf } from '../src/audit.ts';
import {
  connectClient,
  defer,
  recordingLogger,
  serveInterceptors,
  startGateway,
  waitFor,
} from './harness.ts';
import { invocationSpans, pipelineForFile } from './pipeline.ts';

const pipeline = pipelineForFile({ traces: true });

/**
 * The gateway's `fleet_interceptor_duration_count` of `interceptor` by outcome (the gateway's
 * series carry the service id; a kit service's own would not).
 */
function invocationCounts(text: string, interceptor: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith('fleet_interceptor_duration_count{')) continue;
    if (!line.includes(`fleet_interceptor_name="${interceptor}"`)) continue;
    if (!line.includes('fleet_interceptor_service="')) continue;
    const outcome = /fleet_interceptor_outcome="([^"]*)"/.exec(line)?.[1] ?? '?';
    counts[outcome] = (counts[outcome] ?? 0) + Number(line.split(' ').at(-1));
  }
  return counts;
}

/** The gateway's `fleet_chain_aborts_total` caused by `interceptor` whose invocation was rejected. */
function abortCount(text: string, interceptor: string): number {
  let count = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('fleet_chain_aborts_total{')) continue;
    if (!line.includes(`fleet_interceptor_name="${interceptor}"`)) continue;
    if (line.includes('fleet_interceptor_outcome="rejected"'))
      count += Number(line.split(' ').at(-1));
  }
  return count;
}

/** A validator that refuses, with -32602, any tools/call whose arguments say `too-many`. */
const vaultGuard = defineValidator({
  name: 'vault-guard',
  hooks: [{ events: ['tools/call'], phase: 'request' }],
  handler: (payload) => {
    if (!JSON.stringify(payload).includes('too-many')) return allow();
    throw new ProtocolError(JsonRpcCode.INVALID_PARAMS, 'Invalid params: vault full', {
      name: 'vault-guard',
      reason: 'limit_exceeded',
      limit: 'vaultEntriesPerPrincipal',
      max: 1,
    });
  },
});

describe('an interceptor answering -32602', () => {
  it('is counted rejected (not failed), ends its span without ERROR, and still refuses the call with -32603', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const served = await serveInterceptors([vaultGuard]);
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${served.url}"\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    const scraped = await pipeline.scrape();
    const before = invocationCounts(scraped, 'vault-guard');
    const abortsBefore = abortCount(scraped, 'vault-guard');

    const error = await client.callTool({ name: 'echo', arguments: { text: 'too-many' } }).then(
      () => undefined,
      (e: unknown) => e as McpError,
    );
    // Fail-closed, as any invocation failure: -32603 naming the interceptor and its reason.
    expect(error?.code).toBe(-32603);
    expect(error?.data).toEqual({
      failedInterceptor: 'vault-guard',
      reason: 'limit_exceeded',
      phase: 'request',
    });

    const rescraped = await pipeline.scrape();
    const after = invocationCounts(rescraped, 'vault-guard');
    const grew = (outcome: string) => (after[outcome] ?? 0) - (before[outcome] ?? 0);
    expect(grew('rejected')).toBe(1);
    expect(grew('failed')).toBe(0);
    expect(grew('timeout')).toBe(0);
    // The abort it caused says so too, which keeps FleetChainRefusingRequests quiet.
    expect(abortCount(rescraped, 'vault-guard') - abortsBefore).toBe(1);
    expect(rescraped).toMatch(
      /fleet_chain_aborts_total\{[^}]*fleet_chain_abort_type="invocation",fleet_interceptor_name="vault-guard",fleet_interceptor_outcome="rejected"/,
    );

    // The audit record of the chain says rejected, and the worker's parse takes it.
    const execution = gateway.executions.find((e) => e.result.phase === 'request');
    if (!execution) throw new Error('no request-phase chain execution');
    const record = parseAuditRecord(auditRecordOf(execution));
    expect(record).toMatchObject({ decision: 'error', status: 'invocation_failed' });
    expect(record.interceptors).toEqual([
      expect.objectContaining({ name: 'vault-guard', outcome: 'rejected' }),
    ]);
    expect(record.abortReasons).toEqual([
      {
        interceptor: 'vault-guard',
        reason: 'limit_exceeded',
        type: 'invocation',
        phase: 'request',
      },
    ]);

    // The invocation span: outcome rejected and the code, status left unset (not ERROR).
    await pipeline.telemetry.forceFlush();
    const spans = await pipeline.receiver.waitFor(
      (all) => invocationSpans(all, 'vault-guard').length > 0,
      10_000,
    );
    const [span] = invocationSpans(spans, 'vault-guard');
    expect(span?.attributes['fleet.interceptor.outcome']).toBe('rejected');
    expect(span?.attributes['rpc.response.status_code']).toBe('-32602');
    expect(span?.attributes['error.type']).toBeUndefined();
    expect(span?.status.code).toBe(0);
  });

  it('lets the call through under failOpen, still counted rejected', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const served = await serveInterceptors([vaultGuard]);
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${served.url}"\n    overrides: {vault-guard: {failOpen: true}}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    const before = invocationCounts(await pipeline.scrape(), 'vault-guard');
    const result = await client.callTool({ name: 'echo', arguments: { text: 'too-many' } });
    expect(result.isError).toBeFalsy();
    const after = invocationCounts(await pipeline.scrape(), 'vault-guard');
    expect((after.rejected ?? 0) - (before.rejected ?? 0)).toBe(1);
    expect((after.failed ?? 0) - (before.failed ?? 0)).toBe(0);
  });
});

/** A validator on tools/call requests that allows everything. */
const allowing = (name: string) =>
  defineValidator({
    name,
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: () => allow(),
  });

/**
 * A gateway in front of a fixture backend and a kit service of the validators `kept` and
 * `dropped`, then that service redeployed on its address without `dropped`. The registry's
 * health check is a minute away: only an early rediscovery can make the chain follow in time.
 */
async function gatewayWithRedeployedService(kept: string, dropped: string) {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const first = await serveInterceptors([allowing(kept), allowing(dropped)]);
  const log = recordingLogger();
  const gateway = await startGateway(
    `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${first.url}"\n`,
    { redis: false, log, healthIntervalMs: 60_000 },
  );
  const chain = async () => {
    const res = await fetch(`${gateway.base}/admin/chain?event=tools/call&phase=request`);
    const body = (await res.json()) as { stages: Array<{ interceptors: Array<{ name: string }> }> };
    return body.stages.flatMap((stage) => stage.interceptors.map((i) => i.name)).sort();
  };
  expect(await chain()).toEqual([dropped, kept].sort());
  const client = await connectClient(gateway.mcpUrl);
  const call = () => client.callTool({ name: 'echo', arguments: { text: 'hi' } });
  expect((await call()).isError).toBeFalsy();
  await first.stop();
  await serveInterceptors([allowing(kept)], { port: first.port });
  const rediscoveries = () =>
    log.warnings.filter((w) => /rediscovering it now/.test(String(w.msg))).length;
  return { chain, call, rediscoveries };
}

describe('an interceptor its service no longer has (redeployed without it)', () => {
  it('fails the call closed, counts the invocation failed (not rejected), and rediscovers the service before its health check', async () => {
    const { chain, call, rediscoveries } = await gatewayWithRedeployedService(
      'redeploy-kept',
      'redeploy-dropped',
    );
    // The registry still lists it: the chain invokes it and the service answers -32602
    // {name, reason: "unknown_interceptor"}.
    expect(await chain()).toEqual(['redeploy-dropped', 'redeploy-kept']);
    const before = invocationCounts(await pipeline.scrape(), 'redeploy-dropped');

    const error = await call().then(
      () => undefined,
      (e: unknown) => e as McpError,
    );
    // Fail-closed: -32603 naming the interceptor, and why.
    expect(error?.code).toBe(-32603);
    expect(error?.data).toEqual({
      failedInterceptor: 'redeploy-dropped',
      reason: 'unknown_interceptor',
      phase: 'request',
    });

    // Counted failed, so FleetInterceptorInvocationsFailing and FleetChainRefusingRequests see it.
    const after = invocationCounts(await pipeline.scrape(), 'redeploy-dropped');
    const grew = (outcome: string) => (after[outcome] ?? 0) - (before[outcome] ?? 0);
    expect(grew('failed')).toBe(1);
    expect(grew('rejected')).toBe(0);

    // The invocation span: outcome failed, the code as its error type, status ERROR.
    await pipeline.telemetry.forceFlush();
    const failedSpans = (all: Parameters<typeof invocationSpans>[0]) =>
      invocationSpans(all, 'redeploy-dropped').filter(
        (s) => s.attributes['fleet.interceptor.outcome'] === 'failed',
      );
    const spans = await pipeline.receiver.waitFor((all) => failedSpans(all).length > 0, 10_000);
    const [span] = failedSpans(spans);
    expect(span?.attributes['error.type']).toBe('-32602');
    expect(span?.status.code).toBe(2);
    expect(span?.status.message).toBe('unknown_interceptor');

    // The registry follows the service well before its health check (a minute away).
    await waitFor(
      async () => (await chain()).length === 1,
      3000,
      'the chain without redeploy-dropped',
    );
    expect(await chain()).toEqual(['redeploy-kept']);
    expect(rediscoveries()).toBe(1);
    expect((await call()).isError).toBeFalsy();
  });

  it('rediscovers the service once for a burst of calls that fail this way', async () => {
    const { chain, call, rediscoveries } = await gatewayWithRedeployedService(
      'burst-kept',
      'burst-dropped',
    );
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        call().then(
          () => 'ok',
          (e: unknown) => (e as McpError).data,
        ),
      ),
    );
    // Those that ran before the chain was rebuilt failed closed; none waited for the rebuild.
    const failures = answers.filter((a) => a !== 'ok');
    expect(failures.length).toBeGreaterThan(0);
    for (const data of failures)
      expect(data).toEqual({
        failedInterceptor: 'burst-dropped',
        reason: 'unknown_interceptor',
        phase: 'request',
      });
    await waitFor(
      async () => (await chain()).length === 1,
      3000,
      'the chain without burst-dropped',
    );
    expect(rediscoveries()).toBe(1);
  });
});

describe('chain.maxAuditInFlight', () => {
  it('defaults to 1000 and must be a positive integer', () => {
    expect(parseConfig('{}').chain.maxAuditInFlight).toBe(1000);
    expect(parseConfig('chain: {maxAuditInFlight: 5}').chain.maxAuditInFlight).toBe(5);
    for (const bad of ['0', '-1', '2.5', '"many"'])
      expect(() => parseConfig(`chain: {maxAuditInFlight: ${bad}}`)).toThrow(/maxAuditInFlight/);
  });

  it('counts an audit invocation to a hung service past the bound as failed, never sends it, and sends again once one is answered', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    // An audit-mode observer that answers only when the test lets it.
    const held: Array<() => void> = [];
    const observer = defineValidator({
      name: 'hung-observer',
      mode: 'audit',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: () =>
        new Promise((resolve) => {
          held.push(() => resolve(allow()));
        }),
    });
    const served = await serveInterceptors([observer]);
    const log = recordingLogger();
    // Its own budget (60 s) outlasts the test: the service hangs rather than timing out.
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${served.url}"\n    overrides: {hung-observer: {timeoutMs: 60000}}\nchain: {auditBatchMs: 0, maxAuditInFlight: 2}\n`,
      { redis: false, log },
    );
    const client = await connectClient(gateway.mcpUrl);
    // Runs first (last registered): the gateway's close waits for requests still out.
    defer(async () => {
      for (const answer of held) answer();
    });
    const call = () => client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    const before = invocationCounts(await pipeline.scrape(), 'hung-observer');
    const grew = async (outcome: string) =>
      (invocationCounts(await pipeline.scrape(), 'hung-observer')[outcome] ?? 0) -
      (before[outcome] ?? 0);

    // Two calls: their audit invocations reach the service and hang there; the calls do not wait.
    await call();
    await call();
    await waitFor(() => held.length === 2, 5000, 'both audit invocations at the service');

    // The third finds both slots taken: counted failed at once, never sent.
    const third = await call();
    expect(third.isError).toBeFalsy();
    expect(await grew('failed')).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(held).toHaveLength(2);
    // The operator is told, naming the service and the bound.
    expect(log.warnings).toContainEqual({
      obj: expect.objectContaining({ interceptor: 'hung-observer', max: 2, times: 1 }),
      msg: expect.stringMatching(/chain\.maxAuditInFlight/),
    });

    // One answered: its slot is free and the next call's audit invocation is sent again.
    held[0]?.();
    await waitFor(
      async () => (await grew('allowed')) === 1,
      5000,
      'the answered invocation counted',
    );
    await call();
    await waitFor(() => held.length === 3, 5000, 'a new audit invocation at the service');
    expect(await grew('failed')).toBe(1);
  });
});
