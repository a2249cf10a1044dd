import { describe, expect, it } from 'vitest';
import {
  compareChainOrder,
  compareCodePoints,
  type PriorityHint,
  PriorityHintSchema,
  resolvePriorities,
  resolvePriority,
  serialisePriority,
} from './index.ts';

describe('priority hints', () => {
  const roundTrips: Array<[string, { request: number; response: number }]> = [
    ['5', { request: 5, response: 5 }],
    ['{"request":-1000}', { request: -1000, response: 0 }],
    ['{"response":1000}', { request: 0, response: 1000 }],
    ['{"request":-1000,"response":1000}', { request: -1000, response: 1000 }],
    ['0', { request: 0, response: 0 }],
  ];

  it.each(roundTrips)('%s resolves per phase and serialises back to itself', (json, resolved) => {
    const hint = PriorityHintSchema.parse(JSON.parse(json)) as PriorityHint;
    expect(resolvePriority(hint, 'request')).toBe(resolved.request);
    expect(resolvePriority(hint, 'response')).toBe(resolved.response);
    expect(resolvePriorities(hint)).toEqual(resolved);
    expect(JSON.stringify(serialisePriority(resolved))).toBe(json);
  });

  it.each([
    [{ request: 7, response: 7 }, 7],
    [{}, 0],
  ] as const)('%j serialises to the shortest form %j', (hint, shortest) => {
    expect(serialisePriority(resolvePriorities(hint))).toEqual(shortest);
  });

  it('treats a missing hint as 0', () => {
    expect(resolvePriority(undefined, 'response')).toBe(0);
  });

  it.each([[1.5], [2 ** 31], [-(2 ** 31) - 1], ['5'], [{ request: 'x' }]])('rejects %j', (bad) => {
    expect(PriorityHintSchema.safeParse(bad).success).toBe(false);
  });
});

describe('ordering', () => {
  it.each([
    ['a', 'b', -1],
    ['b', 'a', 1],
    ['B', 'a', -1],
    ['a', 'a', 0],
    ['a', 'ab', -1],
    // U+FF21 (fullwidth A) is below U+1F600 by code point, above it by UTF-16 unit.
    ['\uFF21', '\u{1F600}', -1],
    ['\u{1F600}', '\uFF21', 1],
  ])('compareCodePoints(%j, %j) = %d', (a, b, want) => {
    expect(Math.sign(compareCodePoints(a, b))).toBe(want);
  });

  it('sorts by priority, then name, then service id', () => {
    const items = [
      { priority: 0, name: 'b', serviceId: 's1' },
      { priority: -5, name: 'z', serviceId: 's1' },
      { priority: 0, name: 'a', serviceId: 's2' },
      { priority: 0, name: 'a', serviceId: 's1' },
    ];
    expect(
      items.sort(compareChainOrder).map((i) => `${i.priority}:${i.name}@${i.serviceId}`),
    ).toEqual(['-5:z@s1', '0:a@s1', '0:a@s2', '0:b@s1']);
  });
});
