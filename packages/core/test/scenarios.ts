/**
 * Chain scenarios as data, shared by the in-process engine tests (core) and the remote
 * tests over real HTTP (interceptor-kit): each side turns a {@link Behaviour} into a real
 * interceptor and must reach the same {@link ScenarioExpectation}.
 */
import type { Hook, Phase, PriorityHint, ServiceOverrides } from '../src/index.ts';

/** What a scenario interceptor does when invoked. */
export type Behaviour =
  | { kind: 'allow' }
  | { kind: 'deny'; message: string; severity?: 'info' | 'warn' | 'error' }
  | { kind: 'tag'; tag: string }
  | { kind: 'denyIfTagged'; tag: string }
  | { kind: 'crash'; message: string }
  | { kind: 'slow'; ms: number; next: Behaviour }
  | { kind: 'malformed' };

/** One interceptor in a scenario. */
export interface ScenarioInterceptor {
  name: string;
  type: 'validation' | 'mutation';
  behaviour: Behaviour;
  hooks?: Hook[];
  priorityHint?: PriorityHint;
  mode?: 'active' | 'audit';
  failOpen?: boolean;
  timeoutMs?: number;
}

/** What must come out. */
export interface ScenarioExpectation {
  status: 'success' | 'validation_failed' | 'mutation_failed' | 'timeout';
  /** Active interceptors invoked, in order of completion for mutators / any order for validators. */
  invoked?: string[];
  /** `finalPayload.tags` on success. */
  tags?: string[];
  abortedAt?: Array<{ interceptor: string; type: string }>;
  /** Audit outcomes delivered to the observer (sorted by interceptor name). */
  audit?: Array<{ interceptor: string; outcome: string }>;
  summary?: { errors: number; warnings: number; infos: number };
}

/** A chain scenario. */
export interface Scenario {
  name: string;
  phase: Phase;
  event?: string;
  interceptors: ScenarioInterceptor[];
  overrides?: ServiceOverrides;
  chainTimeoutMs?: number;
  expect: ScenarioExpectation;
}

const both: Hook[] = [
  { events: ['tools/call'], phase: 'request' },
  { events: ['tools/call'], phase: 'response' },
];

/** The hooks a scenario interceptor gets when it names none. */
export const defaultHooks = both;

const tag = (
  name: string,
  priorityHint?: PriorityHint,
  extra: Partial<ScenarioInterceptor> = {},
): ScenarioInterceptor => ({
  name,
  type: 'mutation',
  behaviour: { kind: 'tag', tag: name },
  ...(priorityHint === undefined ? {} : { priorityHint }),
  ...extra,
});

const ordering = [
  tag('redactor', { request: -1000, response: 1000 }),
  tag('filter', -500),
  tag('normaliser', { request: 100 }),
];

/** The scenarios. */
export const scenarios: Scenario[] = [
  {
    name: 'request phase orders redactor, filter, normaliser',
    phase: 'request',
    interceptors: ordering,
    expect: { status: 'success', tags: ['redactor', 'filter', 'normaliser'] },
  },
  {
    name: 'response phase orders filter, normaliser, redactor',
    phase: 'response',
    interceptors: ordering,
    expect: { status: 'success', tags: ['filter', 'normaliser', 'redactor'] },
  },
  {
    name: 'equal priorities run by name in code-point order',
    phase: 'request',
    interceptors: [tag('b', 7), tag('a', 7), tag('B', 7)],
    expect: { status: 'success', tags: ['B', 'a', 'b'] },
  },
  {
    name: 'five response mutators with one in audit mode apply exactly the four active tags',
    phase: 'response',
    interceptors: [
      tag('m50', 50),
      tag('m30', 30, { mode: 'audit' }),
      tag('m10', 10),
      tag('m40', 40),
      tag('m20', 20),
    ],
    expect: {
      status: 'success',
      tags: ['m10', 'm20', 'm40', 'm50'],
      audit: [{ interceptor: 'm30', outcome: 'modified' }],
    },
  },
  {
    name: 'a failing mutator without failOpen aborts with mutation_failed naming it',
    phase: 'request',
    interceptors: [
      tag('first', 1),
      {
        name: 'broken',
        type: 'mutation',
        behaviour: { kind: 'crash', message: 'boom' },
        priorityHint: 2,
      },
      tag('last', 3),
    ],
    expect: {
      status: 'mutation_failed',
      invoked: ['first', 'broken'],
      abortedAt: [{ interceptor: 'broken', type: 'mutation' }],
    },
  },
  {
    name: 'a failing mutator with failOpen is skipped and the others still apply',
    phase: 'request',
    interceptors: [
      tag('first', 1),
      {
        name: 'broken',
        type: 'mutation',
        behaviour: { kind: 'crash', message: 'boom' },
        priorityHint: 2,
        failOpen: true,
      },
      tag('last', 3),
    ],
    expect: { status: 'success', tags: ['first', 'last'], invoked: ['first', 'broken', 'last'] },
  },
  {
    name: 'a warn-only invalid result does not block',
    phase: 'request',
    interceptors: [
      {
        name: 'cautious',
        type: 'validation',
        behaviour: { kind: 'deny', message: 'hmm', severity: 'warn' },
      },
      tag('after'),
    ],
    expect: { status: 'success', tags: ['after'], summary: { errors: 0, warnings: 1, infos: 0 } },
  },
  {
    name: 'an invalid result without severity blocks',
    phase: 'request',
    interceptors: [
      { name: 'strict', type: 'validation', behaviour: { kind: 'deny', message: 'no' } },
    ],
    expect: {
      status: 'validation_failed',
      abortedAt: [{ interceptor: 'strict', type: 'validation' }],
    },
  },
  {
    name: 'a blocking request validator means no mutator runs',
    phase: 'request',
    interceptors: [
      {
        name: 'gate',
        type: 'validation',
        behaviour: { kind: 'deny', message: 'denied', severity: 'error' },
      },
      { name: 'ok', type: 'validation', behaviour: { kind: 'allow' } },
      tag('mutator'),
    ],
    expect: {
      status: 'validation_failed',
      invoked: ['gate', 'ok'],
      abortedAt: [{ interceptor: 'gate', type: 'validation' }],
      summary: { errors: 1, warnings: 0, infos: 0 },
    },
  },
  {
    name: 'every blocking validator is reported',
    phase: 'request',
    interceptors: [
      { name: 'v1', type: 'validation', behaviour: { kind: 'deny', message: 'one' } },
      { name: 'v2', type: 'validation', behaviour: { kind: 'crash', message: 'down' } },
      { name: 'v3', type: 'validation', behaviour: { kind: 'deny', message: 'three' } },
    ],
    expect: {
      status: 'validation_failed',
      abortedAt: [
        { interceptor: 'v1', type: 'validation' },
        { interceptor: 'v3', type: 'validation' },
        { interceptor: 'v2', type: 'invocation' },
      ],
    },
  },
  {
    name: "an audit validator's valid:false does not block",
    phase: 'request',
    interceptors: [
      {
        name: 'watcher',
        type: 'validation',
        behaviour: { kind: 'deny', message: 'seen' },
        mode: 'audit',
      },
      tag('after'),
    ],
    expect: {
      status: 'success',
      tags: ['after'],
      invoked: ['after'],
      audit: [{ interceptor: 'watcher', outcome: 'denied' }],
    },
  },
  {
    name: 'response validators see the mutated payload',
    phase: 'response',
    interceptors: [
      tag('marker'),
      { name: 'checker', type: 'validation', behaviour: { kind: 'denyIfTagged', tag: 'marker' } },
    ],
    expect: {
      status: 'validation_failed',
      invoked: ['marker', 'checker'],
      abortedAt: [{ interceptor: 'checker', type: 'validation' }],
    },
  },
  {
    name: 'a slow validator hits its own timeoutMs and fails closed',
    phase: 'request',
    interceptors: [
      {
        name: 'slow',
        type: 'validation',
        behaviour: { kind: 'slow', ms: 2000, next: { kind: 'allow' } },
        timeoutMs: 50,
      },
    ],
    chainTimeoutMs: 5000,
    expect: {
      status: 'validation_failed',
      abortedAt: [{ interceptor: 'slow', type: 'invocation' }],
    },
  },
  {
    name: 'a slow mutator with failOpen times out and is skipped',
    phase: 'request',
    interceptors: [
      {
        name: 'slow',
        type: 'mutation',
        behaviour: { kind: 'slow', ms: 2000, next: { kind: 'tag', tag: 'slow' } },
        timeoutMs: 50,
        failOpen: true,
      },
      tag('z-after'),
    ],
    chainTimeoutMs: 5000,
    expect: { status: 'success', tags: ['z-after'] },
  },
  {
    name: 'the chain budget runs out',
    phase: 'request',
    interceptors: [
      {
        name: 'slow',
        type: 'mutation',
        behaviour: { kind: 'slow', ms: 2000, next: { kind: 'tag', tag: 'slow' } },
        failOpen: true,
      },
    ],
    chainTimeoutMs: 80,
    expect: { status: 'timeout', abortedAt: [{ interceptor: 'slow', type: 'timeout' }] },
  },
  {
    name: 'a malformed result is an invocation failure',
    phase: 'request',
    interceptors: [{ name: 'weird', type: 'mutation', behaviour: { kind: 'malformed' } }],
    expect: { status: 'mutation_failed', abortedAt: [{ interceptor: 'weird', type: 'mutation' }] },
  },
  {
    name: 'overrides narrow hooks, switch mode and reorder',
    phase: 'request',
    interceptors: [tag('x', 1), tag('y', 2), tag('gone', 3)],
    overrides: {
      x: { priorityHint: 10 },
      gone: { hooks: [{ events: ['tools/call'], phase: 'response' }] },
      y: { mode: 'audit' },
    },
    expect: { status: 'success', tags: ['x'], audit: [{ interceptor: 'y', outcome: 'modified' }] },
  },
  {
    name: 'interceptors hooked to other events are not selected',
    phase: 'request',
    event: 'resources/read',
    interceptors: [
      tag('tools-only'),
      tag('everything', 0, { hooks: [{ events: ['*'], phase: 'request' }] }),
      tag('resources', 0, { hooks: [{ events: ['resources/*'], phase: 'request' }] }),
    ],
    expect: { status: 'success', tags: ['everything', 'resources'] },
  },
];

/** Apply a tag to a payload without touching the input. */
export function withTag(payload: unknown, tag: string): Record<string, unknown> {
  const base = (typeof payload === 'object' && payload !== null ? payload : {}) as Record<
    string,
    unknown
  >;
  const tags = Array.isArray(base.tags) ? (base.tags as string[]) : [];
  return { ...base, tags: [...tags, tag] };
}

/** The verdict a behaviour yields (after any delay), or throws for `crash`. */
export async function verdictOf(
  behaviour: Behaviour,
  payload: unknown,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  switch (behaviour.kind) {
    case 'allow':
      return { valid: true };
    case 'deny': {
      const verdict: Record<string, unknown> = {
        valid: false,
        messages: [{ message: behaviour.message, severity: behaviour.severity ?? 'error' }],
      };
      if (behaviour.severity !== undefined) verdict.severity = behaviour.severity;
      return verdict;
    }
    case 'tag':
      return { modified: true, payload: withTag(payload, behaviour.tag) };
    case 'denyIfTagged': {
      const tags = (payload as { tags?: string[] } | undefined)?.tags ?? [];
      return tags.includes(behaviour.tag)
        ? {
            valid: false,
            severity: 'error',
            messages: [{ message: `tagged ${behaviour.tag}`, severity: 'error' }],
          }
        : { valid: true };
    }
    case 'crash':
      throw new Error(behaviour.message);
    case 'slow':
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, behaviour.ms);
        signal.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      return verdictOf(behaviour.next, payload, signal);
    case 'malformed':
      return { modified: 'yes' };
  }
}

/** What a run produced, for {@link checkScenario}. */
export interface ScenarioRun {
  result: import('../src/index.ts').ChainResult;
  /** Names of interceptors as they were invoked (audit ones included). */
  log: string[];
  /** Audit outcomes delivered to the observer. */
  audit: import('../src/index.ts').InvocationOutcome[];
}

/** Assert a run matches the scenario's expectation. */
export function checkScenario(
  scenario: Scenario,
  run: ScenarioRun,
  expect: typeof import('vitest').expect,
): void {
  const { result } = run;
  const want = scenario.expect;
  expect(result.status).toBe(want.status);
  expect(result.phase).toBe(scenario.phase);
  if (want.tags !== undefined) {
    expect((result.finalPayload as { tags?: string[] }).tags ?? []).toEqual(want.tags);
  }
  if (want.status !== 'success') expect(result.finalPayload).toBeUndefined();
  if (want.invoked !== undefined) {
    const auditNames = new Set(run.audit.map((a) => a.interceptor));
    const active = run.log.filter((n) => !auditNames.has(n));
    expect(active).toEqual(want.invoked);
    expect(result.results.map((r) => r.interceptor)).toEqual(want.invoked);
  }
  if (want.abortedAt !== undefined) {
    expect(result.abortedAt.map((a) => ({ interceptor: a.interceptor, type: a.type }))).toEqual(
      want.abortedAt,
    );
  } else if (want.status === 'success') {
    expect(result.abortedAt).toEqual([]);
  }
  if (want.audit !== undefined) {
    const got = run.audit
      .map((a) => ({ interceptor: a.interceptor, outcome: a.outcome }))
      .sort((a, b) => (a.interceptor < b.interceptor ? -1 : 1));
    expect(got).toEqual(want.audit);
  }
  if (want.summary !== undefined) expect(result.validationSummary).toEqual(want.summary);
  expect(result.totalDurationMs).toBeGreaterThanOrEqual(0);
}

/** The descriptor fields of a scenario interceptor. */
export function descriptorOf(i: ScenarioInterceptor): Record<string, unknown> {
  return {
    name: i.name,
    type: i.type,
    hooks: i.hooks ?? defaultHooks,
    ...(i.priorityHint === undefined ? {} : { priorityHint: i.priorityHint }),
    ...(i.mode === undefined ? {} : { mode: i.mode }),
    ...(i.failOpen === undefined ? {} : { failOpen: i.failOpen }),
    ...(i.timeoutMs === undefined ? {} : { timeoutMs: i.timeoutMs }),
  };
}

/** Wait until `count` audit outcomes arrived (audit runs off the critical path). */
export async function waitForAudit(
  audit: unknown[],
  count: number,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (audit.length < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
}

/**
 * Texts that are not integers written in digits although `Number()` reads most of them as
 * one (`' '` is 0, `'1e3'` 1000, `'0x10'` 16): what every integer setting must refuse.
 */
export const NOT_DIGITS: readonly string[] = [
  ' ',
  '1e3',
  '0x10',
  '-1',
  '1.5',
  '+5',
  ' 5',
  '5 ',
  'five',
];
