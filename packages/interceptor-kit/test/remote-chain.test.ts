/**
 * The chain scenarios of @fleet/core, run against real interceptor servers over HTTP,
 * must give the same results as the same interceptors run in process.
 */
import {
  type ChainInterceptor,
  type ChainResult,
  type InvocationOutcome,
  planChain,
  resolveService,
  runChain,
} from '@fleet/core';
import {
  checkScenario,
  descriptorOf,
  type Scenario,
  scenarios,
  verdictOf,
  waitForAudit,
} from '@fleet/core/testing';
import { describe, expect, it } from 'vitest';
import {
  createLocalChainInterceptors,
  createRemoteService,
  defineMutator,
  defineValidator,
  type Interceptor,
  type InterceptorOptions,
  type MutationVerdict,
  type ValidationVerdict,
} from '../src/index.ts';
import { defer, serveInterceptors } from './helpers.ts';

function kitInterceptors(scenario: Scenario, log: string[]): Interceptor[] {
  return scenario.interceptors.map((i) => {
    const d = descriptorOf(i) as unknown as InterceptorOptions;
    if (i.type === 'validation') {
      return defineValidator({
        ...d,
        handler: async (payload, ctx) => {
          log.push(i.name);
          return (await verdictOf(
            i.behaviour,
            payload,
            ctx.signal,
          )) as unknown as ValidationVerdict;
        },
      });
    }
    return defineMutator({
      ...d,
      handler: async (payload, ctx) => {
        log.push(i.name);
        return (await verdictOf(i.behaviour, payload, ctx.signal)) as unknown as MutationVerdict;
      },
    });
  });
}

async function run(scenario: Scenario, chain: ChainInterceptor[], log: string[]) {
  const audit: InvocationOutcome[] = [];
  const result = await runChain(
    planChain(chain, scenario.event ?? 'tools/call', scenario.phase),
    {
      payload: { name: 'echo', arguments: { text: 'hi' } },
      context: { principal: { type: 'user', id: 'u1' } },
    },
    {
      ...(scenario.chainTimeoutMs === undefined ? {} : { timeoutMs: scenario.chainTimeoutMs }),
      onAuditOutcome: (o) => audit.push(o),
    },
  );
  await waitForAudit(audit, scenario.expect.audit?.length ?? 0);
  return { result, log, audit };
}

/** The parts of a result that must not depend on the transport. */
function comparable(result: ChainResult) {
  return {
    status: result.status,
    finalPayload: result.finalPayload,
    validationSummary: result.validationSummary,
    abortedAt: result.abortedAt.map(({ interceptor, type, phase }) => ({
      interceptor,
      type,
      phase,
    })),
    results: result.results.map((r) => ({
      interceptor: r.interceptor,
      outcome: r.outcome,
      failedOpen: r.failedOpen ?? false,
      payload: r.result?.type === 'mutation' ? r.result.payload : undefined,
      valid: r.result?.type === 'validation' ? r.result.valid : undefined,
    })),
  };
}

describe('chain scenarios against remote interceptor services', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    const remoteLog: string[] = [];
    const { url } = await serveInterceptors(kitInterceptors(scenario, remoteLog));
    const service = createRemoteService({ url });
    defer(() => service.close());
    const { interceptors, rejected } = await service.list();
    expect(rejected).toEqual([]);
    const remote = await run(
      scenario,
      resolveService('svc', interceptors, service, scenario.overrides),
      remoteLog,
    );
    checkScenario(scenario, remote, expect);

    const localLog: string[] = [];
    const local = await run(
      scenario,
      createLocalChainInterceptors(kitInterceptors(scenario, localLog), {
        serviceId: 'svc',
        ...(scenario.overrides ? { overrides: scenario.overrides } : {}),
      }),
      localLog,
    );
    checkScenario(scenario, local, expect);
    expect(comparable(remote.result)).toEqual(comparable(local.result));
  });

  it('reports an unreachable service as an invocation failure that failOpen covers', async () => {
    const { url } = await serveInterceptors([
      defineValidator({
        name: 'v',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => ({ valid: true }),
      }),
    ]);
    const service = createRemoteService({ url });
    defer(() => service.close());
    const { interceptors } = await service.list();
    const dead = createRemoteService({ url: 'http://127.0.0.1:9/mcp' });
    defer(() => dead.close());
    const closed = resolveService('dead', interceptors, dead);
    const open = resolveService('dead', interceptors, dead, { v: { failOpen: true } });
    const closedResult = await runChain(planChain(closed, 'tools/call', 'request'), {
      payload: {},
    });
    expect(closedResult.status).toBe('validation_failed');
    expect(closedResult.abortedAt[0]).toMatchObject({ interceptor: 'v', type: 'invocation' });
    // What went wrong, never where the service lives (clients see this reason).
    expect(closedResult.abortedAt[0]?.reason).toBe('unreachable (ECONNREFUSED)');
    const openResult = await runChain(planChain(open, 'tools/call', 'request'), { payload: {} });
    expect(openResult.status).toBe('success');
    expect(openResult.results[0]).toMatchObject({ outcome: 'failed', failedOpen: true });
  });
});
