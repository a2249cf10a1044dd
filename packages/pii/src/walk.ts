/**
 * Bounded, copy-on-write walks over JSON values. `mapStringLeaves` hands every string leaf to a
 * visitor (keys and non-string values are never touched); the collectors behind the engine
 * also collect object keys that may hold an entity, so that a key can be renamed like a value; a container is copied only when something
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

/**
 * How one member of an object of an MCP message is walked: `ALL` (user data: every key and
 * string below it), `SKIP` (protocol structure: never touched, key included), or the shape of
 * the protocol object it holds. Arrays are transparent: each element gets the member's shape.
 */
export type Shape = (key: string, container: Readonly<Record<string, unknown>>) => Rule;
type Rule = Shape | typeof ALL | typeof SKIP;
const ALL = 1;
const SKIP = 0;

/** `_meta` keys reserved by MCP: a prefix with a `modelcontextprotocol` or `mcp` label. */
function isReservedMetaKey(key: string): boolean {
  const slash = key.indexOf('/');
  if (slash < 0) return false;
  const prefix = key.slice(0, slash).split('.');
  return prefix.includes('modelcontextprotocol') || prefix.includes('mcp');
}

const metaShape: Shape = (key) =>
  key === 'progressToken' || key === 'traceparent' || key === 'tracestate' || isReservedMetaKey(key)
    ? SKIP
    : ALL;
const annotationsShape: Shape = (key) =>
  key === 'audience' || key === 'priority' || key === 'lastModified' ? SKIP : ALL;
const resourceShape: Shape = (key) => {
  switch (key) {
    case 'mimeType':
    case 'blob':
      return SKIP;
    case '_meta':
      return metaShape;
    case 'annotations':
      return annotationsShape;
    default:
      return ALL;
  }
};
/** A content block: text, image, audio, resource_link, embedded resource. */
const blockShape: Shape = (key, block) => {
  switch (key) {
    case 'type':
    case 'mimeType':
      return SKIP;
    case 'data': // base64 of an image or audio block
      return block.type === 'image' || block.type === 'audio' ? SKIP : ALL;
    case 'annotations':
      return annotationsShape;
    case '_meta':
      return metaShape;
    case 'resource':
      return resourceShape;
    default:
      return ALL;
  }
};
const messageShape: Shape = (key) =>
  key === 'role' ? SKIP : key === 'content' ? blockShape : key === '_meta' ? metaShape : ALL;
const resultShape =
  (member: string, shape: Shape): Shape =>
  (key) =>
    key === member ? shape : key === '_meta' ? metaShape : ALL;

/**
 * The shapes of the MCP messages the engine walks. Request `params` of `tools/call`: only
 * `arguments`. Response `result`s: everything, except the protocol-structural fields that carry
 * no user data and must stay valid — `type` and `mimeType` of content blocks, `data` of image
 * and audio blocks, `mimeType` and `blob` of resource contents, annotations' `audience`,
 * `priority` and `lastModified`, prompt messages' `role`, and `_meta`'s `progressToken`,
 * `traceparent`, `tracestate` and reserved (`io.modelcontextprotocol/…`) keys.
 * `structuredContent` and unknown fields are user data throughout.
 */
const MCP_SHAPES: Readonly<Record<string, Partial<Record<McpPhase, Shape>>>> = {
  'tools/call': {
    request: (key) => (key === 'arguments' ? ALL : SKIP),
    response: resultShape('content', blockShape),
  },
  'resources/read': { response: resultShape('contents', resourceShape) },
  'prompts/get': { response: resultShape('messages', messageShape) },
};

/**
 * The parts of an MCP message (request `params` or response `result`) whose strings and keys
 * carry user data, as patterns: `tools/call` request → `arguments`; `tools/call`,
 * `resources/read` and `prompts/get` responses → the whole result (`[]`) minus its
 * protocol-structural fields (see the package README). Other methods: none.
 */
export function mcpTargets(method: string, phase: McpPhase): readonly TargetPattern[] {
  const shape = MCP_SHAPES[method]?.[phase];
  if (shape === undefined) return [];
  return phase === 'request' ? [['arguments']] : [[]];
}

/**
 * Map the string leaves of the {@link mcpTargets} of an MCP message (request `params` or
 * response `result`); everything else, keys included, is left as is. Paths are relative to the
 * message (`arguments.note`, `content[0].text`). Limits count over all the parts together.
 */
export function mapMcpStrings<T>(
  phase: McpPhase,
  method: string,
  message: T,
  visit: LeafVisitor,
  limits?: WalkLimits,
): T {
  const leaves = collectMcpStrings(phase, method, message, limits);
  const changed: number[] = [];
  const texts: string[] = [];
  for (let i = 0; i < leaves.texts.length; i++) {
    if (leaves.isKey(i)) continue;
    const text = leaves.texts[i] as string;
    const next = visit(text, leaves.path(i));
    if (next !== text) {
      changed.push(i);
      texts.push(next);
    }
  }
  return changed.length === 0 ? message : leaves.replace(changed, texts);
}

/** Shown in paths instead of an object key that holds an entity (the key itself never is). */
export const MASKED_KEY = '[<key>]';

/**
 * Whether an object key may hold an entity and is worth analyzing: every entity written with
 * ASCII letters, `_` and `-` alone is at least 15 characters long (a Slack token), so shorter
 * keys of those characters (`email`, `first_name`) are skipped without a look.
 */
function keyMayHoldEntity(key: string): boolean {
  if (key.length >= 15) return true;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    const l = c | 32;
    if (!((l >= 97 && l <= 122) || c === 95 || c === 45)) return true;
  }
  return false;
}

/**
 * The string leaves of a JSON value found by one walk, with where each one sits, so that
 * replacements are written back by copying only the containers on their paths, without a
 * second walk. Built by {@link collectStringLeaves} or {@link collectMcpStrings}.
 */
export class StringLeaves<T> {
  /** The leaves, in walk order. */
  readonly texts: string[] = [];
  /**
   * The last path segment of each leaf (`undefined` for a root string and for a key leaf):
   * the JSON key a value sits under, its context.
   */
  readonly keys: Array<PathSegment | undefined> = [];
  /** Whether each leaf is an object key (its text) rather than a value. */
  private readonly keyLeaves: boolean[] = [];
  /** Keys found to hold an entity, by container: written as {@link MASKED_KEY} in paths. */
  private masked: Map<number, Set<string>> | undefined;
  /** The container of each leaf (index into the nodes), -1 for a root string. */
  private readonly leafParents: number[] = [];
  // Containers on the way to the leaves: the value, its container and its key there.
  private readonly nodeValues: unknown[] = [];
  private readonly nodeParents: number[] = [];
  private readonly nodeKeys: Array<PathSegment | undefined> = [];
  /** Formatted paths of the nodes, filled on demand. */
  private readonly nodePathTexts: Array<string | undefined> = [];
  private bytes = 0;
  /** Whether `bytes` is exact (else an upper bound, three per UTF-16 unit). */
  private exact = false;

  constructor(
    readonly root: T,
    private readonly maxDepth: number,
    private readonly maxStringBytes: number,
  ) {}

  /** Whether leaf `i` is an object key. */
  isKey(i: number): boolean {
    return this.keyLeaves[i] === true;
  }

  /**
   * Mark key leaf `i` as holding an entity: from now on paths through it show
   * {@link MASKED_KEY} instead of the key. Call before taking any path text.
   */
  maskKey(i: number): void {
    const parent = this.leafParents[i] ?? -1;
    if (this.masked === undefined) this.masked = new Map();
    let keys = this.masked.get(parent);
    if (keys === undefined) {
      keys = new Set();
      this.masked.set(parent, keys);
    }
    keys.add(this.texts[i] as string);
  }

  private segmentText(prefix: string, parent: number, key: PathSegment | undefined): string {
    if (typeof key === 'string' && this.masked?.get(parent)?.has(key) === true)
      return prefix + MASKED_KEY;
    return appendPathSegment(prefix, key);
  }

  /** The path of leaf `i` (a new array; a key leaf's path is its entry's). */
  path(i: number): PathSegment[] {
    return this.pathTo(this.leafParents[i] ?? -1, this.isKey(i) ? this.texts[i] : this.keys[i]);
  }

  /**
   * `formatJsonPath(this.path(i))`, with the containers' paths formatted once and masked keys
   * as {@link MASKED_KEY}.
   */
  pathText(i: number): string {
    const parent = this.leafParents[i] ?? -1;
    const prefix = parent < 0 ? '' : this.nodePathText(parent);
    return this.segmentText(prefix, parent, this.isKey(i) ? this.texts[i] : this.keys[i]);
  }

  private nodePathText(n: number): string {
    let text = this.nodePathTexts[n];
    if (text === undefined) {
      const parent = this.nodeParents[n] ?? -1;
      const prefix = parent < 0 ? '' : this.nodePathText(parent);
      text = this.segmentText(prefix, parent, this.nodeKeys[n]);
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

  private leaf(text: string, parent: number, key: PathSegment | undefined, isKey: boolean): void {
    if (this.maxStringBytes !== Number.POSITIVE_INFINITY) this.countBytes(text);
    if (this.bytes > this.maxStringBytes) {
      throw new PiiLimitError(
        'maxStringBytes',
        this.maxStringBytes,
        formatJsonPath(this.pathTo(parent, key)),
      );
    }
    this.texts.push(text);
    this.keys.push(isKey ? undefined : key);
    this.leafParents.push(parent);
    this.keyLeaves.push(isKey);
  }

  /**
   * Collect every string leaf of `value` (see {@link walk}: same order, same limits); with
   * `withKeys`, each object key that may hold an entity is collected too, right before what it
   * holds.
   */
  collect(
    value: unknown,
    depth: number,
    parent: number,
    key: PathSegment | undefined,
    withKeys = false,
  ): void {
    if (typeof value === 'string') {
      this.leaf(value, parent, key, false);
      return;
    }
    if (Array.isArray(value)) {
      const n = this.node(value, depth, parent, key);
      for (let i = 0; i < value.length; i++) this.collect(value[i], depth + 1, n, i, withKeys);
      return;
    }
    if (isPlainObject(value)) {
      const n = this.node(value, depth, parent, key);
      for (const k in value) {
        if (!Object.hasOwn(value, k)) continue;
        if (withKeys && keyMayHoldEntity(k)) this.leaf(k, n, k, true);
        this.collect(value[k], depth + 1, n, k, withKeys);
      }
    }
  }

  /**
   * Collect the user data of `value` by its {@link Shape}: members ruled `SKIP` are left out,
   * `ALL` ones collected whole (keys included), shaped ones walked by their own shape. Anything
   * that is not an object or array where a shape expects one is user data.
   */
  collectShaped(
    value: unknown,
    shape: Shape,
    depth: number,
    parent: number,
    key: PathSegment | undefined,
  ): void {
    if (Array.isArray(value)) {
      const n = this.node(value, depth, parent, key);
      for (let i = 0; i < value.length; i++) this.collectShaped(value[i], shape, depth + 1, n, i);
      return;
    }
    if (!isPlainObject(value)) {
      this.collect(value, depth, parent, key, true);
      return;
    }
    const n = this.node(value, depth, parent, key);
    for (const k in value) {
      if (!Object.hasOwn(value, k)) continue;
      const rule = shape(k, value);
      if (rule === SKIP) continue;
      if (rule === ALL) {
        if (keyMayHoldEntity(k)) this.leaf(k, n, k, true);
        this.collect(value[k], depth + 1, n, k, true);
      } else {
        this.collectShaped(value[k], rule, depth + 1, n, k);
      }
    }
  }

  /**
   * The value with leaf `leaves[k]` replaced by `texts[k]` (when different): containers on the
   * changed paths are copied, everything else is shared; the root itself when nothing changed.
   * A replaced key leaf renames its key in place (same order); a new name that collides with
   * another key of the object gets `#2`, `#3`, … so that no entry is lost.
   */
  replace(leaves: readonly number[], texts: readonly string[]): T {
    let root: unknown = this.root;
    let renames: Map<number, Map<string, string>> | undefined;
    for (let k = 0; k < leaves.length; k++) {
      const i = leaves[k] as number;
      if (!this.isKey(i) || texts[k] === this.texts[i]) continue;
      if (renames === undefined) renames = new Map();
      const parent = this.leafParents[i] as number;
      let names = renames.get(parent);
      if (names === undefined) {
        names = new Map();
        renames.set(parent, names);
      }
      names.set(this.texts[i] as string, texts[k] as string);
    }
    const nameIn = (n: number, key: PathSegment | undefined): PathSegment | undefined =>
      typeof key === 'string' ? (renames?.get(n)?.get(key) ?? key) : key;
    const copies = new Map<number, unknown>();
    const copyOf = (n: number): unknown => {
      let copy = copies.get(n);
      if (copy === undefined) {
        const value = this.nodeValues[n];
        const names = renames?.get(n);
        if (names !== undefined) copy = renamed(value as Record<string, unknown>, names);
        else
          copy = Array.isArray(value) ? value.slice() : { ...(value as Record<string, unknown>) };
        copies.set(n, copy);
        const parent = this.nodeParents[n] ?? -1;
        if (parent >= 0) setChild(copyOf(parent), nameIn(parent, this.nodeKeys[n]), copy);
        else root = copy;
      }
      return copy;
    };
    for (let k = 0; k < leaves.length; k++) {
      const i = leaves[k] as number;
      const text = texts[k] as string;
      if (text === this.texts[i]) continue;
      const parent = this.leafParents[i] ?? -1;
      if (this.isKey(i)) copyOf(parent);
      else if (parent >= 0) setChild(copyOf(parent), nameIn(parent, this.keys[i]), text);
      else root = text;
    }
    return root as T;
  }
}

/**
 * A copy of `value` with its keys renamed by `names` (old → new; mutated to old → final), in
 * the same order. Keys that stay keep their names; a new name already taken gets `#2`, `#3`, ….
 */
function renamed(
  value: Readonly<Record<string, unknown>>,
  names: Map<string, string>,
): Record<string, unknown> {
  const taken = new Set<string>();
  for (const k in value) if (Object.hasOwn(value, k) && !names.has(k)) taken.add(k);
  for (const [from, to] of names) {
    let name = to;
    for (let n = 2; taken.has(name); n++) name = `${to}#${n}`;
    taken.add(name);
    names.set(from, name);
  }
  const copy: Record<string, unknown> = {};
  for (const k in value) if (Object.hasOwn(value, k)) setOwn(copy, names.get(k) ?? k, value[k]);
  return copy;
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

/**
 * Collect the user data of an MCP message (the {@link mcpTargets}: string leaves, and the keys
 * that may hold an entity) in one walk; throws {@link PiiLimitError} past `limits`.
 */
export function collectMcpStrings<T>(
  phase: McpPhase,
  method: string,
  message: T,
  limits?: WalkLimits,
): StringLeaves<T> {
  const leaves = new StringLeaves(message, ...limitsOf(limits));
  const shape = MCP_SHAPES[method]?.[phase];
  // A message that is not an object has no parts to walk.
  if (shape !== undefined && isPlainObject(message)) {
    leaves.collectShaped(message, shape, 0, -1, undefined);
  }
  return leaves;
}
