import { describe, expect, it } from 'vitest';
import { listDigest, listMethodsOf } from './aggregate.ts';

const echo = { name: 'echo', inputSchema: { type: 'object', properties: { text: {} } } };
const add = { name: 'add', inputSchema: { type: 'object' } };

describe('listDigest', () => {
  it.each([
    ['the items in another order', { 'tools/list': [add, echo] }],
    [
      "an item's keys in another order",
      {
        'tools/list': [
          { inputSchema: { properties: { text: {} }, type: 'object' }, name: 'echo' },
          add,
        ],
      },
    ],
  ])('is the same for %s', (_what, other) => {
    expect(listDigest(other)).toBe(listDigest({ 'tools/list': [echo, add] }));
  });

  it.each([
    ['one more item', { 'tools/list': [echo, add, { name: 'more' }] }],
    ['one item fewer', { 'tools/list': [echo] }],
    [
      'a changed inputSchema',
      { 'tools/list': [echo, { ...add, inputSchema: { type: 'string' } }] },
    ],
    ['a changed description', { 'tools/list': [echo, { ...add, description: 'Add' }] }],
    ['the same items under another method', { 'prompts/list': [echo, add] }],
    ['no items', {}],
  ])('differs for %s', (_what, other) => {
    expect(listDigest(other)).not.toBe(listDigest({ 'tools/list': [echo, add] }));
  });

  it('tells a resource from a template with the same fields', () => {
    const item = { uri: 'fixture://x', name: 'x' };
    expect(listDigest({ 'resources/list': [item], 'resources/templates/list': [] })).not.toBe(
      listDigest({ 'resources/list': [], 'resources/templates/list': [item] }),
    );
  });

  it('does not let an item with a newline pass for two items', () => {
    expect(listDigest({ 'prompts/list': ['a\nb'] })).not.toBe(
      listDigest({ 'prompts/list': ['a', 'b'] }),
    );
  });
});

describe('listMethodsOf', () => {
  it.each([
    ['tools', ['tools/list']],
    ['prompts', ['prompts/list']],
    ['resources', ['resources/list', 'resources/templates/list']],
  ] as const)('%s is listed by %j', (kind, methods) => {
    expect(listMethodsOf(kind)).toEqual(methods);
  });
});
