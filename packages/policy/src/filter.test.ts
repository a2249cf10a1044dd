import type { Principal } from '@fleet/core';
import { describe, expect, it } from 'vitest';
import { CEDAR_POLICY, ISSUE_POLICY } from '../test/policies.ts';
import {
  allowAllPolicy,
  compilePolicy,
  couldEverAllow,
  FILTERABLE_LIST_EVENTS,
  filterListResult,
  filterPromptsList,
  filterResourcesList,
  filterToolsList,
} from './index.ts';

const anonymous: Principal = { type: 'anonymous' };
const alice: Principal = { type: 'user', id: 'alice' };
const admin: Principal = { type: 'user', id: 'root', claims: { roles: ['admin'] } };

function rules(text: string, defaults = 'deny'): ReturnType<typeof compilePolicy> {
  return compilePolicy(`version: 1\ndefault: ${defaults}\nrules:\n${text}`);
}

describe('couldEverAllow (CEL)', () => {
  const issue = compilePolicy(ISSUE_POLICY);

  it.each([
    ['an unconditional deny for this principal removes', issue, 'file_delete', alice, false],
    ['the same deny does not apply to an admin', issue, 'file_delete', admin, true],
    ['an argument-dependent deny keeps', issue, 'bank_transfer', alice, true],
    ['a tool no rule names falls to allow-rest', issue, 'echo', anonymous, true],
    [
      'default deny with no allow rule that could match removes',
      rules('  - {id: echo, effect: allow, tools: ["echo"]}'),
      'other',
      alice,
      false,
    ],
    [
      'default deny with a matching allow keeps',
      rules('  - {id: echo, effect: allow, tools: ["echo"]}'),
      'echo',
      alice,
      true,
    ],
    [
      'an argument-dependent allow keeps',
      rules('  - {id: small, effect: allow, when: "arguments.amount < 10"}'),
      'pay',
      alice,
      true,
    ],
    [
      'an allow whose principal condition is false removes',
      rules('  - {id: admins, effect: allow, when: \'"admin" in principal.claims.roles\'}'),
      'pay',
      alice,
      false,
    ],
    [
      'a mixed condition decided by its known part',
      rules(
        '  - {id: d, effect: deny, when: \'principal.type == "anonymous" || arguments.x == 1\'}\n  - {id: a, effect: allow}',
      ),
      'pay',
      anonymous,
      false,
    ],
    [
      'a mixed condition left open by its unknown part',
      rules(
        '  - {id: d, effect: deny, when: \'principal.type == "anonymous" || arguments.x == 1\'}\n  - {id: a, effect: allow}',
      ),
      'pay',
      alice,
      true,
    ],
    [
      'an argument-dependent deny passed over, then a sure deny',
      rules(
        '  - {id: d1, effect: deny, when: "arguments.x == 1"}\n  - {id: d2, effect: deny}\n  - {id: a, effect: allow}',
        'allow',
      ),
      'pay',
      alice,
      false,
    ],
    [
      'a deny whose when is false for the principal',
      rules('  - {id: d, effect: deny, when: \'principal.type == "anonymous"\'}', 'allow'),
      'pay',
      alice,
      true,
    ],
    [
      'a deny scoped to other principals',
      rules('  - {id: d, effect: deny, principals: ["anonymous"]}', 'allow'),
      'pay',
      alice,
      true,
    ],
    ['no policy at all', allowAllPolicy(), 'anything', anonymous, true],
  ] as const)('%s', (_, policy, tool, principal, want) => {
    expect(couldEverAllow(policy, { event: 'tools/call', tool, principal })).toBe(want);
  });

  it('asks about the call event, not the list event', () => {
    const policy = rules('  - {id: a, effect: allow, events: ["prompts/get"], tools: ["p*"]}');
    expect(couldEverAllow(policy, { event: 'prompts/get', prompt: 'p1', principal: alice })).toBe(
      true,
    );
    expect(couldEverAllow(policy, { event: 'tools/call', tool: 'p1', principal: alice })).toBe(
      false,
    );
  });
});

describe('couldEverAllow (Cedar, partial evaluation)', () => {
  const policy = compilePolicy(CEDAR_POLICY);

  it.each([
    ['a satisfied forbid removes', 'file_delete', alice, false],
    ['a forbid the principal escapes keeps', 'file_delete', admin, true],
    ['an argument-dependent forbid keeps', 'bank_transfer', alice, true],
    ['a permit for anonymous keeps', 'read_file', anonymous, true],
    ['no permit for anonymous removes', 'write_file', anonymous, false],
  ] as const)('%s', (_, tool, principal, want) => {
    expect(couldEverAllow(policy, { event: 'tools/call', tool, principal })).toBe(want);
  });

  function cedarPolicies(policies: string): ReturnType<typeof compilePolicy> {
    return compilePolicy(
      `version: 1\nengine: cedar\ncedar:\n  policies: |\n${policies
        .split('\n')
        .map((l) => `    ${l}`)
        .join('\n')}\n`,
    );
  }

  it.each([
    [
      'a forbid that other arguments avoid keeps',
      'permit(principal, action, resource);\nforbid(principal, action, resource) unless { context.arguments has confirm };',
      true,
    ],
    [
      'a forbid that reads arguments but holds whatever they are removes',
      'permit(principal, action, resource);\nforbid(principal, action, resource) when { principal is User || context.arguments has x };',
      false,
    ],
    [
      'a permit that only some arguments satisfy keeps',
      'permit(principal, action, resource) when { context.arguments has ok && context.arguments.ok };',
      true,
    ],
    [
      'a permit that reads arguments but never applies to the tool removes',
      'permit(principal, action, resource == Tool::"other") when { context.arguments has ok };',
      false,
    ],
  ])('%s (partial evaluation)', (_, policies, want) => {
    expect(
      couldEverAllow(cedarPolicies(policies), { event: 'tools/call', tool: 't', principal: alice }),
    ).toBe(want);
  });

  it('keeps what the default could allow', () => {
    const open = compilePolicy(
      "version: 1\nengine: cedar\ndefault: allow\ncedar:\n  policies: 'forbid(principal, action, resource) when { context.arguments.x == 1 };'\n",
    );
    expect(couldEverAllow(open, { event: 'tools/call', tool: 't', principal: alice })).toBe(true);
  });
});

describe('list filtering', () => {
  const policy = compilePolicy(ISSUE_POLICY);
  const tools = {
    tools: [
      { name: 'echo', inputSchema: { type: 'object' } },
      { name: 'file_delete', inputSchema: { type: 'object' } },
      { name: 'bank_transfer', inputSchema: { type: 'object' } },
      { name: 'fs_write_file', inputSchema: { type: 'object' } },
    ],
    nextCursor: 'page-2',
  };

  it('removes the tools a principal could never call and keeps the rest of the result', () => {
    const filtered = filterToolsList(policy, tools, alice);
    expect(filtered).toEqual({
      result: { tools: [tools.tools[0], tools.tools[2]], nextCursor: 'page-2' },
      total: 4,
      kept: 2,
      removed: ['file_delete', 'fs_write_file'],
    });
    expect(tools.tools).toHaveLength(4);
  });

  it('returns the input itself when nothing is removed', () => {
    const filtered = filterToolsList(policy, tools, admin);
    expect(filtered.result).toBe(tools);
    expect(filtered).toMatchObject({ total: 4, kept: 4, removed: [] });
  });

  it('filters prompts by name and resources by URI', () => {
    const strict = rules(
      [
        '  - {id: prompts, effect: allow, events: ["prompts/get"], tools: ["public_*"]}',
        '  - {id: files, effect: allow, events: ["resources/read"], tools: ["file:///public/*"]}',
      ].join('\n'),
    );
    const prompts = { prompts: [{ name: 'public_summary' }, { name: 'internal_review' }] };
    expect(filterPromptsList(strict, prompts, alice).removed).toEqual(['internal_review']);
    const resources = {
      resources: [
        { uri: 'file:///public/a', name: 'a' },
        { uri: 'file:///private/b', name: 'b' },
      ],
    };
    expect(filterResourcesList(strict, resources, alice)).toMatchObject({
      result: { resources: [{ uri: 'file:///public/a', name: 'a' }] },
      removed: ['file:///private/b'],
    });
  });

  it('filters with the Cedar engine too', () => {
    const cedar = compilePolicy(CEDAR_POLICY);
    expect(filterToolsList(cedar, tools, alice).removed).toEqual(['file_delete']);
    expect(filterToolsList(cedar, tools, anonymous).removed).toEqual([
      'echo',
      'file_delete',
      'bank_transfer',
      'fs_write_file',
    ]);
  });

  it.each([
    ['an event that is not a list', 'tools/call', tools],
    ['a result without the item array', 'tools/list', { other: [] }],
    ['a result that is not an object', 'tools/list', 'nope'],
    ['resource templates', 'resources/templates/list', { resourceTemplates: [] }],
  ])('leaves %s alone', (_, event, result) => {
    expect(filterListResult(policy, event, result, alice)).toEqual({
      result,
      total: 0,
      kept: 0,
      removed: [],
    });
  });

  it('keeps items without a name', () => {
    const odd = { tools: [{ title: 'nameless' }, 42, { name: 'file_delete' }] };
    expect(filterListResult(policy, 'tools/list', odd, alice)).toEqual({
      result: { tools: [{ title: 'nameless' }, 42] },
      total: 3,
      kept: 2,
      removed: ['file_delete'],
    });
  });

  it('names the list events it filters', () => {
    expect(FILTERABLE_LIST_EVENTS).toEqual(['tools/list', 'prompts/list', 'resources/list']);
  });
});
