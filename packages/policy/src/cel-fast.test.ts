import { Environment, EvaluationError } from '@marcbachmann/cel-js';
import { describe, expect, it } from 'vitest';
import {
  compileFastLeaf,
  FAST_ABSENT,
  FAST_FALLBACK,
  FAST_FALSE,
  FAST_TRUE,
  type FastOutcome,
} from './cel-fast.ts';

const VARIABLES = new Set([
  'event',
  'phase',
  'tool',
  'prompt',
  'resource',
  'arguments',
  'principal',
]);
const env = new Environment({ homogeneousAggregateLiterals: false, enableOptionalTypes: true })
  .registerVariable('tool', 'string')
  .registerVariable('arguments', 'map')
  .registerVariable('principal', 'map');

type Outcome = 'true' | 'false' | 'absent' | 'error';
const NAMES: Record<FastOutcome, Outcome | 'fallback'> = {
  [FAST_FALSE]: 'false',
  [FAST_TRUE]: 'true',
  [FAST_ABSENT]: 'absent',
  [FAST_FALLBACK]: 'fallback',
};

/** What the general path makes of a leaf: CEL's value, absence errors as "absent". */
function celOutcome(expression: string, variables: Record<string, unknown>): Outcome {
  try {
    const value: unknown = env.parse(expression)(variables);
    return value === true ? 'true' : value === false ? 'false' : 'error';
  } catch (error) {
    const code = error instanceof EvaluationError ? error.code : '';
    return code === 'no_such_key' || code === 'unknown_variable' ? 'absent' : 'error';
  }
}

const VALUES: unknown[] = [
  'a',
  'b',
  '',
  'admin',
  0,
  -0,
  1,
  1.5,
  -1,
  10_000,
  10_000.5,
  20_000,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  1n,
  10_000n,
  2n ** 64n,
  true,
  false,
  null,
  [],
  ['a'],
  ['admin', 1],
  [1],
  {},
  { a: 1 },
  undefined,
];

const describeValue = (value: unknown): string =>
  typeof value === 'bigint' ? `${value}n` : (JSON.stringify(value) ?? String(value));

describe('fast leaves agree with CEL', () => {
  it.each([
    'arguments.x == "a"',
    '"a" == arguments.x',
    'arguments.x != "a"',
    'arguments.x == 1',
    'arguments.x != 1',
    'arguments.x == 1.5',
    'arguments.x > 10000',
    'arguments.x >= 10000',
    'arguments.x < 1.5',
    'arguments.x <= 0',
    '10000 < arguments.x',
    '1.5 >= arguments.x',
    'arguments.x == 18446744073709551616.0',
    '"a" in arguments.x',
    '"admin" in arguments.x',
    'arguments.x.y == "a"',
    'arguments.x.y > 1',
    '"a" in arguments.x.y',
  ])('%s', (expression) => {
    const fast = compileFastLeaf(env.parse(expression).ast, VARIABLES);
    expect(fast).toBeDefined();
    const nested = expression.includes('x.y');
    const inputs = nested ? [...VALUES, ...VALUES.map((y) => ({ y }))] : VALUES;
    const mismatches: string[] = [];
    let handled = 0;
    for (const x of inputs) {
      const args = x === undefined ? {} : { x };
      const variables = { tool: 't', arguments: args, principal: { type: 'user' } };
      const got = NAMES[fast?.(variables) ?? FAST_FALLBACK];
      if (got === 'fallback') continue;
      handled++;
      const want = celOutcome(expression, variables);
      if (got !== want) mismatches.push(`x=${describeValue(x)}: fast ${got}, CEL ${want}`);
    }
    expect(mismatches).toEqual([]);
    // The fast path must actually be taken for the common value types.
    expect(handled).toBeGreaterThanOrEqual(5);
  });

  it.each([
    'arguments.x < "a"',
    'arguments.x == true',
    'arguments.x + 1 > 2',
    'size(arguments.x) > 1',
    '1 in arguments.x',
    'arguments["x"] == 1',
    'x.y == 1',
  ])('leaves %s to CEL', (expression) => {
    let ast: ReturnType<typeof env.parse>['ast'];
    try {
      ast = env.parse(expression).ast;
    } catch {
      return;
    }
    expect(compileFastLeaf(ast, VARIABLES)).toBeUndefined();
  });
});
