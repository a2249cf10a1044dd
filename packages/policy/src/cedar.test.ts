import type { Principal } from '@fleet/core';
import { describe, expect, it } from 'vitest';
import { CEDAR_POLICY } from '../test/policies.ts';
import {
  compilePolicy,
  evaluate,
  explain,
  type PolicyInput,
  type PolicyIssue,
  PolicyLoadError,
} from './index.ts';

const anonymous: Principal = { type: 'anonymous' };
const alice: Principal = { type: 'user', id: 'alice' };
const admin: Principal = { type: 'user', id: 'root', claims: { roles: ['admin'] } };

function call(tool: string, principal: Principal, args?: Record<string, unknown>): PolicyInput {
  return {
    event: 'tools/call',
    phase: 'request',
    tool,
    principal,
    ...(args ? { arguments: args } : {}),
  };
}

function cedarPolicy(policies: string, extra = ''): ReturnType<typeof compilePolicy> {
  const indented = policies
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');
  return compilePolicy(`version: 1\nengine: cedar\n${extra}cedar:\n  policies: |\n${indented}\n`);
}

function loadIssues(text: string): readonly PolicyIssue[] {
  try {
    compilePolicy(text);
  } catch (error) {
    expect(error).toBeInstanceOf(PolicyLoadError);
    return (error as PolicyLoadError).issues;
  }
  throw new Error('expected the policy to be rejected');
}

describe('Cedar engine', () => {
  const policy = compilePolicy(CEDAR_POLICY);

  it('lists its policies by @id, in text order', () => {
    expect(policy.engine).toBe('cedar');
    expect(policy.rules).toEqual([]);
    expect(policy.cedarPolicies).toEqual([
      { id: 'users-and-services', effect: 'allow' },
      { id: 'guests-read', effect: 'allow' },
      { id: 'read-only-for-guests', effect: 'deny', message: 'Only admins may delete' },
      { id: 'big-transfers', effect: 'deny' },
      { id: 'no-secrets', effect: 'deny' },
    ]);
  });

  it.each([
    [
      'a user deletes',
      call('file_delete', alice),
      false,
      'read-only-for-guests',
      'denied by rule "read-only-for-guests": Only admins may delete',
    ],
    ['an admin deletes', call('file_delete', admin), true, 'users-and-services'],
    [
      'a big transfer',
      call('bank_transfer', admin, { amount: 20_000 }),
      false,
      'big-transfers',
      'denied by rule "big-transfers"',
    ],
    ['a small transfer', call('bank_transfer', admin, { amount: 50 }), true, 'users-and-services'],
    ['a transfer without amount', call('bank_transfer', admin), true, 'users-and-services'],
    ['anonymous reads', call('read_file', anonymous), true, 'guests-read'],
    [
      'anonymous writes',
      call('write_file', anonymous),
      false,
      'default',
      'denied by rule "default": no rule allowed it',
    ],
    [
      'a secret resource',
      { event: 'resources/read', phase: 'request', resource: 'secret://k', principal: alice },
      false,
      'no-secrets',
    ],
    [
      'a prompt',
      { event: 'prompts/get', phase: 'request', prompt: 'summary', principal: alice },
      true,
      'users-and-services',
    ],
  ] as const)('%s', (_, input, allowed, rule, message?: string) => {
    const decision = evaluate(policy, input as PolicyInput);
    expect(decision).toMatchObject({ allowed, rule });
    if (message) expect(decision.message).toBe(message);
    if (!allowed) expect(decision.message).toBeDefined();
    else expect(decision.message).toBeUndefined();
    if (rule !== 'default') expect(decision.reasons).toContain(rule);
  });

  it('numbers unannotated policies in text order, also past ten', () => {
    const many = cedarPolicy(
      Array.from(
        { length: 12 },
        (_, i) => `permit(principal, action, resource == Tool::"t${i}");`,
      ).join('\n'),
    );
    expect(many.cedarPolicies.map((p) => p.id)).toEqual(
      Array.from({ length: 12 }, (_, i) => `policy${i}`),
    );
    expect(evaluate(many, call('t11', alice))).toMatchObject({ allowed: true, rule: 'policy11' });
    expect(evaluate(many, call('t2', alice))).toMatchObject({ allowed: true, rule: 'policy2' });
  });

  it('maps principals, actions, resources and context', () => {
    const mapped = cedarPolicy(
      [
        'permit(principal == User::"alice", action == Action::"tools/call", resource == Tool::"echo")',
        '  when { context.event == "tools/call" && context.phase == "request" && context.arguments.n == 1 };',
        'permit(principal == Service::"ci", action == Action::"prompts/get", resource == Prompt::"p");',
        'permit(principal == Anonymous::"anonymous", action == Action::"resources/read", resource == Resource::"file:///a")',
        '  when { resource.name == "file:///a" };',
        'permit(principal, action == Action::"tools/list", resource == Server::"mcp")',
        '  when { context.claims.team == "x" };',
      ].join('\n'),
    );
    const cases: [PolicyInput, boolean][] = [
      [call('echo', alice, { n: 1 }), true],
      [call('echo', alice, { n: 2 }), false],
      [
        {
          event: 'prompts/get',
          phase: 'request',
          prompt: 'p',
          principal: { type: 'service', id: 'ci' },
        },
        true,
      ],
      [
        { event: 'resources/read', phase: 'request', resource: 'file:///a', principal: anonymous },
        true,
      ],
      [
        {
          event: 'tools/list',
          phase: 'request',
          principal: { type: 'user', claims: { team: 'x' } },
        },
        true,
      ],
      [{ event: 'tools/list', phase: 'request', principal: alice }, false],
    ];
    for (const [input, allowed] of cases) expect(evaluate(mapped, input).allowed).toBe(allowed);
  });

  it('prefixes entity types with the namespace', () => {
    const namespaced = cedarPolicy(
      'permit(principal is Acme::User, action == Acme::Action::"tools/call", resource is Acme::Tool);',
      '',
    );
    expect(evaluate(namespaced, call('x', alice)).allowed).toBe(false);
    const withNamespace = compilePolicy(
      'version: 1\nengine: cedar\ncedar:\n  namespace: Acme\n  policies: \'permit(principal is Acme::User, action == Acme::Action::"tools/call", resource is Acme::Tool);\'\n',
    );
    expect(evaluate(withNamespace, call('x', alice)).allowed).toBe(true);
  });

  it('converts argument values: integers, decimals, sets, records; drops nulls', () => {
    const values = cedarPolicy(
      [
        'permit(principal, action, resource) when {',
        '  context.arguments.n == 3 &&',
        '  context.arguments.price.greaterThan(decimal("10.2")) &&',
        '  context.arguments.tags.contains("a") &&',
        '  context.arguments.nested.ok &&',
        '  !(context.arguments has gone)',
        '};',
      ].join('\n'),
    );
    const args = { n: 3, price: 10.25, tags: ['a', 'b'], nested: { ok: true }, gone: null };
    expect(evaluate(values, call('t', alice, args))).toMatchObject({ allowed: true });
  });

  it('does not let arguments forge entity references', () => {
    const forged = cedarPolicy(
      'permit(principal, action, resource) when { context.arguments.owner == User::"root" };',
    );
    const args = { owner: { __entity: { type: 'User', id: 'root' } } };
    expect(evaluate(forged, call('t', alice, args)).allowed).toBe(false);
  });

  it('keeps Cedar semantics: a failing policy is skipped, and reported', () => {
    const skipping = cedarPolicy(
      [
        '@id("all") permit(principal, action, resource);',
        '@id("big") forbid(principal, action, resource) when { context.arguments.amount > 10 };',
      ].join('\n'),
    );
    expect(evaluate(skipping, call('t', alice))).toEqual({
      allowed: true,
      rule: 'all',
      reasons: ['all'],
      errors: [{ rule: 'big', message: expect.stringMatching(/attribute `amount`/) }],
    });
  });

  it('applies the default when no policy decides, but never allows past a failing forbid', () => {
    const open = cedarPolicy(
      '@id("big") forbid(principal, action, resource) when { context.arguments.amount > 10 };',
      'default: allow\n',
    );
    expect(evaluate(open, call('t', alice, { amount: 1 }))).toEqual({
      allowed: true,
      rule: 'default',
    });
    expect(evaluate(open, call('t', alice, { amount: 11 })).rule).toBe('big');
    expect(evaluate(open, call('t', alice))).toMatchObject({
      allowed: false,
      rule: 'default',
      errors: [{ rule: 'big' }],
    });
  });

  it('explains which policies were satisfied and which decided', () => {
    const explanation = explain(policy, call('file_delete', alice));
    expect(explanation.engine).toBe('cedar');
    expect(explanation.decision).toEqual(evaluate(policy, call('file_delete', alice)));
    expect(explanation.rules.map((r) => [r.id, r.matched, r.decisive])).toEqual([
      ['users-and-services', true, false],
      ['guests-read', false, false],
      ['read-only-for-guests', true, true],
      ['big-transfers', false, false],
      ['no-secrets', false, false],
    ]);
  });

  it('explains a failing policy', () => {
    const skipping = cedarPolicy(
      '@id("big") forbid(principal, action, resource) when { context.arguments.amount > 10 };',
    );
    const [rule] = explain(skipping, call('t', alice)).rules;
    expect(rule).toMatchObject({ id: 'big', matched: false, decisive: false });
    expect(rule?.error).toMatch(/amount/);
    expect(rule?.reason).toMatch(/^failed to evaluate/);
  });
});

describe('Cedar load errors', () => {
  it('reports a syntax error at its YAML line and column', () => {
    const text = [
      'version: 1',
      'engine: cedar',
      'cedar:',
      '  policies: |',
      '    permit(principal, action, resource);',
      '    forbid(principal, action, resource) when { context.x = 1 };',
    ].join('\n');
    const [issue, ...rest] = loadIssues(text);
    expect(rest).toEqual([]);
    expect(issue).toMatchObject({ path: 'cedar.policies', line: 6 });
    expect(issue?.message).toMatch(/^invalid Cedar: /);
    expect(issue?.column).toBeGreaterThan(40);
  });

  it.each([
    [
      'duplicate ids',
      '@id("a") permit(principal, action, resource);\n@id("a") forbid(principal, action, resource);',
      /duplicate policy id "a"/,
    ],
    ['the reserved id', '@id("default") permit(principal, action, resource);', /reserved/],
    [
      'an id with spaces',
      '@id("my policy") permit(principal, action, resource);',
      /letters, digits/,
    ],
    [
      'templates',
      'permit(principal == ?principal, action, resource);',
      /templates are not supported/,
    ],
  ])('rejects %s', (_, policies, message) => {
    const indented = policies
      .split('\n')
      .map((l) => `    ${l}`)
      .join('\n');
    const issues = loadIssues(`version: 1\nengine: cedar\ncedar:\n  policies: |\n${indented}\n`);
    expect(issues[0]?.message).toMatch(message);
  });

  const schema = [
    '    entity User, Service, Anonymous;',
    '    entity Tool, Prompt, Resource, Server { name: String };',
    '    action "tools/call" appliesTo {',
    '      principal: [User, Service, Anonymous],',
    '      resource: [Tool],',
    '      context: { event: String, phase: String },',
    '    };',
  ].join('\n');

  it('validates the policies against a schema when one is given', () => {
    const ok = `version: 1\nengine: cedar\ncedar:\n  schema: |\n${schema}\n  policies: |\n    permit(principal, action, resource) when { resource.name == "x" };\n`;
    expect(compilePolicy(ok).engine).toBe('cedar');
    const typo = ok.replace('resource.name', 'resource.nmae');
    const [issue] = loadIssues(typo);
    expect(issue).toMatchObject({ path: 'cedar.policies', line: 13 });
    expect(issue?.message).toMatch(/policy "policy0": .*nmae/);
  });

  it('reports a broken schema', () => {
    const issues = loadIssues(
      'version: 1\nengine: cedar\ncedar:\n  schema: "entity {"\n  policies: "permit(principal, action, resource);"\n',
    );
    expect(issues[0]?.message).toMatch(/^invalid Cedar: /);
  });
});
