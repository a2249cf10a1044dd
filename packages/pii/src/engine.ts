/**
 * The engine: a parsed config compiled once into per-tool policies, and the operations the
 * service composes — detect, transform (text, JSON, MCP messages), scan and guard. Pure apart
 * from node:crypto (HMAC, random token ids); no I/O.
 */
import { type AllowList, type AnalyzerPolicy, analyze, analyzeSegments } from './analyzer.ts';
import {
  compileAllowPattern,
  type PiiConfig,
  type PiiConfigInput,
  parsePiiConfig,
} from './config.ts';
import { isPhoneRegion } from './detectors/phone.ts';
import { DEFAULT_RECOGNIZERS } from './detectors/registry.ts';
import { ENTITY_TYPES, type EntityType } from './entities.ts';
import { PiiError } from './errors.ts';
import {
  applyDetections,
  createSession,
  type TransformPolicy,
  type TransformSession,
} from './transform.ts';
import type {
  Detection,
  DetectOptions,
  Finding,
  GuardResult,
  McpPhase,
  ScanResult,
  Strategy,
  TextTransformResult,
  TransformOptions,
  ValueTransformResult,
  WalkLimits,
} from './types.ts';
import { collectMcpStrings, collectStringLeaves, type StringLeaves } from './walk.ts';

/** Options of {@link createPiiEngine}. */
export interface PiiEngineOptions {
  /** The config, parsed or as written (default: all defaults). */
  config?: PiiConfigInput | PiiConfig;
  /**
   * HMAC key for the `hash` strategy, at least 16 bytes; required when any strategy is `hash`.
   * The service reads it from the environment variable named by `hash.keyEnv`.
   */
  hmacKey?: string | Uint8Array;
  /** Tokenizer used when a call does not pass its own. */
  tokenizer?: TransformOptions['tokenizer'];
}

/** Options of a JSON transformation or scan. */
export interface ValueOptions extends TransformOptions {
  /** Override the config's `limits`. */
  limits?: WalkLimits;
}

/** The compiled engine. */
export interface PiiEngine {
  /** The parsed config it was built from. */
  readonly config: PiiConfig;
  /** Detections in `text` (sorted, non-overlapping, allow-list applied). */
  detect(text: string, options?: DetectOptions): Detection[];
  /** Detect and transform one string. */
  transformText(text: string, options?: TransformOptions): TextTransformResult;
  /** Detect and transform every string leaf of a JSON value (copy-on-write, bounded). */
  transformValue<T>(value: T, options?: ValueOptions): ValueTransformResult<T>;
  /**
   * Transform the user-data parts of an MCP message (`params` of a request, `result` of a
   * response; see `mcpTargets`). For a `tools/call` request the tool defaults to `params.name`;
   * for a response pass `options.tool` (the result does not name it).
   */
  transformMcp<T>(
    phase: McpPhase,
    method: string,
    message: T,
    options?: ValueOptions,
  ): ValueTransformResult<T>;
  /** Findings in every string leaf of a JSON value, without transforming it. */
  scanValue(value: unknown, options?: ValueOptions): ScanResult;
  /** Findings in the user-data parts of an MCP message, without transforming it. */
  scanMcp(phase: McpPhase, method: string, message: unknown, options?: ValueOptions): ScanResult;
  /**
   * The pii-guard check of a request: every finding whose type is in `guard.block` or whose
   * strategy is `block` is a violation (path and type only).
   */
  guard(method: string, params: unknown, options?: ValueOptions): GuardResult;
  /** The types {@link PiiEngine.guard} rejects for a tool. */
  blockedTypes(tool?: string): ReadonlySet<EntityType>;
}

interface Policy extends AnalyzerPolicy, TransformPolicy {
  readonly blockTypes: ReadonlySet<EntityType>;
}

function toKey(key: string | Uint8Array | undefined): Uint8Array | undefined {
  if (key === undefined) return undefined;
  return typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
}

function usesHash(config: PiiConfig): boolean {
  const strategies: Array<Strategy | undefined> = [config.defaultStrategy];
  for (const s of Object.values(config.entities)) strategies.push(s?.strategy);
  for (const tool of Object.values(config.tools)) {
    strategies.push(tool.defaultStrategy);
    for (const s of Object.values(tool.entities)) strategies.push(s?.strategy);
  }
  return strategies.includes('hash');
}

function compilePolicy(
  config: PiiConfig,
  tool: string | undefined,
  hmacKey: Uint8Array | undefined,
): Policy {
  const override = tool === undefined ? undefined : config.tools[tool];
  const enabled = new Set<EntityType>();
  const thresholds = {} as Record<EntityType, number>;
  const strategies = {} as Record<EntityType, Strategy>;
  const keepLast = {} as Record<EntityType, number>;
  for (const type of ENTITY_TYPES) {
    const s = { ...config.entities[type], ...override?.entities[type] };
    if (s.enabled ?? true) enabled.add(type);
    thresholds[type] = s.threshold ?? config.defaultThreshold;
    strategies[type] = s.strategy ?? override?.defaultStrategy ?? config.defaultStrategy;
    keepLast[type] = s.keepLast ?? config.mask.keepLast;
  }
  const allow: AllowList = {
    values: new Set([...config.allow.values, ...(override?.allow.values ?? [])]),
    patterns: [...config.allow.patterns, ...(override?.allow.patterns ?? [])].map(
      compileAllowPattern,
    ),
  };
  const blockTypes = new Set<EntityType>(config.guard.block);
  for (const type of ENTITY_TYPES) if (strategies[type] === 'block') blockTypes.add(type);
  const region = config.phone.defaultRegion;
  if (!isPhoneRegion(region)) throw new RangeError(`unknown phone region ${region}`);
  return {
    recognizers: DEFAULT_RECOGNIZERS.filter((r) => r.types.some((t) => enabled.has(t))),
    enabled,
    thresholds,
    allow,
    env: { defaultRegion: region },
    strategies,
    keepLast,
    maskChar: config.mask.char,
    hmacKey,
    blockTypes,
  };
}

/**
 * Build an engine from a config. Throws `PiiConfigError` for a bad config and
 * `PiiError('PII_HMAC_KEY_INVALID')` when a `hash` strategy is configured without a key of at
 * least 16 bytes.
 */
export function createPiiEngine(options: PiiEngineOptions = {}): PiiEngine {
  const config = parsePiiConfig(options.config);
  const hmacKey = toKey(options.hmacKey);
  if (usesHash(config) && (hmacKey === undefined || hmacKey.length < 16)) {
    throw new PiiError(
      'PII_HMAC_KEY_INVALID',
      `strategy hash is configured: an HMAC key of at least 16 bytes is required (${config.hash.keyEnv})`,
      { keyEnv: config.hash.keyEnv },
    );
  }
  const defaultPolicy = compilePolicy(config, undefined, hmacKey);
  const toolPolicies = new Map<string, Policy>();
  const policyFor = (tool: string | undefined): Policy => {
    if (tool === undefined || !Object.hasOwn(config.tools, tool)) return defaultPolicy;
    let p = toolPolicies.get(tool);
    if (p === undefined) {
      p = compilePolicy(config, tool, hmacKey);
      toolPolicies.set(tool, p);
    }
    return p;
  };
  const defaultTokenizer = options.tokenizer;
  const limitsOf = (o: ValueOptions): WalkLimits => o.limits ?? config.limits;

  /**
   * Collect the string leaves in one walk, analyze them together (analyzeSegments), hand each
   * leaf with detections to `onLeaf` (in walk order) and write the changed ones back, copying
   * only the containers on their paths. Without any change the input comes back as is.
   */
  const detectThenMap = <T>(
    leaves: StringLeaves<T>,
    policy: Policy,
    onLeaf: (text: string, path: string, detections: readonly Detection[]) => string,
  ): T => {
    const { texts } = leaves;
    if (texts.length === 0) return leaves.root;
    const { segments, detections } = analyzeSegments(texts, leaves.keys, policy);
    // Keys holding an entity are masked in every path before any path is written.
    for (let k = 0; k < segments.length; k++) {
      const i = segments[k] as number;
      if (leaves.isKey(i)) leaves.maskKey(i);
    }
    const changed: number[] = [];
    const replacements: string[] = [];
    for (let k = 0; k < segments.length; k++) {
      const i = segments[k] as number;
      const text = texts[i] as string;
      const out = onLeaf(text, leaves.pathText(i), detections[k] as Detection[]);
      if (out !== text) {
        changed.push(i);
        replacements.push(out);
      }
    }
    return changed.length === 0 ? leaves.root : leaves.replace(changed, replacements);
  };
  const transformLeaf =
    (policy: Policy, session: TransformSession) =>
    (text: string, path: string, detections: readonly Detection[]) =>
      applyDetections(text, detections, path, policy, session);
  const scanLeaf =
    (policy: Policy, findings: Finding[], counts: ScanResult['counts']) =>
    (text: string, at: string, detections: readonly Detection[]) => {
      for (const d of detections) {
        counts[d.type] = (counts[d.type] ?? 0) + 1;
        findings.push({
          path: at,
          type: d.type,
          start: d.start,
          end: d.end,
          score: d.score,
          strategy: policy.strategies[d.type],
        });
      }
      return text;
    };
  const toolOf = (phase: McpPhase, method: string, message: unknown, options: ValueOptions) => {
    if (options.tool !== undefined || phase !== 'request' || method !== 'tools/call')
      return options.tool;
    const name = (message as { name?: unknown } | null)?.name;
    return typeof name === 'string' ? name : undefined;
  };
  const valueResult = <T>(
    value: T,
    input: T,
    session: TransformSession,
  ): ValueTransformResult<T> => ({
    value,
    changed: value !== input,
    counts: session.counts,
    findings: session.findings,
    blocked: session.blocked,
  });

  const engine: PiiEngine = {
    config,
    detect(text, options = {}) {
      return analyze(text, policyFor(options.tool), options.key);
    },
    transformText(text, options = {}) {
      const policy = policyFor(options.tool);
      const session = createSession(options.tokenizer ?? defaultTokenizer);
      const detections = analyze(text, policy, options.key);
      const out = applyDetections(text, detections, '', policy, session);
      return {
        text: out,
        changed: out !== text,
        counts: session.counts,
        findings: session.findings,
        blocked: session.blocked,
      };
    },
    transformValue(value, options = {}) {
      const policy = policyFor(options.tool);
      const session = createSession(options.tokenizer ?? defaultTokenizer);
      const out = detectThenMap(
        collectStringLeaves(value, limitsOf(options)),
        policy,
        transformLeaf(policy, session),
      );
      return valueResult(out, value, session);
    },
    transformMcp(phase, method, message, options = {}) {
      const policy = policyFor(toolOf(phase, method, message, options));
      const session = createSession(options.tokenizer ?? defaultTokenizer);
      const out = detectThenMap(
        collectMcpStrings(phase, method, message, limitsOf(options)),
        policy,
        transformLeaf(policy, session),
      );
      return valueResult(out, message, session);
    },
    scanValue(value, options = {}) {
      const findings: Finding[] = [];
      const counts: ScanResult['counts'] = {};
      const policy = policyFor(options.tool);
      detectThenMap(
        collectStringLeaves(value, limitsOf(options)),
        policy,
        scanLeaf(policy, findings, counts),
      );
      return { counts, findings };
    },
    scanMcp(phase, method, message, options = {}) {
      const findings: Finding[] = [];
      const counts: ScanResult['counts'] = {};
      const policy = policyFor(toolOf(phase, method, message, options));
      detectThenMap(
        collectMcpStrings(phase, method, message, limitsOf(options)),
        policy,
        scanLeaf(policy, findings, counts),
      );
      return { counts, findings };
    },
    guard(method, params, options = {}) {
      const tool = toolOf('request', method, params, options);
      const blocked = policyFor(tool).blockTypes;
      // Not `{ ...options, tool }`: see `merged` in @fleet/core (a spread clone that gains a
      // key is tenured on Node 20).
      const { findings } = engine.scanMcp(
        'request',
        method,
        params,
        Object.assign({}, options, { tool }),
      );
      const violations = findings
        .filter((f) => blocked.has(f.type))
        .map(({ path, type }) => ({ path, type }));
      return { allowed: violations.length === 0, violations };
    },
    blockedTypes(tool) {
      return policyFor(tool).blockTypes;
    },
  };
  return engine;
}

/**
 * A text redactor for what must never hold a raw value (spans, stored previews and reasons):
 * every entity type detected, each value replaced by `[TYPE]`. One engine behind it; pure.
 */
export function createTextRedactor(): (text: string) => string {
  const engine = createPiiEngine({ config: { defaultStrategy: 'redact' } });
  return (text) => engine.transformText(text).text;
}
