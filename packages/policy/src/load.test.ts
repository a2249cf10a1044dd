import { describe, expect, it } from 'vitest';
import { ISSUE_POLICY } from '../test/policies.ts';
import {
  allowAllPolicy,
  type CompiledPolicy,
  compilePolicy,
  DEFAULT_POLICY_EVENTS,
  evaluate,
  type PolicyIssue,
  PolicyLoadError,
  parseDuration,
} from './index.ts';

function loadIssues(text: string): readonly PolicyIssue[] {
  try {
    compilePolicy(text, { sourceName: 'policy.yaml' });
  } catch (error) {
    expect(error).toBeInstanceOf(PolicyLoadError);
    expect((error as PolicyLoadError).code).toBe('INVALID_POLICY');
    return (error as PolicyLoadError).issues;
  }
  throw new Error('expected the policy to be rejected');
}

describe('compilePolicy', () => {
  it('compiles the issue example and describes it', () => {
    const policy = compilePolicy(ISSUE_POLICY, { sourceName: 'policy.yaml' });
    expect(policy).toMatchObject({
      version: 1,
      engine: 'cel',
      default: 'deny',
      events: DEFAULT_POLICY_EVENTS,
      sourceName: 'policy.yaml',
      cedarPolicies: [],
    });
    expect(policy.rules.map((r) => r.id)).toEqual([
      'read-only-for-guests',
      'big-transfers',
      'allow-rest',
    ]);
    expect(policy.rules[1]).toEqual({
      id: 'big-transfers',
      effect: 'deny',
      events: ['tools/call', 'prompts/get', 'resources/read'],
      tools: ['bank_transfer'],
      when: 'arguments.amount > 10000',
    });
    expect(policy.rateLimits).toEqual([
      {
        id: 'per-user-calls',
        events: ['tools/call'],
        key: 'principal.id',
        limit: 100,
        window: '60s',
        windowMs: 60_000,
        failOpen: true,
      },
    ]);
    expect(policy.fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(Object.isFrozen(policy)).toBe(true);
  });

  it('applies the documented defaults', () => {
    const policy = compilePolicy('version: 1\n');
    expect(policy).toMatchObject({ engine: 'cel', default: 'deny', rules: [], rateLimits: [] });
    expect(policy.events).toEqual(['tools/call', 'prompts/get', 'resources/read']);
  });

  it('gives rules without events the top-level events', () => {
    const policy = compilePolicy(
      'version: 1\nevents: ["tools/*"]\nrules:\n  - {id: a, effect: allow}\n  - {id: b, effect: allow, events: ["*"]}\n',
    );
    expect(policy.events).toEqual(['tools/*']);
    expect(policy.rules.map((r) => r.events)).toEqual([['tools/*'], ['*']]);
  });

  it('accepts JSON, a subset of YAML', () => {
    const policy = compilePolicy(
      JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'x', effect: 'deny' }] }),
    );
    expect(policy.default).toBe('allow');
  });

  it('fingerprints the text', () => {
    expect(compilePolicy('version: 1\n').fingerprint).toBe(
      compilePolicy('version: 1\n').fingerprint,
    );
    expect(compilePolicy('version: 1\n').fingerprint).not.toBe(
      compilePolicy('version: 1\ndefault: allow\n').fingerprint,
    );
  });

  it('reports a CEL syntax error with the rule id, line and column', () => {
    const text = [
      'version: 1',
      'rules:',
      '  - id: ok',
      '    effect: allow',
      '  - id: big-transfers',
      '    effect: deny',
      "    when: 'arguments.amount >'",
    ].join('\n');
    const [issue, ...rest] = loadIssues(text);
    expect(rest).toEqual([]);
    expect(issue).toMatchObject({ path: 'rules[1].when', rule: 'big-transfers', line: 7 });
    expect(issue?.message).toMatch(/^invalid CEL: Unexpected token/);
    // The offending position is the end of the expression inside the quotes.
    expect(issue?.column).toBe(12 + 'arguments.amount >'.length);
  });

  it('reports a CEL type error in a block scalar on its own line', () => {
    const text = [
      'version: 1',
      'rules:',
      '  - id: guests',
      '    effect: deny',
      '    when: |',
      '      principal.type == "anonymous" &&',
      '        amount > 10',
    ].join('\n');
    const [issue] = loadIssues(text);
    expect(issue).toMatchObject({
      path: 'rules[0].when',
      rule: 'guests',
      line: 7,
      column: 9,
      message: 'invalid CEL: Unknown variable: amount',
    });
  });

  it.each([
    ['a non-bool condition', 'arguments.amount + 1', /must be a bool expression, not int/],
    ['an unknown function', 'frobnicate(tool)', /frobnicate/],
    ['a mistyped comparison', 'tool == 1', /no such overload/],
  ])('rejects %s at load', (_, when, message) => {
    const [issue] = loadIssues(
      `version: 1\nrules:\n  - id: r\n    effect: deny\n    when: '${when}'\n`,
    );
    expect(issue).toMatchObject({ path: 'rules[0].when', rule: 'r', line: 5 });
    expect(issue?.message).toMatch(message);
  });

  it('rejects unknown keys at every level, with a hint and the allowed keys', () => {
    const text = [
      'version: 1',
      'defualt: allow',
      'rules:',
      '  - id: a',
      '    efect: deny',
      'rateLimits:',
      '  - {id: l, key: principal.id, limit: 1, window: 1s, burst: 2}',
    ].join('\n');
    const issues = loadIssues(text);
    expect(issues.map((i) => [i.path, i.line, i.column])).toEqual([
      ['defualt', 2, 1],
      ['rules[0].effect', 4, 5],
      ['rules[0].efect', 5, 5],
      ['rateLimits[0].burst', 7, 54],
    ]);
    expect(issues[0]?.message).toBe(
      'unknown key "defualt" (did you mean "default"?); allowed: version, engine, default, description, events, rules, rateLimits, cedar, pinning',
    );
    expect(issues[1]?.message).toBe('is required (expected one of "allow"|"deny")');
    expect(issues[2]?.message).toMatch(/^unknown key "efect" \(did you mean "effect"\?\)/);
    expect(issues[3]).toMatchObject({ rule: 'l' });
  });

  it('reads pinning: off without the block, on with enabled: true, failOpen by default', () => {
    expect(compilePolicy('version: 1\n').pinning).toEqual({ enabled: false, failOpen: true });
    expect(allowAllPolicy().pinning).toEqual({ enabled: false, failOpen: true });
    expect(compilePolicy('version: 1\npinning: {enabled: true}\n').pinning).toEqual({
      enabled: true,
      failOpen: true,
    });
    expect(
      compilePolicy('version: 1\npinning:\n  enabled: true\n  failOpen: false\n').pinning,
    ).toEqual({ enabled: true, failOpen: false });
  });

  it('rejects a bad pinning block, naming the key', () => {
    const issues = loadIssues(
      ['version: 1', 'pinning:', '  enabld: true', '  failOpen: "no"'].join('\n'),
    );
    expect(issues.map((i) => [i.path, i.line, i.column])).toEqual([
      ['pinning.enabld', 3, 3],
      ['pinning.failOpen', 4, 13],
    ]);
    expect(issues[0]?.message).toBe(
      'unknown key "enabld" (did you mean "enabled"?); allowed: enabled, failOpen',
    );
    expect(issues[1]?.message).toMatch(/boolean/);
    expect(loadIssues('version: 1\npinning: true\n')[0]).toMatchObject({ path: 'pinning' });
  });

  it('rejects duplicate rule and rate-limit ids', () => {
    const text = [
      'version: 1',
      'rules:',
      '  - {id: a, effect: allow}',
      '  - {id: a, effect: deny}',
      'rateLimits:',
      '  - {id: a, key: principal.id, limit: 1, window: 1s}',
      '  - {id: a, key: principal.id, limit: 2, window: 1s}',
    ].join('\n');
    expect(loadIssues(text)).toEqual([
      {
        path: 'rules[1].id',
        rule: 'a',
        line: 4,
        column: 10,
        message: 'duplicate rule id "a" (first used by rules[0])',
      },
      {
        path: 'rateLimits[1].id',
        rule: 'a',
        line: 7,
        column: 10,
        message: 'duplicate rate limit id "a" (first used by rateLimits[0])',
      },
    ]);
  });

  it.each([
    ['a missing version', 'default: allow\n', 'version', /is required/],
    ['another version', 'version: 2\n', 'version', /must be 1/],
    ['a bad default', 'version: 1\ndefault: maybe\n', 'default', /allow.*deny/],
    ['a bad engine', 'version: 1\nengine: opa\n', 'engine', /cel.*cedar/],
    [
      'a bad event pattern',
      'version: 1\nrules:\n  - {id: a, effect: deny, events: ["tools*"]}\n',
      'rules[0].events[0]',
      /prefix/,
    ],
    [
      'an empty tools list',
      'version: 1\nrules:\n  - {id: a, effect: deny, tools: []}\n',
      'rules[0].tools',
      /at least one/,
    ],
    [
      'a bad principal pattern',
      'version: 1\nrules:\n  - {id: a, effect: deny, principals: ["admin"]}\n',
      'rules[0].principals[0]',
      /user, service, anonymous/,
    ],
    [
      'a rule id with spaces',
      'version: 1\nrules:\n  - {id: "a b", effect: deny}\n',
      'rules[0].id',
      /letters, digits/,
    ],
    [
      'the reserved id "default"',
      'version: 1\nrules:\n  - {id: default, effect: deny}\n',
      'rules[0].id',
      /reserved/,
    ],
    [
      'a bad window',
      'version: 1\nrateLimits:\n  - {id: l, key: principal.id, limit: 1, window: 1w}\n',
      'rateLimits[0].window',
      /duration/,
    ],
    [
      'a zero limit',
      'version: 1\nrateLimits:\n  - {id: l, key: principal.id, limit: 0, window: 1s}\n',
      'rateLimits[0].limit',
      /.+/,
    ],
    [
      'a bad rate-limit key',
      'version: 1\nrateLimits:\n  - {id: l, key: "principal.", limit: 1, window: 1s}\n',
      'rateLimits[0].key',
      /invalid CEL/,
    ],
    [
      'rules with engine cedar',
      'version: 1\nengine: cedar\ncedar: {policies: "permit(principal, action, resource);"}\nrules:\n  - {id: a, effect: deny}\n',
      'rules',
      /engine: cedar takes its rules from cedar.policies/,
    ],
    ['engine cedar without a cedar block', 'version: 1\nengine: cedar\n', 'cedar', /required/],
    [
      'a cedar block with engine cel',
      'version: 1\ncedar: {policies: "permit(principal, action, resource);"}\n',
      'cedar',
      /only valid with engine: cedar/,
    ],
    ['a list document', '- 1\n', '', /mapping/],
    ['an empty document', '', '', /empty/],
  ])('rejects %s', (_, text, path, message) => {
    const issues = loadIssues(text);
    expect(issues.map((i) => i.path)).toContain(path);
    expect(issues.find((i) => i.path === path)?.message).toMatch(message);
  });

  it('reports YAML syntax errors with their position', () => {
    const [issue] = loadIssues('version: 1\nrules: [\n  {id: a\n');
    expect(issue?.message).toMatch(/^YAML: /);
    expect(issue?.line).toBeGreaterThan(1);
  });

  it('reports duplicate YAML keys', () => {
    const [issue] = loadIssues('version: 1\ndefault: allow\ndefault: deny\n');
    expect(issue).toMatchObject({ line: 3, column: 1 });
    expect(issue?.message).toMatch(/unique/);
  });

  it('formats every issue into the error message', () => {
    expect(() => compilePolicy('version: 1\nfoo: 1\nbar: 2\n', { sourceName: 'p.yaml' })).toThrow(
      /^invalid policy p\.yaml:\n {2}p\.yaml:2:1: foo: unknown key "foo".*\n {2}p\.yaml:3:1: bar: unknown key "bar"/,
    );
  });
});

describe('allowAllPolicy', () => {
  it('allows everything, by default', () => {
    const policy: CompiledPolicy = allowAllPolicy();
    expect(policy).toMatchObject({ default: 'allow', rules: [], fingerprint: 'allow-all' });
    expect(
      evaluate(policy, { event: 'tools/call', phase: 'request', principal: { type: 'anonymous' } }),
    ).toEqual({ allowed: true, rule: 'default' });
  });
});

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['1s', 1000],
    ['60s', 60_000],
    ['5m', 300_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
    ['0s', undefined],
    ['1.5s', undefined],
    ['10', undefined],
    ['1w', undefined],
    [' 1s', undefined],
    ['-1s', undefined],
  ])('%j is %s ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });
});

describe('misuse', () => {
  it('refuses a policy object that was not compiled', () => {
    const fake = { ...allowAllPolicy() } as CompiledPolicy;
    expect(() =>
      evaluate(fake, { event: 'tools/call', phase: 'request', principal: { type: 'anonymous' } }),
    ).toThrow(/not a compiled policy/);
  });
});
