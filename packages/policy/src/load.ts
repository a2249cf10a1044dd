/**
 * Loading: YAML text in, compiled policy out. Everything that can be checked is checked
 * here, once: YAML syntax, the document shape (unknown keys rejected), unique ids, CEL
 * syntax and types, Cedar syntax (and validation against a schema when one is given). Every
 * problem is reported with its path, rule id and line/column in the YAML.
 */
import { createHash } from 'node:crypto';
import { formatPath, unknownKeyMessage } from '@fleet/core';
import {
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  type Scalar,
  type Node as YamlNode,
} from 'yaml';
import type { z } from 'zod';
import { type CedarProgram, compileCedar } from './cedar.ts';
import {
  type CelCompileError,
  type Compiled,
  type Condition,
  compileCondition,
  compileKey,
  type KeyReader,
} from './cel.ts';
import { type PolicyIssue, PolicyLoadError } from './errors.ts';
import {
  type CompiledRateLimit,
  type CompiledRule,
  defaultDecisionOf,
  denyMessage,
  withProgram,
} from './internal.ts';
import { compileEventMatcher, compileGlobs, compilePrincipalMatcher } from './match.ts';
import {
  ALLOWED_KEYS,
  DEFAULT_POLICY_EVENTS,
  type PolicyDocument,
  PolicyDocumentSchema,
  parseDuration,
  type RateLimitDocument,
  type RuleDocument,
} from './schema.ts';
import type { CompiledPolicy, PinningSettings, RateLimitSummary, RuleSummary } from './types.ts';

/** Options for {@link compilePolicy}. */
export interface CompilePolicyOptions {
  /**
   * Where the text came from (a file path, say): prefixes every issue's position and is kept
   * on the compiled policy. Default: none.
   */
  sourceName?: string;
}

type Path = readonly (string | number)[];

interface Position {
  line: number;
  column: number;
}

/** Finds YAML nodes by document path and turns offsets into line/column. */
class Locator {
  readonly #doc: ReturnType<typeof parseDocument>;
  readonly #lines: LineCounter;
  readonly #text: string;

  constructor(doc: ReturnType<typeof parseDocument>, lines: LineCounter, text: string) {
    this.#doc = doc;
    this.#lines = lines;
    this.#text = text;
  }

  at(offset: number): Position {
    const { line, col } = this.#lines.linePos(offset);
    return { line, column: col };
  }

  /** The node at `path`, or the nearest ancestor that exists. */
  node(path: Path): YamlNode | undefined {
    let node: unknown = this.#doc.contents;
    for (const key of path) {
      const next = this.#child(node, key);
      if (next === undefined) break;
      node = next;
    }
    return node as YamlNode | undefined;
  }

  #child(node: unknown, key: string | number): unknown {
    if (isMap(node)) {
      return node.items.find((pair) => (isScalar(pair.key) ? pair.key.value : pair.key) === key)
        ?.value;
    }
    if (isSeq(node) && typeof key === 'number') return node.items[key];
    return undefined;
  }

  /** The position of the value at `path` (or of its nearest existing ancestor). */
  position(path: Path): Position | undefined {
    const range = this.node(path)?.range;
    return range ? this.at(range[0]) : undefined;
  }

  /** The position of the key `key` in the mapping at `path`. */
  keyPosition(path: Path, key: string): Position | undefined {
    const node = this.node(path);
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === key);
      const range = isScalar(pair?.key) ? pair.key.range : undefined;
      if (range) return this.at(range[0]);
    }
    return this.position(path);
  }

  /**
   * The position of the `offset`-th character of the string value at `path`: exact for
   * single-line plain and quoted scalars without escapes and for literal block scalars (`|`),
   * else the start of the value.
   */
  stringOffset(path: Path, offset: number): Position | undefined {
    const node = this.node(path);
    if (!isScalar(node) || typeof node.value !== 'string' || !node.range) {
      return this.position(path);
    }
    const scalar = node as Scalar<string>;
    const start = node.range[0];
    const value = scalar.value;
    switch (scalar.type) {
      case 'PLAIN':
        if (this.#text.startsWith(value, start)) return this.at(start + offset);
        break;
      case 'QUOTE_SINGLE':
      case 'QUOTE_DOUBLE':
        if (this.#text.startsWith(value, start + 1)) return this.at(start + 1 + offset);
        break;
      case 'BLOCK_LITERAL': {
        const header = this.at(start);
        const before = value.slice(0, offset);
        const lineIndex = before.split('\n').length - 1;
        const column = offset - (before.lastIndexOf('\n') + 1);
        const firstLineStart = this.#text.indexOf('\n', start) + 1;
        const indent = /^ */.exec(this.#text.slice(firstLineStart))?.[0].length ?? 0;
        return { line: header.line + 1 + lineIndex, column: indent + column + 1 };
      }
      default:
        break;
    }
    return this.at(start);
  }
}

/** Collects issues with positions; `rule` names the rule or rate limit of a path. */
class IssueCollector {
  readonly issues: PolicyIssue[] = [];
  readonly #locator: Locator;
  readonly #raw: unknown;

  constructor(locator: Locator, raw: unknown) {
    this.#locator = locator;
    this.#raw = raw;
  }

  add(path: Path, message: string, position?: Position): void {
    const at = position ?? this.#locator.position(path);
    const rule = this.#ruleId(path);
    this.issues.push({
      path: formatPath(path),
      message,
      ...(rule === undefined ? {} : { rule }),
      ...(at === undefined ? {} : { line: at.line, column: at.column }),
    });
  }

  #ruleId(path: Path): string | undefined {
    const [list, index] = path;
    if ((list !== 'rules' && list !== 'rateLimits') || typeof index !== 'number') return undefined;
    const item = (this.#raw as Record<string, unknown> | null)?.[list];
    const id = Array.isArray(item) ? (item[index] as { id?: unknown } | undefined)?.id : undefined;
    return typeof id === 'string' ? id : undefined;
  }

  zod(error: z.ZodError): void {
    for (const issue of error.issues) {
      const path = issue.path.filter((k): k is string | number => typeof k !== 'symbol');
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys) {
          this.add(
            [...path, key],
            unknownKeyMessage(key, allowedKeysAt(path)),
            this.#locator.keyPosition(path, key),
          );
        }
      } else if (issue.code !== 'custom' && valueAt(this.#raw, path) === undefined) {
        const expected = issue.message
          .replace(/^Invalid (input|option): /, '')
          .replace(/, received undefined$/, '');
        this.add(path, `is required (${expected})`);
      } else {
        this.add(path, issue.message);
      }
    }
  }

  cel(path: Path, error: CelCompileError): void {
    const at =
      error.offset === undefined
        ? this.#locator.position(path)
        : this.#locator.stringOffset(path, error.offset);
    this.add(path, `invalid CEL: ${error.message}`, at);
  }
}

function valueAt(raw: unknown, path: Path): unknown {
  let value = raw;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string | number, unknown>)[key];
  }
  return value;
}

function allowedKeysAt(path: Path): readonly string[] {
  if (path.length === 0) return ALLOWED_KEYS.document;
  if (path[0] === 'rules') return ALLOWED_KEYS.rule;
  if (path[0] === 'rateLimits') return ALLOWED_KEYS.rateLimit;
  if (path[0] === 'cedar') return ALLOWED_KEYS.cedar;
  if (path[0] === 'pinning') return ALLOWED_KEYS.pinning;
  return [];
}

function fingerprintOf(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

type Compiler<T> = (source: string) => Compiled<T>;

/** Compiles the CEL string at `path` of the raw document, if it is one; records failures. */
function compileAt<T>(
  issues: IssueCollector,
  raw: unknown,
  path: Path,
  compile: Compiler<T>,
): T | undefined {
  const source = valueAt(raw, path);
  if (typeof source !== 'string' || source.trim() === '') return undefined;
  const compiled = compile(source);
  if (compiled.ok) return compiled.value;
  issues.cel(path, compiled.error);
  return undefined;
}

function listAt(raw: unknown, key: string): readonly unknown[] {
  const list = valueAt(raw, [key]);
  return Array.isArray(list) ? list : [];
}

function checkUniqueIds(issues: IssueCollector, raw: unknown, list: string, what: string): void {
  const seen = new Map<string, number>();
  listAt(raw, list).forEach((item, i) => {
    const id = valueAt(item, ['id']);
    if (typeof id !== 'string') return;
    const first = seen.get(id);
    if (first === undefined) seen.set(id, i);
    else {
      issues.add([list, i, 'id'], `duplicate ${what} id "${id}" (first used by ${list}[${first}])`);
    }
  });
}

function compileRule(
  rule: RuleDocument,
  events: readonly string[],
  when: Condition | undefined,
): CompiledRule {
  const ruleEvents = rule.events ?? events;
  const summary: RuleSummary = Object.freeze({
    id: rule.id,
    effect: rule.effect,
    events: Object.freeze([...ruleEvents]),
    ...(rule.tools ? { tools: Object.freeze([...rule.tools]) } : {}),
    ...(rule.principals ? { principals: Object.freeze([...rule.principals]) } : {}),
    ...(rule.when === undefined ? {} : { when: rule.when }),
    ...(rule.message === undefined ? {} : { message: rule.message }),
  });
  return {
    id: rule.id,
    effect: rule.effect,
    summary,
    events: compileEventMatcher(ruleEvents),
    targets: rule.tools ? compileGlobs(rule.tools) : undefined,
    principals: rule.principals ? compilePrincipalMatcher(rule.principals) : undefined,
    when,
    decision: Object.freeze(
      rule.effect === 'allow'
        ? { allowed: true, rule: rule.id }
        : { allowed: false, rule: rule.id, message: denyMessage(rule.id, rule.message) },
    ),
  };
}

function compileRateLimit(
  limit: RateLimitDocument,
  events: readonly string[],
  when: Condition | undefined,
  key: KeyReader,
): CompiledRateLimit {
  const limitEvents = limit.events ?? events;
  const summary: RateLimitSummary = Object.freeze({
    id: limit.id,
    events: Object.freeze([...limitEvents]),
    ...(limit.tools ? { tools: Object.freeze([...limit.tools]) } : {}),
    ...(limit.principals ? { principals: Object.freeze([...limit.principals]) } : {}),
    ...(limit.when === undefined ? {} : { when: limit.when }),
    key: limit.key,
    limit: limit.limit,
    window: limit.window,
    windowMs: parseDuration(limit.window) ?? 0,
    failOpen: limit.failOpen,
    ...(limit.message === undefined ? {} : { message: limit.message }),
  });
  return {
    summary,
    key,
    events: compileEventMatcher(limitEvents),
    targets: limit.tools ? compileGlobs(limit.tools) : undefined,
    principals: limit.principals ? compilePrincipalMatcher(limit.principals) : undefined,
    when,
  };
}

function byPosition(a: PolicyIssue, b: PolicyIssue): number {
  return (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0);
}

/**
 * Compiles a YAML policy document (see the package README for the language). Throws a
 * {@link PolicyLoadError} listing every problem, each with its path, rule id and YAML
 * line/column where known; on success the result is immutable and never throws when
 * evaluated.
 */
export function compilePolicy(text: string, options: CompilePolicyOptions = {}): CompiledPolicy {
  const { sourceName } = options;
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, {
    lineCounter,
    keepSourceTokens: true,
    prettyErrors: false,
    uniqueKeys: true,
  });
  const locator = new Locator(doc, lineCounter, text);
  if (doc.errors.length > 0) {
    const issues = doc.errors.map((error): PolicyIssue => {
      const at = locator.at(error.pos[0]);
      return { path: '', message: `YAML: ${error.message}`, line: at.line, column: at.column };
    });
    throw new PolicyLoadError(issues, sourceName);
  }

  const raw: unknown = doc.toJS();
  const issues = new IssueCollector(locator, raw);
  if (raw === null || raw === undefined) {
    issues.add([], 'the document is empty; a policy needs at least "version: 1"');
    throw new PolicyLoadError(issues.issues, sourceName);
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    issues.add([], 'must be a mapping with "version: 1"');
    throw new PolicyLoadError(issues.issues, sourceName);
  }

  // CEL is compiled from the raw strings, so CEL problems show up beside shape problems.
  const rawRules = listAt(raw, 'rules');
  const rawLimits = listAt(raw, 'rateLimits');
  const whens = rawRules.map((_, i) =>
    compileAt(issues, raw, ['rules', i, 'when'], compileCondition),
  );
  const limitWhens = rawLimits.map((_, i) =>
    compileAt(issues, raw, ['rateLimits', i, 'when'], compileCondition),
  );
  const keys = rawLimits.map((_, i) =>
    compileAt(issues, raw, ['rateLimits', i, 'key'], compileKey),
  );
  checkUniqueIds(issues, raw, 'rules', 'rule');
  checkUniqueIds(issues, raw, 'rateLimits', 'rate limit');

  const parsed = PolicyDocumentSchema.safeParse(raw);
  if (!parsed.success) issues.zod(parsed.error);
  if (!parsed.success || issues.issues.length > 0) {
    throw new PolicyLoadError(issues.issues.sort(byPosition), sourceName);
  }
  const document: PolicyDocument = parsed.data;
  const events = document.events ?? DEFAULT_POLICY_EVENTS;

  let cedar: CedarProgram | undefined;
  if (document.engine === 'cedar' && document.cedar) {
    const compiled = compileCedar(document.cedar, document.default);
    if (!compiled.ok) {
      for (const issue of compiled.issues) {
        const at =
          issue.offset === undefined
            ? undefined
            : locator.stringOffset(['cedar', 'policies'], issue.offset);
        const where = issue.policy === undefined ? '' : `policy "${issue.policy}": `;
        issues.add(['cedar', 'policies'], `invalid Cedar: ${where}${issue.message}`, at);
      }
      throw new PolicyLoadError(issues.issues.sort(byPosition), sourceName);
    }
    cedar = compiled.program;
  }

  const compiledRules = document.rules.map((rule, i) => compileRule(rule, events, whens[i]));
  const compiledLimits = document.rateLimits.map((limit, i) => {
    const key = keys[i];
    // The schema requires a non-empty key, and a key that failed to compile threw above.
    if (key === undefined) throw new Error(`rate limit ${limit.id}: key not compiled`);
    return compileRateLimit(limit, events, limitWhens[i], key);
  });
  return withProgram(
    {
      version: 1,
      engine: document.engine,
      default: document.default,
      events: Object.freeze([...events]),
      rules: Object.freeze(compiledRules.map((r) => r.summary)),
      cedarPolicies: cedar?.policies ?? Object.freeze([]),
      rateLimits: Object.freeze(compiledLimits.map((r) => r.summary)),
      pinning: Object.freeze({ ...document.pinning }),
      fingerprint: fingerprintOf(text),
      ...(sourceName === undefined ? {} : { sourceName }),
    },
    {
      rules: compiledRules,
      rateLimits: compiledLimits,
      defaultDecision: defaultDecisionOf(document.default),
      cedar,
    },
  );
}

const PINNING_OFF: PinningSettings = Object.freeze({ enabled: false, failOpen: true });

/**
 * The policy in force when there is no policy file: allows everything (CEL engine, no rules,
 * no rate limits, no pinning, the default events). Its `fingerprint` is `"allow-all"`.
 */
export function allowAllPolicy(): CompiledPolicy {
  return withProgram(
    {
      version: 1,
      engine: 'cel',
      default: 'allow',
      events: DEFAULT_POLICY_EVENTS,
      rules: Object.freeze([]),
      cedarPolicies: Object.freeze([]),
      rateLimits: Object.freeze([]),
      pinning: PINNING_OFF,
      fingerprint: 'allow-all',
    },
    { rules: [], rateLimits: [], defaultDecision: defaultDecisionOf('allow'), cedar: undefined },
  );
}
