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

/** `prefix` (a formatted path) followed by `seg` as formatJsonPath writes it. */
function appendPathSegment(prefix: string, seg: PathSegment | undefined): string {
  if (seg === undefined) return prefix;
  if (typeof seg === 'number') return `${prefix}[${seg}]`;
  if (!IDENTIFIER.test(seg)) return `${prefix}[${JSON.stringify(seg)}]`;
  return prefix === '' ? seg : `${prefix}.${seg}`;
}

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

/**
 * The string leaves of a JSON value found by one walk, with where each one sits, so that
 * replacements are written back by copying only the containers on their paths, without a
 * second walk. Built by {@link collectStringLeaves} or {@link collectMcpStrings}.
 */
export class StringLeaves<T> {
  /** The leaves, in walk order. */
  readonly texts: string[] = [];
  /** The last path segment of each leaf (`undefined` for a root string). */
  readonly keys: Array<PathSegment | undefined> = [];
  /** The container of each leaf (index into the nodes), -1 for a root string. */
  private readonly leafParents: number[] = [];
  // Containers on the way to the leaves: the value, its container and its key there.
  private readonly nodeValues: unknown[] = [];
  private readonly nodeParents: number[] = [];
  private readonly nodeKeys: Array<PathSegment | undefined> = [];
  /** Formatted paths of the nodes, filled on demand. */
  private readonly nodePathTexts: Array<string | undefined> = [];
  /** Nodes by parent and key, for the parts of MCP target patterns that several share. */
  private shared: Map<number, Map<PathSegment | undefined, number>> | undefined;
  private bytes = 0;
  /** Whether `bytes` is exact (else an upper bound, three per UTF-16 unit). */
  private exact = false;

  constructor(
    readonly root: T,
    private readonly maxDepth: number,
    private readonly maxStringBytes: number,
  ) {}

  /** The path of leaf `i` (a new array). */
  path(i: number): PathSegment[] {
    return this.pathTo(this.leafParents[i] ?? -1, this.keys[i]);
  }

  /** `formatJsonPath(this.path(i))`, with the containers' paths formatted once. */
  pathText(i: number): string {
    const parent = this.leafParents[i] ?? -1;
    const prefix = parent < 0 ? '' : this.nodePathText(parent);
    return appendPathSegment(prefix, this.keys[i]);
  }

  private nodePathText(n: number): string {
    let text = this.nodePathTexts[n];
    if (text === undefined) {
      const parent = this.nodeParents[n] ?? -1;
      const prefix = parent < 0 ? '' : this.nodePathText(parent);
      text = appendPathSegment(prefix, this.nodeKeys[n]);
      this.nodePathTexts[n] = text;
    }
    return text;
  }

  private pathTo(parent: number, key: PathSegment | undefined): PathSegment[] {
    const path: PathSegment[] = key === undefined ? [] : [key];
    for (let n = parent; n >= 0; n = this.nodeParents[n] ?? -1) {
      const k = this.nodeKeys[n];
      if (k !== undefined) path.push(k);
    }
    return path.reverse();
  }

  /** Record a container entered at `depth` (a {@link PiiLimitError} past `maxDepth`). */
  node(value: unknown, depth: number, parent: number, key: PathSegment | undefined): number {
    if (depth >= this.maxDepth) {
      throw new PiiLimitError('maxDepth', this.maxDepth, formatJsonPath(this.pathTo(parent, key)));
    }
    this.nodeValues.push(value);
    this.nodeParents.push(parent);
    this.nodeKeys.push(key);
    return this.nodeValues.length - 1;
  }

  /** {@link StringLeaves.node}, once per `parent` and `key` (MCP target patterns share prefixes). */
  sharedNode(value: unknown, depth: number, parent: number, key: PathSegment | undefined): number {
    if (this.shared === undefined) this.shared = new Map();
    let children = this.shared.get(parent);
    if (children === undefined) {
      children = new Map();
      this.shared.set(parent, children);
    }
    let n = children.get(key);
    if (n === undefined) {
      n = this.node(value, depth, parent, key);
      children.set(key, n);
    }
    return n;
  }

  /**
   * Count a string's UTF-8 bytes towards `maxStringBytes`. While three bytes per UTF-16 unit
   * (an upper bound) stay within it, nothing is measured; past that, the exact total of the
   * strings so far is taken once and kept exact from then on.
   */
  private countBytes(value: string): void {
    if (this.exact) {
      this.bytes += Buffer.byteLength(value, 'utf8');
      return;
    }
    this.bytes += 3 * value.length;
    if (this.bytes <= this.maxStringBytes) return;
    this.exact = true;
    this.bytes = Buffer.byteLength(value, 'utf8');
    for (const text of this.texts) this.bytes += Buffer.byteLength(text, 'utf8');
  }

  /** Collect every string leaf of `value` (see {@link walk}: same order, same limits). */
  collect(value: unknown, depth: number, parent: number, key: PathSegment | undefined): void {
    if (typeof value === 'string') {
      if (this.maxStringBytes !== Number.POSITIVE_INFINITY) this.countBytes(value);
      if (this.bytes > this.maxStringBytes) {
        throw new PiiLimitError(
          'maxStringBytes',
          this.maxStringBytes,
          formatJsonPath(this.pathTo(parent, key)),
        );
      }
      this.texts.push(value);
      this.keys.push(key);
      this.leafParents.push(parent);
      return;
    }
    if (Array.isArray(value)) {
      const n = this.node(value, depth, parent, key);
      for (let i = 0; i < value.length; i++) this.collect(value[i], depth + 1, n, i);
      return;
    }
    if (isPlainObject(value)) {
      const n = this.node(value, depth, parent, key);
      for (const k in value) {
        if (Object.hasOwn(value, k)) this.collect(value[k], depth + 1, n, k);
      }
    }
  }

  /**
   * The value with leaf `leaves[k]` replaced by `texts[k]` (when different): containers on the
   * changed paths are copied, everything else is shared; the root itself when nothing changed.
   */
  replace(leaves: readonly number[], texts: readonly string[]): T {
    let root: unknown = this.root;
    const copies = new Map<number, unknown>();
    const copyOf = (n: number): unknown => {
      let copy = copies.get(n);
      if (copy === undefined) {
        const value = this.nodeValues[n];
        copy = Array.isArray(value) ? value.slice() : { ...(value as Record<string, unknown>) };
        copies.set(n, copy);
        const parent = this.nodeParents[n] ?? -1;
        if (parent >= 0) setChild(copyOf(parent), this.nodeKeys[n], copy);
        else root = copy;
      }
      return copy;
    };
    for (let k = 0; k < leaves.length; k++) {
      const i = leaves[k] as number;
      const text = texts[k] as string;
      if (text === this.texts[i]) continue;
      const parent = this.leafParents[i] ?? -1;
      if (parent >= 0) setChild(copyOf(parent), this.keys[i], text);
      else root = text;
    }
    return root as T;
  }
}

// See KEPT_TEXT_SCANS (detectors/recognizer.ts): one instance kept alive keeps the hidden class
// alive, and the functions optimized for it stay optimized across full GCs.
export const KEPT_STRING_LEAVES = new StringLeaves<unknown>(undefined, 1, 0);

function setChild(container: unknown, key: PathSegment | undefined, value: unknown): void {
  if (typeof key === 'number') (container as unknown[])[key] = value;
  else setOwn(container as Record<string, unknown>, key as string, value);
}

function limitsOf(limits: WalkLimits = {}): [maxDepth: number, maxStringBytes: number] {
  const { maxDepth, maxStringBytes } = stateOf(() => '', limits);
  return [maxDepth, maxStringBytes];
}

/**
 * Collect every string leaf of `value` in the order {@link mapStringLeaves} visits them; throws
 * {@link PiiLimitError} past `limits` as it does.
 */
export function collectStringLeaves<T>(value: T, limits?: WalkLimits): StringLeaves<T> {
  const leaves = new StringLeaves(value, ...limitsOf(limits));
  leaves.collect(value, 0, -1, undefined);
  return leaves;
}

function collectPattern(
  leaves: StringLeaves<unknown>,
  value: unknown,
  pattern: TargetPattern,
  index: number,
  depth: number,
  parent: number,
  key: PathSegment | undefined,
): void {
  if (index === pattern.length) {
    leaves.collect(value, depth, parent, key);
    return;
  }
  const seg = pattern[index];
  if (seg === '*') {
    if (Array.isArray(value)) {
      const n = leaves.sharedNode(value, depth, parent, key);
      for (let i = 0; i < value.length; i++) {
        collectPattern(leaves, value[i], pattern, index + 1, depth + 1, n, i);
      }
      return;
    }
    if (!isPlainObject(value)) return;
    const n = leaves.sharedNode(value, depth, parent, key);
    for (const k of Object.keys(value)) {
      collectPattern(leaves, value[k], pattern, index + 1, depth + 1, n, k);
    }
    return;
  }
  if (typeof seg !== 'string' || !isPlainObject(value) || !Object.hasOwn(value, seg)) return;
  const n = leaves.sharedNode(value, depth, parent, key);
  collectPattern(leaves, value[seg], pattern, index + 1, depth + 1, n, seg);
}

/**
 * Collect the string leaves of the {@link mcpTargets} of an MCP message in the order
 * {@link mapMcpStrings} visits them; throws {@link PiiLimitError} past `limits` as it does.
 */
export function collectMcpStrings<T>(
  phase: McpPhase,
  method: string,
  message: T,
  limits?: WalkLimits,
): StringLeaves<T> {
  const leaves = new StringLeaves(message, ...limitsOf(limits));
  for (const pattern of mcpTargets(method, phase)) {
    collectPattern(leaves as StringLeaves<unknown>, message, pattern, 0, 0, -1, undefined);
  }
  return leaves;
}
