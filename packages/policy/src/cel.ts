/**
 * CEL conditions. A `when` is parsed and type-checked once per load, then split at its
 * logical connectives (`&&`, `||`, `!`, `?:`) into leaves ("conditions"), each compiled on
 * its own. The connectives are evaluated here with CEL's error-absorbing semantics, which
 * gives two things the plain library cannot:
 *
 * - absent fields are safe: a leaf that reads a field the input does not have is `false`
 *   (never an error), so `arguments.amount > 10000` without `amount` is false and
 *   `!("admin" in principal.claims.roles)` without `roles` is true;
 * - partial evaluation for list filtering: leaves that read `arguments` can be treated as
 *   unknown, and the connectives still decide when the rest is enough.
 *
 * A leaf checks its unconditionally read paths in plain JS first (cheap property lookups),
 * so the common absent case never pays for a thrown CEL error.
 */
import { type ASTNode, Environment, type ParseResult, serialize } from '@marcbachmann/cel-js';
import { compileFastLeaf, FAST_FALLBACK, FAST_TRUE, type FastLeaf } from './cel-fast.ts';
import type { ConditionExplanation } from './types.ts';

/** Three-valued truth: definitely false. */
export const FALSE = 0;
/** Definitely true. */
export const TRUE = 1;
/** A leaf failed (evaluation) or depends on unknown arguments (partial evaluation). */
export const UNDECIDED = 2;
/** The value of a condition. */
export type Truth = typeof FALSE | typeof TRUE | typeof UNDECIDED;

/** The variables a condition can read, as passed to CEL. */
export interface Activation {
  event: string;
  phase: string;
  tool: string | undefined;
  prompt: string | undefined;
  resource: string | undefined;
  arguments: Record<string, unknown>;
  principal: object;
}

const STRING_VARIABLES = ['event', 'phase', 'tool', 'prompt', 'resource'] as const;
const MAP_VARIABLES = ['arguments', 'principal'] as const;
const VARIABLES: ReadonlySet<string> = new Set<string>([...STRING_VARIABLES, ...MAP_VARIABLES]);

// Macros evaluate their arguments conditionally or in a scope of their own.
const MACROS: ReadonlySet<string> = new Set([
  'has',
  'all',
  'exists',
  'exists_one',
  'map',
  'filter',
  'bind',
]);

let environment: Environment | undefined;

/** The one CEL environment: the input variables, mixed literals and optional chaining allowed. */
function celEnvironment(): Environment {
  if (environment) return environment;
  const env = new Environment({ homogeneousAggregateLiterals: false, enableOptionalTypes: true });
  for (const name of STRING_VARIABLES) env.registerVariable(name, 'string');
  for (const name of MAP_VARIABLES) env.registerVariable(name, 'map');
  environment = env;
  return env;
}

/** A compiled `when`: a tree of connectives over compiled leaves. */
export type Condition =
  | { readonly kind: 'const'; readonly value: boolean }
  | Leaf
  | { readonly kind: 'and' | 'or'; readonly left: Condition; readonly right: Condition }
  | { readonly kind: 'not'; readonly operand: Condition }
  | {
      readonly kind: 'ternary';
      readonly test: Condition;
      readonly whenTrue: Condition;
      readonly whenFalse: Condition;
    };

interface Leaf {
  readonly kind: 'leaf';
  readonly source: string;
  readonly run: ParseResult;
  /** Paths (`[variable, key, key...]`) the leaf always reads; one absent makes it false. */
  readonly guards: readonly (readonly string[])[];
  /** The leaf reads `arguments`, which is unknown when listing tools. */
  readonly readsArguments: boolean;
  /** A native evaluator giving CEL's answer for common shapes and value types. */
  readonly fast: FastLeaf | undefined;
}

/** A CEL expression that failed to compile: what, and where in the expression. */
export interface CelCompileError {
  readonly message: string;
  /** 0-based offset in the expression, when the library reported one. */
  readonly offset?: number;
}

/** Either a compiled value or the reason there is none. */
export type Compiled<T> = { readonly ok: true; readonly value: T } | CompileFailure;
interface CompileFailure {
  readonly ok: false;
  readonly error: CelCompileError;
}

function failure(error: unknown): CompileFailure {
  const e = error as { summary?: unknown; range?: { start?: unknown } };
  const message = typeof e.summary === 'string' ? e.summary : String(error);
  const offset = typeof e.range?.start === 'number' ? e.range.start : undefined;
  return { ok: false, error: offset === undefined ? { message } : { message, offset } };
}

function parseChecked(source: string): Compiled<{ parsed: ParseResult; type: string }> {
  let parsed: ParseResult;
  try {
    parsed = celEnvironment().parse(source);
  } catch (error) {
    return failure(error);
  }
  const checked = parsed.check();
  if (!checked.valid) return failure(checked.error);
  return { ok: true, value: { parsed, type: checked.type ?? 'dyn' } };
}

/** Parses and type-checks a `when`; it must be a bool (or dyn) expression. */
export function compileCondition(source: string): Compiled<Condition> {
  const checked = parseChecked(source);
  if (!checked.ok) return checked;
  const { parsed, type } = checked.value;
  if (type !== 'bool' && type !== 'dyn') {
    return { ok: false, error: { message: `must be a bool expression, not ${type}`, offset: 0 } };
  }
  return { ok: true, value: buildCondition(parsed.ast) };
}

function buildCondition(node: ASTNode): Condition {
  switch (node.op) {
    case '&&':
    case '||':
      return {
        kind: node.op === '&&' ? 'and' : 'or',
        left: buildCondition(node.args[0]),
        right: buildCondition(node.args[1]),
      };
    case '!_':
      return { kind: 'not', operand: buildCondition(node.args) };
    case '?:':
      return {
        kind: 'ternary',
        test: buildCondition(node.args[0]),
        whenTrue: buildCondition(node.args[1]),
        whenFalse: buildCondition(node.args[2]),
      };
    case 'value':
      if (typeof node.args === 'boolean') return { kind: 'const', value: node.args };
      return buildLeaf(node);
    default:
      return buildLeaf(node);
  }
}

function buildLeaf(node: ASTNode): Leaf {
  const source = serialize(node);
  const guards: string[][] = [];
  collectGuards(node, guards);
  return {
    kind: 'leaf',
    source,
    run: celEnvironment().parse(source),
    guards,
    readsArguments: readsVariable(node, 'arguments'),
    fast: compileFastLeaf(node, VARIABLES),
  };
}

/** `a.b.c` (and `a["b"]`) rooted at an input variable, as `[a, b, c]`. */
function selectPath(node: ASTNode): string[] | undefined {
  const keys: string[] = [];
  let at: ASTNode = node;
  for (;;) {
    if (at.op === '.') {
      keys.push(at.args[1]);
      at = at.args[0];
    } else if (at.op === '[]' && at.args[1].op === 'value' && typeof at.args[1].args === 'string') {
      keys.push(at.args[1].args);
      at = at.args[0];
    } else break;
  }
  if (at.op !== 'id' || !VARIABLES.has(at.args)) return undefined;
  keys.push(at.args);
  return keys.reverse();
}

/**
 * Collects the paths a leaf reads whatever the input: not under `has()`, a macro, the
 * right side of `&&`/`||`, a branch of `?:` or an optional select. If one of them is absent,
 * CEL would fail with "no such key", which we define as false.
 */
function collectGuards(node: ASTNode, out: string[][]): void {
  switch (node.op) {
    case 'value':
      return;
    case 'id':
      if (VARIABLES.has(node.args)) out.push([node.args]);
      return;
    case '.':
    case '[]': {
      const path = selectPath(node);
      if (path) out.push(path);
      else for (const arg of node.args) if (typeof arg !== 'string') collectGuards(arg, out);
      return;
    }
    case '.?':
    case '[?]':
      collectGuards(node.args[0], out);
      return;
    case '&&':
    case '||':
      collectGuards(node.args[0], out);
      return;
    case '?:':
      collectGuards(node.args[0], out);
      return;
    case '!_':
    case '-_':
      collectGuards(node.args, out);
      return;
    case 'call':
      if (!MACROS.has(node.args[0])) for (const arg of node.args[1]) collectGuards(arg, out);
      return;
    case 'rcall':
      collectGuards(node.args[1], out);
      if (!MACROS.has(node.args[0])) for (const arg of node.args[2]) collectGuards(arg, out);
      return;
    case 'list':
      for (const item of node.args) collectGuards(item, out);
      return;
    case 'map':
      for (const [key, value] of node.args) {
        collectGuards(key, out);
        collectGuards(value, out);
      }
      return;
    default:
      // Binary operators.
      collectGuards(node.args[0], out);
      collectGuards(node.args[1], out);
  }
}

function readsVariable(node: ASTNode, name: string): boolean {
  if (node.op === 'id') return node.args === name;
  const visit = (value: unknown): boolean => {
    if (Array.isArray(value)) return value.some(visit);
    if (value !== null && typeof value === 'object' && 'op' in value) {
      return readsVariable(value as ASTNode, name);
    }
    return false;
  };
  return visit(node.args);
}

/** The first guard path that is certainly absent from the activation, if any. */
function absentPath(
  activation: Activation,
  guards: readonly (readonly string[])[],
): string | undefined {
  const vars = activation as unknown as Record<string, unknown>;
  for (const path of guards) {
    let value = vars[path[0] as string];
    if (value === undefined) return path[0];
    for (let i = 1; i < path.length; i++) {
      // Only a plain map can be certainly missing a key; anything else is CEL's to judge.
      if (value === null || typeof value !== 'object' || Array.isArray(value)) break;
      value = (value as Record<string, unknown>)[path[i] as string];
      if (value === undefined) return path.slice(0, i + 1).join('.');
    }
  }
  return undefined;
}

function isAbsenceError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'no_such_key' || code === 'unknown_variable' || code === 'index_out_of_bounds';
}

function errorMessage(error: unknown): string {
  const summary = (error as { summary?: unknown } | null)?.summary;
  return typeof summary === 'string' ? summary : String(error);
}

/**
 * Evaluates a condition. `UNDECIDED` means a leaf failed (type mismatch, division by zero,
 * a non-bool value) and the connectives could not absorb it — or, with `argumentsUnknown`,
 * that the answer depends on the arguments. `trace`, when given, receives every leaf
 * evaluated, in order, with its result.
 */
export function evaluateCondition(
  condition: Condition,
  activation: Activation,
  argumentsUnknown: boolean,
  trace?: ConditionExplanation[],
): Truth {
  switch (condition.kind) {
    case 'const':
      return condition.value ? TRUE : FALSE;
    case 'leaf':
      return evaluateLeaf(condition, activation, argumentsUnknown, trace);
    case 'and': {
      const left = evaluateCondition(condition.left, activation, argumentsUnknown, trace);
      if (left === FALSE) return FALSE;
      const right = evaluateCondition(condition.right, activation, argumentsUnknown, trace);
      if (right === FALSE) return FALSE;
      return left === TRUE && right === TRUE ? TRUE : UNDECIDED;
    }
    case 'or': {
      const left = evaluateCondition(condition.left, activation, argumentsUnknown, trace);
      if (left === TRUE) return TRUE;
      const right = evaluateCondition(condition.right, activation, argumentsUnknown, trace);
      if (right === TRUE) return TRUE;
      return left === FALSE && right === FALSE ? FALSE : UNDECIDED;
    }
    case 'not': {
      const value = evaluateCondition(condition.operand, activation, argumentsUnknown, trace);
      return value === UNDECIDED ? UNDECIDED : value === TRUE ? FALSE : TRUE;
    }
    case 'ternary': {
      const test = evaluateCondition(condition.test, activation, argumentsUnknown, trace);
      if (test === TRUE) {
        return evaluateCondition(condition.whenTrue, activation, argumentsUnknown, trace);
      }
      if (test === FALSE) {
        return evaluateCondition(condition.whenFalse, activation, argumentsUnknown, trace);
      }
      return UNDECIDED;
    }
  }
}

function evaluateLeaf(
  leaf: Leaf,
  activation: Activation,
  argumentsUnknown: boolean,
  trace: ConditionExplanation[] | undefined,
): Truth {
  if (argumentsUnknown && leaf.readsArguments) {
    trace?.push({ expression: leaf.source, result: 'unknown', detail: 'reads arguments' });
    return UNDECIDED;
  }
  // Tracing takes the general path below, which also says which path was absent.
  if (trace === undefined && leaf.fast !== undefined) {
    const outcome = leaf.fast(activation as unknown as Record<string, unknown>);
    if (outcome === FAST_TRUE) return TRUE;
    if (outcome !== FAST_FALLBACK) return FALSE;
  }
  const absent = absentPath(activation, leaf.guards);
  if (absent !== undefined) {
    trace?.push({ expression: leaf.source, result: 'absent', detail: `${absent} is absent` });
    return FALSE;
  }
  let value: unknown;
  try {
    value = leaf.run(activation);
  } catch (error) {
    if (isAbsenceError(error)) {
      trace?.push({ expression: leaf.source, result: 'absent', detail: errorMessage(error) });
      return FALSE;
    }
    trace?.push({ expression: leaf.source, result: 'error', detail: errorMessage(error) });
    return UNDECIDED;
  }
  if (value === true || value === false) {
    trace?.push({ expression: leaf.source, result: value ? 'true' : 'false' });
    return value ? TRUE : FALSE;
  }
  trace?.push({
    expression: leaf.source,
    result: 'error',
    detail: `expected a bool, got ${describeValue(value)}`,
  });
  return UNDECIDED;
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'bigint') return `int ${value}`;
  if (typeof value === 'number') return `double ${value}`;
  if (typeof value === 'string') return `string ${JSON.stringify(value)}`;
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'a map' : typeof value;
}

/** The first error message in a trace (for `Decision.errors`). */
export function firstError(trace: readonly ConditionExplanation[]): string {
  const failed = trace.find((step) => step.result === 'error');
  return failed?.detail ? `${failed.expression}: ${failed.detail}` : 'condition failed';
}

/** Reads a rate-limit key from an activation; `undefined` when absent or failing. */
export type KeyReader = (activation: Activation) => unknown;

const DOTTED_PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

/**
 * Compiles a rate-limit key. A dotted path over the input (`principal.id`,
 * `arguments.account`) is read directly; anything else is a CEL expression of any type.
 */
export function compileKey(source: string): Compiled<KeyReader> {
  const checked = parseChecked(source);
  if (!checked.ok) return checked;
  const path = source.split('.');
  if (DOTTED_PATH.test(source) && VARIABLES.has(path[0] as string)) {
    return {
      ok: true,
      value: (activation) => {
        let value: unknown = activation;
        for (const key of path) {
          if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
          value = (value as Record<string, unknown>)[key];
        }
        return value;
      },
    };
  }
  const { parsed } = checked.value;
  return {
    ok: true,
    value: (activation) => {
      try {
        return parsed(activation) as unknown;
      } catch {
        return undefined;
      }
    },
  };
}

/** Longest key text {@link keyString} renders; a longer (or cyclic) value fails as a key. */
export const MAX_KEY_CHARS = 1 << 20;

/** A piece of JSON syntax queued between the values of a list or map. */
class Syntax {
  constructor(readonly text: string) {}
}
const COMMA = new Syntax(',');
const CLOSE_LIST = new Syntax(']');
const CLOSE_MAP = new Syntax('}');

/** What JSON leaves out of a map (and writes as `null` in a list). */
function isOmitted(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}

/** A scalar as JSON text, BigInts as quoted decimals; undefined for lists and maps. */
function scalarJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'bigint':
      return `"${value.toString()}"`;
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      return value === null ? 'null' : undefined;
    default:
      return 'null';
  }
}

/**
 * Canonical JSON of a list or map: map keys sorted, BigInts as quoted decimals, `toJSON`
 * honoured (dates). Written with an explicit stack, so any depth renders without recursion.
 * @returns undefined when the text would exceed {@link MAX_KEY_CHARS} (a cycle does too).
 */
function canonicalJson(root: unknown): string | undefined {
  let out = '';
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    if (out.length > MAX_KEY_CHARS) return undefined;
    let item = stack.pop();
    if (item instanceof Syntax) {
      out += item.text;
      continue;
    }
    if (
      typeof item === 'object' &&
      item !== null &&
      typeof (item as { toJSON?: unknown }).toJSON === 'function'
    )
      item = (item as { toJSON: () => unknown }).toJSON();
    const scalar = scalarJson(item);
    if (scalar !== undefined) {
      out += scalar;
      continue;
    }
    if (Array.isArray(item)) {
      out += '[';
      stack.push(CLOSE_LIST);
      for (let i = item.length - 1; i >= 0; i--) {
        stack.push(item[i]);
        if (i > 0) stack.push(COMMA);
      }
      continue;
    }
    const map = item as Record<string, unknown>;
    const keys = Object.keys(map)
      .filter((key) => !isOmitted(map[key]))
      .sort();
    out += '{';
    stack.push(CLOSE_MAP);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i] as string;
      stack.push(map[key], new Syntax(`${JSON.stringify(key)}:`));
      if (i > 0) stack.push(COMMA);
    }
  }
  return out.length > MAX_KEY_CHARS ? undefined : out;
}

/**
 * Renders a key value as a bucket name: scalars as text, lists and maps as canonical JSON
 * (map keys sorted, so equal maps share a bucket). Any nesting depth renders (no recursion);
 * a value whose text would exceed {@link MAX_KEY_CHARS} fails like an unreadable key (`""`).
 */
export function keyString(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return value;
    case 'undefined':
      return '';
    case 'number':
    case 'bigint':
    case 'boolean':
      return String(value);
    default:
      return canonicalJson(value) ?? '';
  }
}
