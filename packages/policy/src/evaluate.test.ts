import type { Principal } from '@fleet/core';
import { describe, expect, it } from 'vitest';
import { ISSUE_POLICY } from '../test/policies.ts';
import { MAX_KEY_CHARS } from './cel.ts';
import {
  compilePolicy,
  evaluate,
  explain,
  matchRateLimits,
  type PolicyInput,
  policyInputOf,
} from './index.ts';

const anonymous: Principal = { type: 'anonymous' };
const alice: Principal = { type: 'user', id: 'alice' };
const dev: Principal = { type: 'user', id: 'dev', claims: { roles: ['dev'] } };
const admin: Principal = { type: 'user', id: 'root', claims: { roles: ['admin'] } };
const ci: Principal = { type: 'service', id: 'ci-runner' };

function call(tool: string, principal: Principal, args?: Record<string, unknown>): PolicyInput {
  return {
    event: 'tools/call',
    phase: 'request',
    tool,
    principal,
    ...(args ? { arguments: args } : {}),
  };
}

describe('the issue #5 policy', () => {
  const policy = compilePolicy(ISSUE_POLICY);
  const guests = 'denied by rule "read-only-for-guests": Only admins may delete';

  it.each([
    ['anonymous deletes', call('file_delete', anonymous), false, 'read-only-for-guests', guests],
    ['a user without claims writes', call('fs_write_file', alice), false, 'read-only-for-guests'],
    [
      'a user without the admin role deletes',
      call('rm_delete', dev),
      false,
      'read-only-for-guests',
    ],
    ['an admin deletes', call('file_delete', admin), true, 'allow-rest'],
    ['anonymous reads', call('fs_read_file', anonymous), true, 'allow-rest'],
    [
      'a big transfer',
      call('bank_transfer', admin, { amount: 20_000 }),
      false,
      'big-transfers',
      'denied by rule "big-transfers"',
    ],
    ['a small transfer', call('bank_transfer', admin, { amount: 5_000 }), true, 'allow-rest'],
    ['a transfer without amount', call('bank_transfer', admin, {}), true, 'allow-rest'],
    ['a transfer without arguments', call('bank_transfer', admin), true, 'allow-rest'],
    [
      'a prompt with "delete" in its name (the guest rule is for tools/call only)',
      { event: 'prompts/get', phase: 'request', prompt: 'x_delete', principal: anonymous },
      true,
      'allow-rest',
    ],
  ] as const)('%s', (_, input, allowed, rule, message?: string) => {
    const decision = evaluate(policy, input as PolicyInput);
    expect(decision).toEqual(
      allowed ? { allowed, rule } : { allowed, rule, message: message ?? expect.any(String) },
    );
  });

  it('returns the same frozen decision object for a rule (no allocation per call)', () => {
    const first = evaluate(policy, call('file_delete', anonymous));
    expect(evaluate(policy, call('fs_write_x', alice))).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
  });
});

function policyOf(rules: string, defaults = 'deny'): ReturnType<typeof compilePolicy> {
  return compilePolicy(`version: 1\ndefault: ${defaults}\nrules:\n${rules}`);
}

describe('language features', () => {
  it.each([
    ['default deny', 'deny', false, 'denied by rule "default": no rule allowed it'],
    ['default allow', 'allow', true, undefined],
  ])('%s with no rules', (_, defaults, allowed, message) => {
    const policy = compilePolicy(`version: 1\ndefault: ${defaults}\n`);
    expect(evaluate(policy, call('x', alice))).toEqual({
      allowed,
      rule: 'default',
      ...(message ? { message } : {}),
    });
  });

  it('defaults to deny when the document does not say', () => {
    expect(evaluate(compilePolicy('version: 1\n'), call('x', alice)).allowed).toBe(false);
  });

  const events = policyOf(
    [
      '  - {id: tools-glob, effect: allow, events: ["tools/*"]}',
      '  - {id: exact, effect: allow, events: ["prompts/get"]}',
      '  - {id: any, effect: deny, events: ["*"], message: "nothing else"}',
    ].join('\n'),
  );
  it.each([
    ['tools/call', 'tools-glob'],
    ['tools/list', 'tools-glob'],
    ['prompts/get', 'exact'],
    ['prompts/list', 'any'],
    ['resources/read', 'any'],
  ])('events: %s is decided by %s', (event, rule) => {
    expect(evaluate(events, { event, phase: 'request', principal: alice }).rule).toBe(rule);
  });

  it('defaults rule events to the governed events', () => {
    const policy = policyOf('  - {id: r, effect: allow}');
    expect(evaluate(policy, call('x', alice)).rule).toBe('r');
    expect(evaluate(policy, { event: 'tools/list', phase: 'request', principal: alice }).rule).toBe(
      'default',
    );
  });

  const names = policyOf(
    [
      '  - {id: deletes, effect: deny, events: ["*"], tools: ["*delete*", "fs_write_*"]}',
      '  - {id: etc, effect: deny, events: ["*"], tools: ["file:///etc/*"]}',
      '  - {id: rest, effect: allow, events: ["*"]}',
    ].join('\n'),
  );
  it.each([
    [call('file_delete', alice), 'deletes'],
    [call('fs_write_file', alice), 'deletes'],
    [call('fs_read_file', alice), 'rest'],
    [{ event: 'prompts/get', phase: 'request', prompt: 'delete_me', principal: alice }, 'deletes'],
    [
      {
        event: 'resources/read',
        phase: 'request',
        resource: 'file:///etc/passwd',
        principal: alice,
      },
      'etc',
    ],
    [
      { event: 'resources/read', phase: 'request', resource: 'file:///home/a', principal: alice },
      'rest',
    ],
    // A request without a name never matches a rule that lists names.
    [{ event: 'tools/list', phase: 'request', principal: alice }, 'rest'],
  ] as const)('tools globs: %j is decided by %s', (input, rule) => {
    expect(evaluate(names, input as PolicyInput).rule).toBe(rule);
  });

  const principals = policyOf(
    [
      '  - {id: ci, effect: allow, principals: ["service:ci-*"]}',
      '  - {id: users, effect: allow, principals: ["user"], tools: ["read_*"]}',
    ].join('\n'),
  );
  it.each([
    [call('anything', ci), 'ci'],
    [call('read_file', alice), 'users'],
    [call('write_file', alice), 'default'],
    [call('read_file', anonymous), 'default'],
  ] as const)('principals: %j is decided by %s', (input, rule) => {
    expect(evaluate(principals, input).rule).toBe(rule);
  });

  it('takes the first matching rule, in order', () => {
    const allowFirst = policyOf(
      '  - {id: a, effect: allow, tools: ["x"]}\n  - {id: d, effect: deny, tools: ["x"]}',
    );
    const denyFirst = policyOf(
      '  - {id: d, effect: deny, tools: ["x"]}\n  - {id: a, effect: allow, tools: ["x"]}',
    );
    expect(evaluate(allowFirst, call('x', alice))).toEqual({ allowed: true, rule: 'a' });
    expect(evaluate(denyFirst, call('x', alice))).toEqual({
      allowed: false,
      rule: 'd',
      message: 'denied by rule "d"',
    });
  });

  it('puts the rule message after the rule id', () => {
    const policy = policyOf('  - {id: no, effect: deny, message: "Not today"}');
    expect(evaluate(policy, call('x', alice)).message).toBe('denied by rule "no": Not today');
  });

  it.each([
    ['event == "tools/call"', call('x', alice), true],
    ['phase == "request"', call('x', alice), true],
    ['phase == "response"', { ...call('x', alice), phase: 'response' as const }, true],
    ['tool.startsWith("fs_")', call('fs_read', alice), true],
    ['tool.matches("^db_(read|write)$")', call('db_write', alice), true],
    [
      'prompt == "summary"',
      { event: 'prompts/get', phase: 'request' as const, prompt: 'summary', principal: alice },
      true,
    ],
    [
      'resource.startsWith("file://")',
      {
        event: 'resources/read',
        phase: 'request' as const,
        resource: 'file:///a',
        principal: alice,
      },
      true,
    ],
    ['principal.type == "service" && principal.id.startsWith("ci-")', call('x', ci), true],
    ['arguments.path.startsWith("/etc")', call('x', alice, { path: '/etc/passwd' }), true],
    ['arguments.items.exists(i, i.size > 10)', call('x', alice, { items: [{ size: 11 }] }), true],
    ['"admin" in principal.claims.roles', call('x', admin), true],
    ['principal.claims.roles.exists(r, r == "dev")', call('x', dev), true],
  ] as const)('when %s', (when, input, want) => {
    const policy = policyOf(`  - id: r\n    effect: allow\n    events: ["*"]\n    when: '${when}'`);
    expect(evaluate(policy, input as PolicyInput).allowed).toBe(want);
  });
});

/** A policy that allows by default and denies when `when` is true. */
function denyWhen(when: string): ReturnType<typeof compilePolicy> {
  return policyOf(`  - id: r\n    effect: deny\n    when: '${when}'`, 'allow');
}

describe('absent fields are safe', () => {
  it.each([
    ['arguments.amount > 10000', {}, false],
    ['!(arguments.amount > 10000)', {}, true],
    ['arguments.a.b.c == 1', { a: {} }, false],
    ['arguments.items[3] == 1', { items: [1] }, false],
    ['arguments["x-y"] == 1', {}, false],
    ['arguments.tags.exists(t, t == "x")', {}, false],
    ['has(arguments.amount)', {}, false],
    ['arguments.?amount.orValue(0) < 5', {}, true],
    ['size(arguments) == 0', undefined, true],
    // Not read unconditionally, so not guarded: CEL decides and the ternary picks 0.
    ['(has(arguments.a) ? arguments.a : 0) < 5', {}, true],
    ['arguments.flag == null', { flag: null }, true],
  ])('%s with arguments %j is %s', (when, args, want) => {
    const decision = evaluate(denyWhen(when), call('t', alice, args));
    expect(decision.allowed).toBe(!want);
    expect(decision.errors).toBeUndefined();
  });

  it.each([
    ['"admin" in principal.claims.roles', alice, false],
    ['!("admin" in principal.claims.roles)', alice, true],
    ['!("admin" in principal.claims.roles)', { type: 'user', claims: {} }, true],
    ['has(principal.claims.roles)', alice, false],
    ['principal.id == "x"', anonymous, false],
    // An absent leaf is false, whatever its operator: negate the whole leaf instead.
    ['principal.id != "x"', anonymous, false],
    ['!(principal.id == "x")', anonymous, true],
    ['principal.claims.level >= 3', { type: 'user', claims: { level: 3 } }, true],
  ] as const)('%s for %j is %s', (when, principal, want) => {
    const decision = evaluate(denyWhen(when), call('t', principal));
    expect(decision.allowed).toBe(!want);
    expect(decision.errors).toBeUndefined();
  });

  it.each([
    ['tool == "x"', { event: 'resources/read', phase: 'request', resource: 'a', principal: alice }],
    ['prompt == "x"', call('x', alice)],
    ['resource.startsWith("file:")', call('x', alice)],
  ] as const)('%s on a request without that field is false', (when, input) => {
    expect(evaluate(denyWhen(when), input as PolicyInput)).toEqual({
      allowed: true,
      rule: 'default',
    });
  });
});

describe('numbers: JSON numbers against CEL integer literals', () => {
  it.each([
    ['arguments.amount > 10000', { amount: 10_000.5 }, true],
    ['arguments.amount > 10000', { amount: 10_000 }, false],
    ['arguments.amount >= 10000', { amount: 10_000 }, true],
    ['arguments.amount == 3', { amount: 3 }, true],
    ['arguments.amount == 3.0', { amount: 3 }, true],
    ['arguments.amount != 3', { amount: 4 }, true],
    ['arguments.ratio < 0.5', { ratio: 0.25 }, true],
    ['3 in arguments.ids', { ids: [1, 2, 3] }, true],
    ['size(arguments.items) > 2', { items: [1, 2, 3] }, true],
    ['int(arguments.amount) + 1 > 10', { amount: 10 }, true],
    ['arguments.amount + 1.0 > 10.5', { amount: 10 }, true],
    ['arguments.amount < -1', { amount: -2 }, true],
  ])('%s with %j is %s', (when, args, want) => {
    const decision = evaluate(denyWhen(when), call('t', alice, args));
    expect(decision.allowed).toBe(!want);
    expect(decision.errors).toBeUndefined();
  });
});

describe('BigInt arguments from programmatic callers', () => {
  it('compare with integer literals', () => {
    const policy = denyWhen('arguments.amount > 10000');
    expect(evaluate(policy, call('t', alice, { amount: 20_000n })).allowed).toBe(false);
    expect(evaluate(policy, call('t', alice, { amount: 10_000n })).allowed).toBe(true);
  });
});

describe('conditions that fail never grant access', () => {
  it('a failing deny rule denies, and says why in errors', () => {
    const decision = evaluate(
      denyWhen('arguments.amount > 10000'),
      call('t', alice, { amount: 'lots' }),
    );
    expect(decision).toMatchObject({ allowed: false, rule: 'r', message: 'denied by rule "r"' });
    expect(decision.errors).toEqual([
      { rule: 'r', message: expect.stringMatching(/^arguments\.amount > 10000: no such overload/) },
    ]);
  });

  it('a failing allow rule does not match', () => {
    const policy = policyOf('  - id: big\n    effect: allow\n    when: "arguments.amount > 1"');
    const decision = evaluate(policy, call('t', alice, { amount: 'x' }));
    expect(decision).toMatchObject({ allowed: false, rule: 'default' });
    expect(decision.errors?.map((e) => e.rule)).toEqual(['big']);
  });

  it('a non-bool leaf is a failure', () => {
    const decision = evaluate(denyWhen('arguments.flag'), call('t', alice, { flag: 'yes' }));
    expect(decision.allowed).toBe(false);
    expect(decision.errors?.[0]?.message).toMatch(/expected a bool, got string "yes"/);
  });

  it.each([
    ['principal.type == "user" || arguments.amount > 1', true],
    ['arguments.amount > 1 || principal.type == "user"', true],
    ['principal.type == "service" && arguments.amount > 1', false],
    ['arguments.amount > 1 && principal.type == "service"', false],
  ])('%s absorbs the failing side like CEL: %s', (when, want) => {
    const decision = evaluate(denyWhen(when), call('t', alice, { amount: 'x' }));
    expect(decision.allowed).toBe(!want);
    expect(decision.errors).toBeUndefined();
  });
});

describe('explain', () => {
  const policy = compilePolicy(ISSUE_POLICY);

  it('says for every rule which part matched and why', () => {
    const explanation = explain(policy, call('file_delete', alice));
    expect(explanation.decision).toEqual(evaluate(policy, call('file_delete', alice)));
    expect(explanation).toMatchObject({ engine: 'cel', default: 'deny', target: 'file_delete' });
    const [guests, transfers, rest] = explanation.rules;
    expect(guests).toMatchObject({
      id: 'read-only-for-guests',
      matched: true,
      decisive: true,
      events: { matched: true, reason: 'event "tools/call" matches ["tools/call"]' },
      tools: { matched: true, reason: '"file_delete" matches ["*delete*", "fs_write_*"]' },
      principals: { matched: true, reason: 'no principals filter' },
      when: {
        result: 'true',
        reason: 'true (principal.claims is absent)',
        conditions: [
          { expression: 'principal.type == "anonymous"', result: 'false' },
          {
            expression: '"admin" in principal.claims.roles',
            result: 'absent',
            detail: 'principal.claims is absent',
          },
        ],
      },
    });
    expect(transfers).toMatchObject({
      matched: false,
      decisive: false,
      tools: { matched: false, reason: '"file_delete" matches none of ["bank_transfer"]' },
    });
    // Shadowed: it matches, but an earlier rule decided.
    expect(rest).toMatchObject({ id: 'allow-rest', matched: true, decisive: false });
    expect(explanation.rateLimits).toEqual([
      { id: 'per-user-calls', key: 'alice', limit: 100, windowMs: 60_000, failOpen: true },
    ]);
  });

  it('shows the default deciding when no rule matches', () => {
    const strict = policyOf('  - {id: only-echo, effect: allow, tools: ["echo"]}');
    const explanation = explain(strict, call('other', alice));
    expect(explanation.decision.rule).toBe('default');
    expect(explanation.rules).toEqual([
      expect.objectContaining({ id: 'only-echo', matched: false, decisive: false }),
    ]);
  });

  it('explains a request without a name', () => {
    const explanation = explain(policy, {
      event: 'tools/list',
      phase: 'request',
      principal: alice,
    });
    expect(explanation.target).toBeUndefined();
    expect(explanation.rules[1]?.tools).toEqual({
      matched: false,
      reason: 'the request names no tool, prompt or resource',
    });
  });

  it('explains a failing condition', () => {
    const explanation = explain(
      denyWhen('arguments.amount > 10000'),
      call('t', alice, { amount: 'x' }),
    );
    const [rule] = explanation.rules;
    expect(rule).toMatchObject({ matched: true, decisive: true, when: { result: 'error' } });
    expect(rule?.when?.reason).toMatch(/failed to evaluate .*so this deny rule applies/);
    expect(rule?.error).toMatch(/no such overload/);
  });
});

describe('policyInputOf', () => {
  const context = { principal: alice, timestamp: '2026-01-01T00:00:00Z' };
  it.each([
    [
      'tools/call',
      { name: 'echo', arguments: { text: 'hi' } },
      { tool: 'echo', arguments: { text: 'hi' } },
    ],
    ['tools/call', { name: 'echo' }, { tool: 'echo' }],
    ['tools/call', { name: 42, arguments: [1] }, {}],
    [
      'prompts/get',
      { name: 'summary', arguments: { topic: 'x' } },
      { prompt: 'summary', arguments: { topic: 'x' } },
    ],
    ['resources/read', { uri: 'file:///a' }, { resource: 'file:///a' }],
    ['tools/list', { cursor: 'abc' }, {}],
    ['tools/call', 'not an object', {}],
  ])('%s %j', (event, payload, fields) => {
    expect(policyInputOf(event, 'request', payload, context)).toEqual({
      event,
      phase: 'request',
      principal: alice,
      ...fields,
    });
  });

  it('reads no names in the response phase and defaults the principal to anonymous', () => {
    expect(policyInputOf('tools/call', 'response', { name: 'echo' })).toEqual({
      event: 'tools/call',
      phase: 'response',
      principal: { type: 'anonymous' },
    });
  });
});

describe('matchRateLimits', () => {
  const policy = compilePolicy(
    [
      'version: 1',
      'rateLimits:',
      '  - {id: per-user, events: ["tools/call"], key: principal.id, limit: 100, window: 60s}',
      '  - id: per-tool',
      '    key: \'principal.type + ":" + tool\'',
      '    tools: ["expensive_*"]',
      '    limit: 5',
      '    window: 1h',
      '    failOpen: false',
      '    message: too many expensive calls',
      '  - id: per-account',
      '    tools: ["bank_*"]',
      '    key: arguments.account',
      '    limit: 3',
      '    window: 500ms',
      '  - id: guests-only',
      '    key: \'"guests"\'',
      '    when: principal.type == "anonymous"',
      '    limit: 10',
      '    window: 1m',
    ].join('\n'),
  );

  it.each([
    [call('echo', alice), [['per-user', 'alice']]],
    [
      call('echo', anonymous),
      [
        ['per-user', ''],
        ['guests-only', 'guests'],
      ],
    ],
    [
      call('expensive_search', alice),
      [
        ['per-user', 'alice'],
        ['per-tool', 'user:expensive_search'],
      ],
    ],
    [
      call('bank_pay', alice, { account: 1234 }),
      [
        ['per-user', 'alice'],
        ['per-account', '1234'],
      ],
    ],
    [
      call('bank_pay', alice),
      [
        ['per-user', 'alice'],
        ['per-account', ''],
      ],
    ],
    [{ event: 'prompts/get', phase: 'request', prompt: 'p', principal: alice }, []],
  ] as const)('%j matches %j', (input, want) => {
    expect(matchRateLimits(policy, input as PolicyInput).map((m) => [m.id, m.key])).toEqual(want);
  });

  it('carries limit, window, failOpen and message', () => {
    expect(matchRateLimits(policy, call('expensive_x', alice))[1]).toEqual({
      id: 'per-tool',
      key: 'user:expensive_x',
      limit: 5,
      windowMs: 3_600_000,
      failOpen: false,
      message: 'too many expensive calls',
    });
  });

  it.each([
    ['size(arguments.items)', { items: [1, 2] }, '2'],
    ['arguments.flag', { flag: true }, 'true'],
    ['arguments.tags', { tags: ['a', 1] }, '["a",1]'],
    ['arguments.n', { n: 1.5 }, '1.5'],
  ])('renders key %s of %j as %j', (key, args, want) => {
    const keyed = compilePolicy(
      `version: 1\nrateLimits:\n  - {id: k, key: '${key}', limit: 1, window: 1s}\n`,
    );
    expect(matchRateLimits(keyed, call('t', alice, args))[0]?.key).toBe(want);
  });
});

describe('rate-limit keys from hostile arguments', () => {
  const keyed = (key: string) =>
    compilePolicy(`version: 1\nrateLimits:\n  - {id: k, key: '${key}', limit: 1, window: 1s}\n`);
  const nested = (depth: number): unknown =>
    JSON.parse(`${'{"a":['.repeat(depth)}"bob@example.com"${']}'.repeat(depth)}`);

  it('renders a 10,000-deep key without overflowing the stack', () => {
    const [match] = matchRateLimits(keyed('arguments.a'), call('t', alice, { a: nested(10_000) }));
    expect(match?.key.startsWith('{"a":[{"a":[')).toBe(true);
    expect(match?.key).toContain('"bob@example.com"');
  });

  it('fails a key whose text would exceed MAX_KEY_CHARS, or that is cyclic, like an unreadable one', () => {
    const policy = keyed('arguments.m');
    const huge = ['x'.repeat(MAX_KEY_CHARS)];
    expect(matchRateLimits(policy, call('t', alice, { m: huge }))[0]?.key).toBe('');
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(matchRateLimits(policy, call('t', alice, { m: cyclic }))[0]?.key).toBe('');
    const atLimit = ['x'.repeat(MAX_KEY_CHARS - 4)];
    expect(matchRateLimits(policy, call('t', alice, { m: atLimit }))[0]?.key).toHaveLength(
      MAX_KEY_CHARS,
    );
  });

  it.each([
    [
      { b: 1, a: [2, { d: null, c: 'x' }] },
      { a: [2, { c: 'x', d: null }], b: 1 },
    ],
    [
      { z: true, '': 0 },
      { '': 0, z: true },
    ],
  ])('renders maps canonically: %j and %j share a bucket', (one, two) => {
    const policy = keyed('arguments.m');
    const keyOf = (m: unknown) => matchRateLimits(policy, call('t', alice, { m }))[0]?.key;
    expect(keyOf(one)).toBe(keyOf(two));
  });

  it.each([
    [{ m: { b: 1, a: 'x' } }, '{"a":"x","b":1}'],
    [{ m: [1, 'two', null, true, { k: [] }] }, '[1,"two",null,true,{"k":[]}]'],
    [{ m: { s: 'quote " and \\ and \n' } }, '{"s":"quote \\" and \\\\ and \\n"}'],
    [{ m: { big: 12345678901234567890n } }, '{"big":"12345678901234567890"}'],
    [{ m: { when: new Date(0) } }, '{"when":"1970-01-01T00:00:00.000Z"}'],
    [{ m: [undefined, Number.NaN] }, '[null,null]'],
    [{ m: { gone: undefined, kept: 1 } }, '{"kept":1}'],
  ])('renders case %#', (args, want) => {
    expect(matchRateLimits(keyed('arguments.m'), call('t', alice, args))[0]?.key).toBe(want);
  });
});
