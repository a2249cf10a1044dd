import { describe, expect, it } from 'vitest';
import {
  checkScenario,
  descriptorOf,
  scenarios,
  verdictOf,
  waitForAudit,
} from '../test/scenarios.ts';
import {
  AUDIT_OVERLOADED,
  batchItemError,
  type ChainInterceptor,
  type ChainResult,
  chainAbortToError,
  createInFlightLimit,
  type InvocationOutcome,
  InvokeErrorReason,
  type Invoker,
  isFailureOutcome,
  ProtocolError,
  parseInterceptorInfo,
  planChain,
  resolveService,
  runChain,
} from './index.ts';

type Scenario = (typeof scenarios)[number];

function buildChain(scenario: Scenario, log: string[]): ChainInterceptor[] {
  return scenario.interceptors.flatMap((i) => {
    const invoker: Invoker = {
      async invoke(params, { signal }) {
        log.push(params.name);
        const verdict = await verdictOf(i.behaviour, params.payload, signal);
        return { interceptor: params.name, type: i.type, phase: params.phase, ...verdict };
      },
    };
    return resolveService(
      'svc',
      [parseInterceptorInfo(descriptorOf(i))],
      invoker,
      scenario.overrides,
    );
  });
}

/** Run a scenario's chain in process; `log` lists every invocation in start order. */
/** One audit-mode validator, `observer`, on every request, invoked through `invoker`. */
function auditObserver(invoker: Invoker): ChainInterceptor[] {
  return resolveService(
    'svc',
    [
      parseInterceptorInfo({
        name: 'observer',
        type: 'validation',
        mode: 'audit',
        hooks: [{ events: ['*'], phase: 'request' }],
      }),
    ],
    invoker,
  );
}

async function runScenario(scenario: Scenario, speculativeMutators: boolean) {
  const log: string[] = [];
  const audit: InvocationOutcome[] = [];
  const plan = planChain(buildChain(scenario, log), scenario.event ?? 'tools/call', scenario.phase);
  const result = await runChain(
    plan,
    { payload: { name: 'echo', arguments: { text: 'hi' } } },
    {
      ...(scenario.chainTimeoutMs === undefined ? {} : { timeoutMs: scenario.chainTimeoutMs }),
      onAuditOutcome: (o) => audit.push(o),
      speculativeMutators,
    },
  );
  await waitForAudit(audit, scenario.expect.audit?.length ?? 0);
  return { result, log, audit };
}

describe('runChain (in process)', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    checkScenario(scenario, await runScenario(scenario, false), expect);
  });

  it.each(scenarios.map((s) => [s.name, s] as const))(
    '%s, with speculative mutators',
    async (_name, scenario) => {
      const run = await runScenario(scenario, true);
      // Same decision, results and aborts as in order; the mutators may also have been
      // invoked for a request that ends up denied (discarded), and start with the validators.
      const { invoked, ...rest } = scenario.expect;
      checkScenario({ ...scenario, expect: rest }, run, expect);
      if (invoked !== undefined) {
        expect(run.result.results.map((r) => r.interceptor)).toEqual(invoked);
        for (const name of invoked) expect(run.log).toContain(name);
      }
    },
  );

  describe('speculative mutators', () => {
    const hook = [{ events: ['tools/call'], phase: 'request' }];
    /** The `tools/call` request-phase plan of one service's interceptors. */
    const planOf = (invoker: Invoker, descriptors: Array<Record<string, unknown>>) =>
      planChain(
        resolveService('svc', descriptors.map(parseInterceptorInfo), invoker),
        'tools/call',
        'request',
      );
    /** A validator that answers only once the mutator has been invoked (or a budget ends). */
    function chainOf(options: { valid: boolean; mutatorFails?: boolean }) {
      let mutatorInvoked!: () => void;
      const mutatorStarted = new Promise<void>((resolve) => {
        mutatorInvoked = resolve;
      });
      const log: string[] = [];
      const invoker: Invoker = {
        async invoke(params) {
          log.push(params.name);
          if (params.name === 'guard') {
            await mutatorStarted;
            log.push('guard answers');
            return {
              interceptor: 'guard',
              type: 'validation',
              phase: 'request',
              valid: options.valid,
              ...(options.valid ? {} : { messages: [{ severity: 'error', message: 'no' }] }),
            };
          }
          mutatorInvoked();
          if (options.mutatorFails) throw new Error('mutator broke');
          const payload = params.payload as Record<string, unknown>;
          return {
            interceptor: 'tagger',
            type: 'mutation',
            phase: 'request',
            modified: true,
            payload: { ...payload, tagged: true },
          };
        },
      };
      const plan = planOf(invoker, [
        { name: 'guard', type: 'validation', hooks: hook },
        { name: 'tagger', type: 'mutation', hooks: hook },
      ]);
      return { plan, log };
    }

    it('start the mutators with the validators and apply them when the validators pass', async () => {
      const { plan, log } = chainOf({ valid: true });
      const result = await runChain(
        plan,
        { payload: { name: 'echo' } },
        { speculativeMutators: true, timeoutMs: 2000 },
      );
      // In order, the validator would wait for a mutator that only starts after it.
      expect(log).toEqual(['guard', 'tagger', 'guard answers']);
      expect(result.status).toBe('success');
      expect(result.finalPayload).toEqual({ name: 'echo', tagged: true });
      expect(result.results.map((r) => [r.interceptor, r.outcome])).toEqual([
        ['guard', 'allowed'],
        ['tagger', 'modified'],
      ]);
    });

    it('run in order without the option', async () => {
      const { plan, log } = chainOf({ valid: true });
      const result = await runChain(plan, { payload: { name: 'echo' } }, { timeoutMs: 100 });
      expect(log).toEqual(['guard']);
      expect(result.status).toBe('timeout');
    });

    it('are discarded when a validator blocks, and a denial wins over their failure', async () => {
      for (const mutatorFails of [false, true]) {
        const { plan, log } = chainOf({ valid: false, mutatorFails });
        const seen: string[] = [];
        const result = await runChain(
          plan,
          { payload: { name: 'echo' } },
          {
            speculativeMutators: true,
            timeoutMs: 2000,
            onOutcome: (o) => seen.push(`${o.interceptor} ${o.outcome}`),
          },
        );
        expect(log).toContain('tagger');
        expect(result.status).toBe('validation_failed');
        expect(result.finalPayload).toBeUndefined();
        expect(result.abortedAt).toEqual([
          expect.objectContaining({ interceptor: 'guard', type: 'validation', reason: 'no' }),
        ]);
        expect(result.results.map((r) => r.interceptor)).toEqual(['guard']);
        // Telemetry still hears about the discarded invocation.
        expect(seen).toContain(`tagger ${mutatorFails ? 'failed' : 'modified'}`);
      }
    });

    it('start no further mutator once a validator has blocked', async () => {
      let release!: () => void;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let firstStarted!: () => void;
      const first = new Promise<void>((resolve) => {
        firstStarted = resolve;
      });
      const log: string[] = [];
      const invoker: Invoker = {
        async invoke(params) {
          log.push(params.name);
          if (params.name === 'guard') {
            await first;
            return { interceptor: 'guard', type: 'validation', phase: 'request', valid: false };
          }
          firstStarted();
          await released; // answers only after the chain has answered the denial
          return { interceptor: params.name, type: 'mutation', phase: 'request', modified: false };
        },
      };
      const plan = planOf(invoker, [
        { name: 'guard', type: 'validation', hooks: hook },
        { name: 'a', type: 'mutation', hooks: hook, priorityHint: 1 },
        { name: 'b', type: 'mutation', hooks: hook, priorityHint: 2 },
      ]);
      const result = await runChain(
        plan,
        { payload: {} },
        { speculativeMutators: true, timeoutMs: 2000 },
      );
      expect(result.status).toBe('validation_failed');
      release();
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(log).toEqual(['guard', 'a']);
    });

    it('report a mutator failure when the validators pass', async () => {
      const { plan } = chainOf({ valid: true, mutatorFails: true });
      const result = await runChain(
        plan,
        { payload: { name: 'echo' } },
        { speculativeMutators: true, timeoutMs: 2000 },
      );
      expect(result.status).toBe('mutation_failed');
      expect(result.abortedAt).toEqual([
        expect.objectContaining({ interceptor: 'tagger', type: 'mutation' }),
      ]);
    });
  });

  it('lets many audit-mode invocations listen to their signal at once without a leak warning', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      // An invoker that listens to the signal while the invocation is in flight, as an HTTP
      // client does.
      const listening: Invoker = {
        invoke: (params, { signal }) =>
          new Promise((resolve) => {
            const onAbort = () => undefined;
            signal.addEventListener('abort', onAbort);
            setTimeout(() => {
              signal.removeEventListener('abort', onAbort);
              resolve({
                interceptor: params.name,
                type: 'validation',
                phase: params.phase,
                valid: true,
              });
            }, 50);
          }),
      };
      const chain = auditObserver(listening);
      const plan = planChain(chain, 'tools/call', 'request');
      const audit: InvocationOutcome[] = [];
      await Promise.all(
        Array.from({ length: 20 }, () =>
          runChain(plan, { payload: {} }, { onAuditOutcome: (o) => audit.push(o) }),
        ),
      );
      await waitForAudit(audit, 20);
      expect(audit.every((o) => o.outcome === 'allowed')).toBe(true);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('does not wait for audit-mode interceptors', async () => {
    const slowAudit: Invoker = {
      invoke: (params) =>
        new Promise((resolve) =>
          setTimeout(
            () =>
              resolve({
                interceptor: params.name,
                type: 'validation',
                phase: params.phase,
                valid: true,
              }),
            300,
          ),
        ),
    };
    const chain = auditObserver(slowAudit);
    const audit: InvocationOutcome[] = [];
    const result = await runChain(
      planChain(chain, 'tools/call', 'request'),
      { payload: {} },
      { onAuditOutcome: (o) => audit.push(o) },
    );
    expect(result.status).toBe('success');
    expect(audit).toHaveLength(0); // not yet: the chain returned before the observer answered
    await waitForAudit(audit, 1);
    expect(audit[0]).toMatchObject({ interceptor: 'observer', mode: 'audit', outcome: 'allowed' });
  });

  it('marks audit-mode invocations batchable and active ones not, and defers audit starts', async () => {
    const seen: Array<[string, boolean | undefined]> = [];
    const invoker: Invoker = {
      invoke: async (params, options) => {
        seen.push([params.name, options.batchable]);
        return { interceptor: params.name, type: 'validation', phase: params.phase, valid: true };
      },
    };
    const chain = resolveService(
      'svc',
      [
        parseInterceptorInfo({
          name: 'gate',
          type: 'validation',
          hooks: [{ events: ['tools/call'], phase: 'request' }],
        }),
        parseInterceptorInfo({
          name: 'observer',
          type: 'validation',
          mode: 'audit',
          hooks: [{ events: ['tools/call'], phase: 'request' }],
        }),
      ],
      invoker,
    );
    const deferred: Array<() => void> = [];
    const audit: InvocationOutcome[] = [];
    const result = await runChain(
      planChain(chain, 'tools/call', 'request'),
      { payload: { name: 'echo' } },
      { deferAudit: (start) => deferred.push(start), onAuditOutcome: (o) => audit.push(o) },
    );
    expect(result.status).toBe('success');
    // The chain finished without starting the audit invocation: it waits for its batch.
    expect(seen).toEqual([['gate', undefined]]);
    expect(deferred).toHaveLength(1);
    for (const start of deferred) start();
    await waitForAudit(audit, 1);
    expect(seen).toEqual([
      ['gate', undefined],
      ['observer', true],
    ]);

    // With coalesce, active invocations may travel together too; each gets the scope its
    // stage handed to run.
    seen.length = 0;
    const scopes: unknown[] = [];
    const traced: Invoker = {
      invoke: async (params, options) => {
        scopes.push(options.scope);
        return invoker.invoke(params, options);
      },
    };
    const coalesced = await runChain(
      planChain(
        resolveService(
          'svc',
          chain.map((i) => parseInterceptorInfo(i.descriptor)),
          traced,
        ),
        'tools/call',
        'request',
      ),
      { payload: { name: 'echo' } },
      { coalesce: true, wrapStage: (stage, run) => run(`scope of ${stage.kind}`) },
    );
    expect(coalesced.status).toBe('success');
    expect(seen).toEqual(
      expect.arrayContaining([
        ['gate', true],
        ['observer', true],
      ]),
    );
    expect(scopes).toEqual(['scope of validators', 'scope of validators']);
  });

  it('treats a mutated payload the method validator rejects as that mutator failing', async () => {
    const invoker: Invoker = {
      invoke: async (params) => ({
        interceptor: params.name,
        type: 'mutation',
        phase: params.phase,
        modified: true,
        payload: { content: 'not an array' },
      }),
    };
    const chain = resolveService(
      'svc',
      [
        parseInterceptorInfo({
          name: 'breaker',
          type: 'mutation',
          hooks: [{ events: ['tools/call'], phase: 'response' }],
        }),
      ],
      invoker,
    );
    const result = await runChain(
      planChain(chain, 'tools/call', 'response'),
      { payload: { content: [] } },
      {
        validatePayload: (payload) =>
          Array.isArray((payload as { content?: unknown }).content)
            ? undefined
            : 'content must be an array',
      },
    );
    expect(result.status).toBe('mutation_failed');
    expect(result.abortedAt[0]).toMatchObject({ interceptor: 'breaker', type: 'mutation' });
    expect(result.abortedAt[0]?.reason).toContain('content must be an array');
  });

  it('passes context and per-interceptor config and caps timeoutMs by the chain budget', async () => {
    const seen: unknown[] = [];
    const invoker: Invoker = {
      invoke: async (params) => {
        seen.push(params);
        return { interceptor: params.name, type: 'validation', phase: params.phase, valid: true };
      },
    };
    const chain = resolveService(
      'svc',
      [
        parseInterceptorInfo({
          name: 'v',
          type: 'validation',
          timeoutMs: 60_000,
          hooks: [{ events: ['tools/call'], phase: 'request' }],
        }),
      ],
      invoker,
    );
    const context = {
      principal: { type: 'user' as const, id: 'alice' },
      traceId: 'a'.repeat(32),
      timestamp: '2026-01-01T00:00:00Z',
    };
    await runChain(
      planChain(chain, 'tools/call', 'request'),
      { payload: { x: 1 }, context, config: { v: { level: 3 } } },
      { timeoutMs: 1000 },
    );
    expect(seen).toHaveLength(1);
    const params = seen[0] as {
      timeoutMs: number;
      config: unknown;
      context: unknown;
      event: string;
    };
    expect(params.timeoutMs).toBeLessThanOrEqual(1000);
    expect(params.timeoutMs).toBeGreaterThan(900);
    expect(params.config).toEqual({ level: 3 });
    expect(params.context).toEqual(context);
    expect(params.event).toBe('tools/call');
  });

  it('answers a timed-out invocation at once and ignores its late answer', async () => {
    const signals: AbortSignal[] = [];
    let lateAnswered = false;
    const invoker: Invoker = {
      invoke: (params, { signal }) => {
        signals.push(signal);
        const answer = {
          interceptor: params.name,
          type: 'validation',
          phase: params.phase,
          valid: params.name !== 'slow', // the slow one would deny, too late
        };
        if (params.name !== 'slow') return Promise.resolve(answer);
        return new Promise((resolve) =>
          setTimeout(() => {
            lateAnswered = true;
            resolve(answer);
          }, 300),
        );
      },
    };
    const chain = resolveService(
      'svc',
      [
        parseInterceptorInfo({
          name: 'slow',
          type: 'validation',
          hooks: [{ events: ['tools/call'], phase: 'request' }],
        }),
        parseInterceptorInfo({
          name: 'quick',
          type: 'validation',
          hooks: [{ events: ['tools/call'], phase: 'request' }],
        }),
      ],
      invoker,
      { slow: { timeoutMs: 50, failOpen: true } },
    );
    const caller = new AbortController();
    const started = performance.now();
    const result = await runChain(
      planChain(chain, 'tools/call', 'request'),
      { payload: {} },
      { signal: caller.signal },
    );
    expect(performance.now() - started).toBeLessThan(250);
    expect(lateAnswered).toBe(false);
    expect(result.status).toBe('success');
    expect(result.results.find((r) => r.interceptor === 'slow')).toMatchObject({
      outcome: 'timeout',
      failedOpen: true,
      error: { reason: 'timeout', timeoutMs: 50 },
    });
    // Active invocations carry the caller's signal: it is what cancels their requests.
    expect(signals).toEqual([caller.signal, caller.signal]);
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(lateAnswered).toBe(true);
    expect(result.status).toBe('success');
  });

  it('cancels pending invocations when the caller aborts', async () => {
    let aborted = false;
    const invoker: Invoker = {
      invoke: (_params, { signal }) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(new Error('aborted'));
          });
        }),
    };
    const chain = resolveService(
      'svc',
      [
        parseInterceptorInfo({
          name: 'v',
          type: 'validation',
          hooks: [{ events: ['tools/call'], phase: 'request' }],
        }),
      ],
      invoker,
    );
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    const result = await runChain(
      planChain(chain, 'tools/call', 'request'),
      { payload: {} },
      { signal: controller.signal },
    );
    expect(aborted).toBe(true);
    expect(result.status).toBe('validation_failed');
    expect(result.abortedAt[0]?.type).toBe('invocation');
  });
});

describe('an interceptor that refuses its params (-32602)', () => {
  /** Answers every invocation with JSON-RPC `code`, as a remote service's error reaches the invoker. */
  const answering = (code: number): Invoker => ({
    invoke: async (params) => {
      throw new ProtocolError(code, 'Invalid params: payload over the vault limit', {
        name: params.name,
        reason: 'limit_exceeded',
      });
    },
  });
  /** One interceptor `refuser` of the given type, mode and failOpen, on tools/call requests. */
  const chainOf = (
    invoker: Invoker,
    descriptor: { type: 'validation' | 'mutation'; mode?: 'audit'; failOpen?: boolean },
  ) =>
    planChain(
      resolveService(
        'svc',
        [
          parseInterceptorInfo({
            name: 'refuser',
            hooks: [{ events: ['tools/call'], phase: 'request' }],
            ...descriptor,
          }),
        ],
        invoker,
      ),
      'tools/call',
      'request',
    );
  /** The client gets what any invocation failure gives it: -32603 naming `refuser` and `reason`. */
  const expectFailedClosed = (result: ChainResult, reason: string) => {
    const error = chainAbortToError(result);
    expect(error).toBeInstanceOf(ProtocolError);
    expect(error?.code).toBe(-32603);
    expect(error?.data).toEqual({ failedInterceptor: 'refuser', reason, phase: 'request' });
  };

  it.each([
    ['validator', 'validation', 'validation_failed', 'invocation'],
    ['mutator', 'mutation', 'mutation_failed', 'mutation'],
  ] as const)(
    'reports a %s as rejected and still blocks, fail-closed',
    async (_label, type, status, abortType) => {
      const result = await runChain(chainOf(answering(-32602), { type }), { payload: {} });
      expect(result.status).toBe(status);
      expect(result.results).toEqual([
        expect.objectContaining({
          interceptor: 'refuser',
          outcome: 'rejected',
          error: { reason: 'limit_exceeded', code: -32602 },
        }),
      ]);
      expect(result.results[0]?.failedOpen).toBeUndefined();
      expect(result.abortedAt).toEqual([
        {
          interceptor: 'refuser',
          serviceId: 'svc',
          reason: 'limit_exceeded',
          type: abortType,
          phase: 'request',
        },
      ]);
      expectFailedClosed(result, 'limit_exceeded');
    },
  );

  it('is tolerated with failOpen, like any invocation failure', async () => {
    const seen: InvocationOutcome[] = [];
    const result = await runChain(
      chainOf(answering(-32602), { type: 'validation', failOpen: true }),
      { payload: { x: 1 } },
      { onOutcome: (o) => seen.push(o) },
    );
    expect(result.status).toBe('success');
    expect(result.finalPayload).toEqual({ x: 1 });
    expect(result.abortedAt).toEqual([]);
    expect(result.results[0]).toMatchObject({ outcome: 'rejected', failedOpen: true });
    expect(seen.map((o) => o.outcome)).toEqual(['rejected']);
  });

  it('reports an audit-mode one as rejected to onAuditOutcome', async () => {
    const audit: InvocationOutcome[] = [];
    const result = await runChain(
      chainOf(answering(-32602), { type: 'validation', mode: 'audit' }),
      { payload: {} },
      { onAuditOutcome: (o) => audit.push(o) },
    );
    expect(result.status).toBe('success');
    await waitForAudit(audit, 1);
    expect(audit[0]).toMatchObject({ mode: 'audit', outcome: 'rejected', error: { code: -32602 } });
  });

  it('keeps any other JSON-RPC error, and a crash, as failed', async () => {
    const crashing: Invoker = {
      invoke: async () => {
        throw new Error('socket hang up');
      },
    };
    for (const invoker of [answering(-32603), answering(-32601), crashing]) {
      const result = await runChain(chainOf(invoker, { type: 'validation' }), { payload: {} });
      expect(result.status).toBe('validation_failed');
      expect(result.results[0]?.outcome).toBe('failed');
    }
  });

  it('keeps a plain -32602, without a reason that says otherwise, as rejected', async () => {
    const plain: Invoker = {
      invoke: async (params) => {
        // What a non-kit server may answer to a name it does not have: nothing tells it apart.
        throw new ProtocolError(-32602, 'no such interceptor', { name: params.name });
      },
    };
    const result = await runChain(chainOf(plain, { type: 'validation' }), { payload: {} });
    expect(result.results[0]).toMatchObject({
      outcome: 'rejected',
      error: { reason: 'no such interceptor', code: -32602 },
    });
  });

  it.each([
    ['validator', 'validation', 'validation_failed', 'invocation'],
    ['mutator', 'mutation', 'mutation_failed', 'mutation'],
  ] as const)(
    'reports a %s the service no longer has (-32602, reason unknown_interceptor) as failed, fail-closed',
    async (_label, type, status, abortType) => {
      const stale: Invoker = {
        invoke: async (params) => {
          throw new ProtocolError(-32602, `Unknown interceptor "${params.name}"`, {
            name: params.name,
            reason: InvokeErrorReason.UNKNOWN_INTERCEPTOR,
          });
        },
      };
      const seen: InvocationOutcome[] = [];
      const result = await runChain(
        chainOf(stale, { type }),
        { payload: {} },
        { onOutcome: (o) => seen.push(o) },
      );
      expect(result.status).toBe(status);
      const failed = {
        interceptor: 'refuser',
        outcome: 'failed',
        error: { reason: 'unknown_interceptor', code: -32602 },
      };
      expect(result.results).toEqual([expect.objectContaining(failed)]);
      expect(seen).toEqual([expect.objectContaining(failed)]);
      expect(result.abortedAt).toEqual([
        {
          interceptor: 'refuser',
          serviceId: 'svc',
          reason: 'unknown_interceptor',
          type: abortType,
          phase: 'request',
        },
      ]);
      expectFailedClosed(result, 'unknown_interceptor');
    },
  );

  it('reports every invocation of a coalesced batch the service refused as a whole (-32602) as failed', async () => {
    // An invoker that sends the batchable invocations started in one turn together, as the
    // kit's remote service does, to a service that refuses the batch request itself.
    const batches: number[] = [];
    let queue: Array<{ reject(error: unknown): void }> = [];
    const batching: Invoker = {
      invoke: (_params, { batchable }) =>
        new Promise((_resolve, reject) => {
          if (!batchable) {
            reject(new Error('expected a batchable invocation'));
            return;
          }
          if (queue.push({ reject }) > 1) return;
          setImmediate(() => {
            const batch = queue;
            queue = [];
            batches.push(batch.length);
            const refusal = new ProtocolError(
              -32602,
              'Invalid params: "invocations" holds too many items',
              { path: 'invocations', maxItems: 1 },
            );
            for (const item of batch) item.reject(batchItemError(refusal, batch.length));
          });
        }),
    };
    const plan = chainOf(batching, { type: 'validation' });
    const results = await Promise.all(
      [1, 2, 3].map((n) => runChain(plan, { payload: { n } }, { coalesce: true })),
    );
    expect(batches).toEqual([3]);
    for (const result of results) {
      expect(result.status).toBe('validation_failed');
      expect(result.results).toEqual([
        expect.objectContaining({
          outcome: 'failed',
          error: { reason: 'batch_refused', code: -32602 },
        }),
      ]);
      expectFailedClosed(result, 'batch_refused');
    }
  });

  it('counts -32602 with data.reason "timeout" as a timeout, as the service meant', async () => {
    const timedOut: Invoker = {
      invoke: async (params) => {
        throw new ProtocolError(-32602, 'timeout', { name: params.name, reason: 'timeout' });
      },
    };
    const result = await runChain(chainOf(timedOut, { type: 'validation' }), { payload: {} });
    expect(result.results[0]?.outcome).toBe('timeout');
  });
});

describe('auditLimit: audit-mode invocations in flight per service', () => {
  /** An invoker whose answers the test gives, one by one; `calls` lists what reached it. */
  function heldInvoker() {
    const calls: Array<{ payload: unknown; answer(): void; fail(error: unknown): void }> = [];
    const invoker: Invoker = {
      invoke: (params) =>
        new Promise((resolve, reject) => {
          calls.push({
            payload: params.payload,
            answer: () =>
              resolve({
                interceptor: params.name,
                type: 'validation',
                phase: params.phase,
                valid: true,
              }),
            fail: reject,
          });
        }),
    };
    return { invoker, calls };
  }
  const runObserved = (
    chain: ChainInterceptor[],
    payload: unknown,
    audit: InvocationOutcome[],
    options: Parameters<typeof runChain>[2] = {},
  ) =>
    runChain(
      planChain(chain, 'tools/call', 'request'),
      { payload },
      { onAuditOutcome: (o) => audit.push(o), ...options },
    );

  it('reports the invocation past the bound as overloaded at once, without starting it, and starts one again once a slot is free', async () => {
    const { invoker, calls } = heldInvoker();
    const chain = auditObserver(invoker);
    const auditLimit = createInFlightLimit(2);
    const audit: InvocationOutcome[] = [];
    for (const n of [1, 2]) await runObserved(chain, { n }, audit, { auditLimit });
    expect(calls.map((c) => c.payload)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(auditLimit.inFlight('svc')).toBe(2);

    const third = await runObserved(chain, { n: 3 }, audit, { auditLimit });
    expect(third.status).toBe('success');
    // Reported before the run even returned, never sent, nothing of it kept.
    expect(audit).toEqual([
      {
        interceptor: 'observer',
        serviceId: 'svc',
        type: 'validation',
        mode: 'audit',
        phase: 'request',
        outcome: 'failed',
        durationMs: 0,
        error: { reason: AUDIT_OVERLOADED },
      },
    ]);
    expect(calls).toHaveLength(2);

    calls[0]?.answer();
    await waitForAudit(audit, 2);
    expect(audit[1]).toMatchObject({ outcome: 'allowed' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(auditLimit.inFlight('svc')).toBe(1);
    await runObserved(chain, { n: 4 }, audit, { auditLimit });
    expect(calls.map((c) => c.payload)).toEqual([{ n: 1 }, { n: 2 }, { n: 4 }]);
    expect(auditLimit.inFlight('svc')).toBe(2);
  });

  it('counts each service on its own', async () => {
    const held = heldInvoker();
    const other = heldInvoker();
    const observer = (serviceId: string, invoker: Invoker) =>
      resolveService(
        serviceId,
        [
          parseInterceptorInfo({
            name: `observer-${serviceId}`,
            type: 'validation',
            mode: 'audit',
            hooks: [{ events: ['*'], phase: 'request' }],
          }),
        ],
        invoker,
      );
    const chain = [...observer('a', held.invoker), ...observer('b', other.invoker)];
    const auditLimit = createInFlightLimit(1);
    const audit: InvocationOutcome[] = [];
    await runObserved(chain, {}, audit, { auditLimit });
    await runObserved(chain, {}, audit, { auditLimit });
    expect([held.calls.length, other.calls.length]).toEqual([1, 1]);
    expect(audit.map((o) => [o.serviceId, o.error?.reason])).toEqual([
      ['a', AUDIT_OVERLOADED],
      ['b', AUDIT_OVERLOADED],
    ]);
  });

  it('gives the slot back when the request fails', async () => {
    const { invoker, calls } = heldInvoker();
    const chain = auditObserver(invoker);
    const auditLimit = createInFlightLimit(1);
    const audit: InvocationOutcome[] = [];
    await runObserved(chain, {}, audit, { auditLimit });
    calls[0]?.fail(new Error('connection reset'));
    await waitForAudit(audit, 1);
    expect(audit[0]).toMatchObject({ outcome: 'failed', error: { reason: 'connection reset' } });
    await new Promise((resolve) => setImmediate(resolve));
    expect(auditLimit.inFlight('svc')).toBe(0);
    await runObserved(chain, {}, audit, { auditLimit });
    expect(calls).toHaveLength(2);
  });

  it('keeps the slot of an invocation past its budget until its request ends', async () => {
    const { invoker, calls } = heldInvoker();
    const chain = auditObserver(invoker);
    const auditLimit = createInFlightLimit(1);
    const audit: InvocationOutcome[] = [];
    await runObserved(chain, {}, audit, { auditLimit, auditTimeoutMs: 20 });
    await waitForAudit(audit, 1);
    expect(audit[0]).toMatchObject({ outcome: 'timeout' });
    // The chain stopped waiting, but the request (and its payload) is still out there.
    expect(auditLimit.inFlight('svc')).toBe(1);
    await runObserved(chain, {}, audit, { auditLimit, auditTimeoutMs: 20 });
    expect(audit[1]).toMatchObject({ outcome: 'failed', error: { reason: AUDIT_OVERLOADED } });
    calls[0]?.answer();
    await new Promise((resolve) => setImmediate(resolve));
    expect(auditLimit.inFlight('svc')).toBe(0);
    await runObserved(chain, {}, audit, { auditLimit, auditTimeoutMs: 20 });
    expect(calls).toHaveLength(2);
  });

  it('counts an invocation waiting for its deferred start, and frees a slot never sent', async () => {
    const { invoker, calls } = heldInvoker();
    const chain = auditObserver(invoker);
    const auditLimit = createInFlightLimit(1);
    const audit: InvocationOutcome[] = [];
    const deferred: Array<() => void> = [];
    const deferAudit = (start: () => void) => deferred.push(start);
    await runObserved(chain, {}, audit, { auditLimit, deferAudit });
    await runObserved(chain, {}, audit, { auditLimit, deferAudit });
    expect(deferred).toHaveLength(1);
    expect(audit.map((o) => o.error?.reason)).toEqual([AUDIT_OVERLOADED]);
    deferred[0]?.();
    calls[0]?.answer();
    await waitForAudit(audit, 2);
    await new Promise((resolve) => setImmediate(resolve));
    expect(auditLimit.inFlight('svc')).toBe(0);

    // An invocation whose budget is gone before it is sent never reaches the invoker.
    await runObserved(chain, {}, audit, { auditLimit, auditTimeoutMs: 0 });
    await waitForAudit(audit, 3);
    expect(audit[2]).toMatchObject({ outcome: 'timeout' });
    expect(calls).toHaveLength(1);
    expect(auditLimit.inFlight('svc')).toBe(0);
  });

  it('leaves active invocations alone', async () => {
    const invoker: Invoker = {
      invoke: async (params) => ({
        interceptor: params.name,
        type: 'validation',
        phase: params.phase,
        valid: true,
      }),
    };
    const chain = resolveService(
      'svc',
      [
        parseInterceptorInfo({
          name: 'gate',
          type: 'validation',
          hooks: [{ events: ['*'], phase: 'request' }],
        }),
      ],
      invoker,
    );
    const auditLimit = createInFlightLimit(1);
    auditLimit.tryAcquire('svc');
    const result = await runObserved(chain, {}, [], { auditLimit });
    expect(result.results.map((o) => o.outcome)).toEqual(['allowed']);
  });
});

describe('isFailureOutcome', () => {
  it.each([
    ['failed', true],
    ['timeout', true],
    ['rejected', true],
    ['allowed', false],
    ['warned', false],
    ['denied', false],
    ['modified', false],
    ['unchanged', false],
  ] as const)('%s → %s', (kind, failure) => {
    expect(isFailureOutcome(kind)).toBe(failure);
  });
});

describe('planChain', () => {
  const noop: Invoker = { invoke: async () => ({}) };
  const requestHook = (events: string[]) => [{ events, phase: 'request' }];
  /** One interceptor of service `serviceId`, from its descriptor. */
  const hosted = (serviceId: string, descriptor: Record<string, unknown>) =>
    resolveService(serviceId, [parseInterceptorInfo(descriptor)], noop);
  const chain = [
    ...hosted('s2', { name: 'same', type: 'mutation', hooks: requestHook(['*']) }),
    ...hosted('s1', { name: 'same', type: 'mutation', hooks: requestHook(['*']) }),
    ...hosted('s1', { name: 'v', type: 'validation', hooks: requestHook(['tools/*']) }),
    ...hosted('s1', {
      name: 'new-only',
      type: 'validation',
      compat: { minProtocol: '2026-07-28' },
      hooks: requestHook(['*']),
    }),
  ];

  it('orders stages by phase and breaks name ties by service id', () => {
    const plan = planChain(chain, 'tools/call', 'request', { protocolVersion: '2025-11-25' });
    expect(plan.stages.map((s) => s.kind)).toEqual(['validators', 'mutators']);
    expect(plan.stages[1]?.steps.map((s) => s.interceptor.serviceId)).toEqual(['s1', 's2']);
    expect(plan.stages[0]?.steps.map((s) => s.interceptor.name)).toEqual(['v']);
  });

  it('skips interceptors whose compat excludes the negotiated revision', () => {
    const plan = planChain(chain, 'tools/call', 'request', { protocolVersion: '2026-07-28' });
    expect(plan.stages[0]?.steps.map((s) => s.interceptor.name)).toEqual(['new-only', 'v']);
  });

  it('leaves out empty stages and unmatched events', () => {
    expect(planChain(chain, 'tools/call', 'response').stages).toEqual([]);
    const plan = planChain(chain, 'prompts/get', 'request', { protocolVersion: '2025-11-25' });
    expect(plan.stages.map((s) => s.kind)).toEqual(['mutators']);
  });
});
