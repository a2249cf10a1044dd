/**
 * Bounded, copy-on-write walks over JSON values: every string leaf is handed to a visitor;
 * keys and non-string values are never touched; a container is copied only when something
 * inside it changed, so an unchanged input comes back as the same reference. Depth and total
 * string size are checked as the walk goes and end it with a {@link PiiLimitError}; recursion
 * never goes deeper than `maxDepth`, so a 10,000-deep array cannot overflow the stack.
 */
import { PiiLimitError } from './errors.ts';
import type { McpPhase, WalkLimits } from './types.ts';

/** One step of a JSON path: an object key or an array index. */
export type PathSegment = string | number;

/** Defaults of {@link WalkLimits}: depth 64, 4 MiB of strings. */
export const DEFAULT_WALK_LIMITS: Readonly<Required<WalkLimits>> = {
  maxDepth: 64,
  maxStringBytes: 4 * 1024 * 1024,
};

/**
 * Called with each string leaf and its path (a live array: copy it to keep it). Returns the
 * replacement, or the same string for no change.
 */
export type LeafVisitor = (text: string, path: readonly PathSegment[]) => string;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * A path as text: `content[0].text`, `arguments.note`; keys that are not identifiers are
 * quoted (`arguments["e-mail"]`). The root is `''`.
 */
export function formatJsonPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (!IDENTIFIER.test(seg)) out += `[${JSON.stringify(seg)}]`;
    else out += out === '' ? seg : `.${seg}`;
  }
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  // A JSON "__proto__" key is an own property; plain assignment would set the prototype.
  if (key === '__proto__') {
    Object.defineProperty(target, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    target[key] = value;
  }
}

/** Running totals of one walk, shared by every part of a message it visits. */
interface WalkState {
  readonly maxDepth: number;
  readonly maxStringBytes: number;
  bytes: number;
  readonly visit: LeafVisitor;
}

function stateOf(visit: LeafVisitor, limits: WalkLimits = {}): WalkState {
  const {
    maxDepth = DEFAULT_WALK_LIMITS.maxDepth,
    maxStringBytes = DEFAULT_WALK_LIMITS.maxStringBytes,
  } = limits;
  if (!Number.isInteger(maxDepth) || maxDepth < 1 || maxDepth > 1024) {
    throw new RangeError('maxDepth must be an integer in 1..1024');
  }
  if (
    maxStringBytes !== Number.POSITIVE_INFINITY &&
    (!Number.isInteger(maxStringBytes) || maxStringBytes < 0)
  ) {
    throw new RangeError('maxStringBytes must be a non-negative integer or Infinity');
  }
  return { maxDepth, maxStringBytes, bytes: 0, visit };
}

function enter(state: WalkState, depth: number, path: readonly PathSegment[]): void {
  if (depth >= state.maxDepth) {
    throw new PiiLimitError('maxDepth', state.maxDepth, formatJsonPath(path));
  }
}

function walk(value: unknown, depth: number, path: PathSegment[], state: WalkState): unknown {
  if (typeof value === 'string') {
    if (state.maxStringBytes !== Number.POSITIVE_INFINITY)
      state.bytes += Buffer.byteLength(value, 'utf8');
    if (state.bytes > state.maxStringBytes) {
      throw new PiiLimitError('maxStringBytes', state.maxStringBytes, formatJsonPath(path));
    }
    return state.visit(value, path);
  }
  if (Array.isArray(value)) {
    enter(state, depth, path);
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      path.push(i);
      const next = walk(value[i], depth + 1, path, state);
      path.pop();
      if (copy === undefined && next !== value[i]) copy = value.slice();
      if (copy !== undefined) copy[i] = next;
    }
    return copy ?? value;
  }
  if (isPlainObject(value)) {
    enter(state, depth, path);
    let copy: Record<string, unknown> | undefined;
    // for…in with an own-property check: the order of Object.keys without allocating its array.
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue;
      path.push(key);
      const next = walk(value[key], depth + 1, path, state);
      path.pop();
      if (copy === undefined && next !== value[key]) copy = { ...value };
      if (copy !== undefined) setOwn(copy, key, next);
    }
    return copy ?? value;
  }
  return value;
}

/**
 * Map every string leaf of `value` through `visit`. Returns the new value, or `value` itself
 * when no leaf changed. Throws {@link PiiLimitError} past `limits`.
 */
export function mapStringLeaves<T>(value: T, visit: LeafVisitor, limits?: WalkLimits): T {
  return walk(value, 0, [], stateOf(visit, limits)) as T;
}

/** `'*'` in a target pattern matches every array element or object member. */
export type TargetPattern = readonly PathSegment[];

const MCP_TARGETS: Readonly<Record<string, Partial<Record<McpPhase, readonly TargetPattern[]>>>> = {
  'tools/call': {
    request: [['arguments']],
    response: [
      ['content', '*', 'text'],
      ['content', '*', 'resource', 'text'],
      ['structuredContent'],
    ],
  },
  'resources/read': { response: [['contents', '*', 'text']] },
  'prompts/get': {
    response: [
      ['messages', '*', 'content', 'text'],
      ['messages', '*', 'content', 'resource', 'text'],
    ],
  },
};

/**
 * The parts of an MCP message (request `params` or response `result`) whose strings carry user
 * data: `tools/call` request → `arguments`; response → `content[].text`, embedded resource
 * text, every string of `structuredContent`; `resources/read` → `contents[].text`;
 * `prompts/get` → `messages[].content.text`. Other methods: none.
 */
export function mcpTargets(method: string, phase: McpPhase): readonly TargetPattern[] {
  return MCP_TARGETS[method]?.[phase] ?? [];
}

function applyPattern(
  value: unknown,
  pattern: TargetPattern,
  index: number,
  depth: number,
  path: PathSegment[],
  state: WalkState,
): unknown {
  if (index === pattern.length) return walk(value, depth, path, state);
  const seg = pattern[index];
  if (seg === '*') {
    if (Array.isArray(value)) {
      enter(state, depth, path);
      let copy: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        path.push(i);
        const next = applyPattern(value[i], pattern, index + 1, depth + 1, path, state);
        path.pop();
        if (copy === undefined && next !== value[i]) copy = value.slice();
        if (copy !== undefined) copy[i] = next;
      }
      return copy ?? value;
    }
    if (!isPlainObject(value)) return value;
    enter(state, depth, path);
    let copy: Record<string, unknown> | undefined;
    for (const key of Object.keys(value)) {
      path.push(key);
      const next = applyPattern(value[key], pattern, index + 1, depth + 1, path, state);
      path.pop();
      if (copy === undefined && next !== value[key]) copy = { ...value };
      if (copy !== undefined) setOwn(copy, key, next);
    }
    return copy ?? value;
  }
  if (typeof seg !== 'string' || !isPlainObject(value) || !Object.hasOwn(value, seg)) return value;
  enter(state, depth, path);
  path.push(seg);
  const next = applyPattern(value[seg], pattern, index + 1, depth + 1, path, state);
  path.pop();
  if (next === value[seg]) return value;
  const copy = { ...value };
  setOwn(copy, seg, next);
  return copy;
}

/**
 * Map the string leaves of the {@link mcpTargets} of an MCP message (request `params` or
 * response `result`); everything else is left as is. Paths are relative to the message
 * (`arguments.note`, `content[0].text`). Limits count over all the parts together.
 */
export function mapMcpStrings<T>(
  phase: McpPhase,
  method: string,
  message: T,
  visit: LeafVisitor,
  limits?: WalkLimits,
): T {
  const state = stateOf(visit, limits);
  let out: unknown = message;
  for (const pattern of mcpTargets(method, phase)) {
    out = applyPattern(out, pattern, 0, 0, [], state);
  }
  return out as T;
}
