/**
 * Native evaluation of the most common condition leaves, the ones policies are mostly made
 * of: `path == "text"`, `path != "text"`, `path <op> number` and `"text" in path`, where
 * `path` is a select chain on an input variable (`principal.claims.tier`). For the value
 * types handled here the result is exactly CEL's (heterogeneous equality is false, numbers
 * compare by value across int and double); for anything else the leaf answers `FALLBACK`
 * and the compiled CEL program decides. `fast.test.ts` checks this against CEL.
 */
import type { ASTNode } from '@marcbachmann/cel-js';

/** The leaf is false. */
export const FAST_FALSE = 0;
/** The leaf is true. */
export const FAST_TRUE = 1;
/** The leaf reads a missing field (so it is false). */
export const FAST_ABSENT = 2;
/** The value is not one the fast path judges: ask CEL. */
export const FAST_FALLBACK = 3;
/** What a fast leaf answers. */
export type FastOutcome =
  | typeof FAST_FALSE
  | typeof FAST_TRUE
  | typeof FAST_ABSENT
  | typeof FAST_FALLBACK;

/** A leaf evaluated without CEL. */
export type FastLeaf = (variables: Readonly<Record<string, unknown>>) => FastOutcome;

type Comparison = '==' | '!=' | '<' | '<=' | '>' | '>=';
const FLIPPED: Readonly<Record<Comparison, Comparison>> = {
  '==': '==',
  '!=': '!=',
  '<': '>',
  '<=': '>=',
  '>': '<',
  '>=': '<=',
};

/** Marks a read that could not be judged here. */
const UNJUDGED: unique symbol = Symbol('unjudged');
/** Marks a read that found a missing element. */
const MISSING: unique symbol = Symbol('missing');

function pathOf(node: ASTNode, variables: ReadonlySet<string>): string[] | undefined {
  const keys: string[] = [];
  let at: ASTNode = node;
  while (at.op === '.') {
    keys.push(at.args[1]);
    at = at.args[0];
  }
  if (at.op !== 'id' || !variables.has(at.args)) return undefined;
  keys.push(at.args);
  return keys.reverse();
}

function reader(
  path: readonly string[],
): (variables: Readonly<Record<string, unknown>>) => unknown {
  const [root, ...keys] = path as [string, ...string[]];
  return (variables) => {
    let value = variables[root];
    if (value === undefined) return MISSING;
    for (const key of keys) {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return UNJUDGED;
      value = (value as Record<string, unknown>)[key];
      if (value === undefined) return MISSING;
    }
    return value;
  };
}

function isNumber(value: unknown): value is number | bigint {
  return typeof value === 'number' || typeof value === 'bigint';
}

/** CEL numeric equality across int (bigint) and double (number). */
function numbersEqual(a: number | bigint, b: number | bigint): boolean {
  if (typeof a === typeof b) return a === b;
  if (typeof a === 'number' && Number.isNaN(a)) return false;
  if (typeof b === 'number' && Number.isNaN(b)) return false;
  return !(a < b) && !(a > b);
}

function compareNumbers(op: Comparison, a: number | bigint, b: number | bigint): boolean {
  switch (op) {
    case '==':
      return numbersEqual(a, b);
    case '!=':
      return !numbersEqual(a, b);
    case '<':
      return a < b;
    case '<=':
      return a <= b;
    case '>':
      return a > b;
    case '>=':
      return a >= b;
  }
}

/** Types whose CEL equality with a string or number literal is plainly false. */
function isOtherScalar(value: unknown): boolean {
  return value === null || typeof value === 'boolean' || typeof value === 'string';
}

function comparisonLeaf(
  read: ReturnType<typeof reader>,
  op: Comparison,
  literal: string | number | bigint,
): FastLeaf | undefined {
  if (typeof literal === 'string') {
    if (op !== '==' && op !== '!=') return undefined;
    const equal = op === '==';
    return (variables) => {
      const value = read(variables);
      if (value === MISSING) return FAST_ABSENT;
      if (typeof value === 'string') return (value === literal) === equal ? FAST_TRUE : FAST_FALSE;
      if (value === null || typeof value === 'boolean' || isNumber(value)) {
        return equal ? FAST_FALSE : FAST_TRUE;
      }
      return FAST_FALLBACK;
    };
  }
  const ordering = op !== '==' && op !== '!=';
  return (variables) => {
    const value = read(variables);
    if (value === MISSING) return FAST_ABSENT;
    if (isNumber(value)) return compareNumbers(op, value, literal) ? FAST_TRUE : FAST_FALSE;
    if (!ordering && isOtherScalar(value)) return op === '==' ? FAST_FALSE : FAST_TRUE;
    return FAST_FALLBACK;
  };
}

function literalOf(node: ASTNode): string | number | bigint | undefined {
  if (node.op !== 'value') return undefined;
  const value = node.args;
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint'
    ? value
    : undefined;
}

/** A native evaluator for `node`, when it has one of the supported shapes. */
export function compileFastLeaf(
  node: ASTNode,
  variables: ReadonlySet<string>,
): FastLeaf | undefined {
  switch (node.op) {
    case '==':
    case '!=':
    case '<':
    case '<=':
    case '>':
    case '>=': {
      const [left, right] = node.args;
      const leftPath = pathOf(left, variables);
      const rightLiteral = literalOf(right);
      if (leftPath && rightLiteral !== undefined) {
        return comparisonLeaf(reader(leftPath), node.op, rightLiteral);
      }
      const rightPath = pathOf(right, variables);
      const leftLiteral = literalOf(left);
      if (rightPath && leftLiteral !== undefined) {
        return comparisonLeaf(reader(rightPath), FLIPPED[node.op], leftLiteral);
      }
      return undefined;
    }
    case 'in': {
      const [left, right] = node.args;
      const needle = literalOf(left);
      const path = pathOf(right, variables);
      if (typeof needle !== 'string' || !path) return undefined;
      const read = reader(path);
      return (vars) => {
        const value = read(vars);
        if (value === MISSING) return FAST_ABSENT;
        if (Array.isArray(value)) return value.includes(needle) ? FAST_TRUE : FAST_FALSE;
        return FAST_FALLBACK;
      };
    }
    default:
      return undefined;
  }
}
