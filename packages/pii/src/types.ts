/** Public types of the PII engine. */
import type { EntityType } from './entities.ts';

/**
 * What happens to a detected value: `redact` → `[TYPE]`, `mask` → keep the last N characters,
 * `hash` → keyed pseudonym `<TYPE:8 hex>`, `tokenize` → reversible `<<TYPE:tok_…>>`, `block` →
 * redacted like `redact` and reported in `blocked` so the service's guard can reject.
 */
export type Strategy = 'redact' | 'mask' | 'hash' | 'tokenize' | 'block';

/** One detected span. Offsets are UTF-16 indices into the analysed string, end exclusive. */
export interface Detection {
  type: EntityType;
  start: number;
  end: number;
  /** Confidence in [0, 1] after context words were applied. */
  score: number;
  /** Name of the recognizer that produced it (e.g. `phone`, `credit-card`). */
  recognizer: string;
}

/** Occurrences per entity type; types with none are absent. */
export type EntityCounts = Partial<Record<EntityType, number>>;

/**
 * A detection as reported after a transformation or scan: where (JSON path and offsets),
 * what type, and what was done. Never the value.
 */
export interface Finding {
  /** JSON path of the string leaf, e.g. `arguments.note` or `content[0].text`; `''` for plain text. */
  path: string;
  type: EntityType;
  start: number;
  end: number;
  score: number;
  strategy: Strategy;
}

/** One value the `tokenize` strategy replaced; handed to {@link Tokenizer.onToken}. */
export interface TokenPair {
  type: EntityType;
  /** The exact text that was replaced. */
  original: string;
  /** The full token written into the output, e.g. `<<EMAIL_ADDRESS:tok_0a1b2c3d4e5f>>`. */
  token: string;
}

/**
 * The caller's side of reversible tokenization. The engine mints the token and reports each
 * new (type, original, token) pair once per transformation call; the service stores the
 * pairs (e.g. in its vault, scoped to the principal) before the output leaves it.
 */
export interface Tokenizer {
  /** Receives each distinct pair once per call, in order of first occurrence. */
  onToken(pair: TokenPair): void;
  /**
   * Optional: the 12-character id (`[0-9a-z]{12}`) to use for this value, e.g. to reuse a
   * token already issued to the same principal. Default: 12 random characters.
   */
  mintId?(type: EntityType, original: string): string;
}

/** A token found in text by `findTokens`. */
export interface FoundToken {
  /** The whole token, e.g. `<<EMAIL_ADDRESS:tok_0a1b2c3d4e5f>>`. */
  token: string;
  /** The entity type written in the token (not checked against the entity table). */
  type: string;
  /** The 12-character id. */
  id: string;
  start: number;
  end: number;
}

/** Bounds on a JSON walk. */
export interface WalkLimits {
  /** Deepest nesting of arrays/objects allowed (default 64). */
  maxDepth?: number;
  /** Most UTF-8 bytes of string leaves visited in one walk (default 4 MiB; `Infinity`: no bound). */
  maxStringBytes?: number;
}

/** Which half of an MCP exchange a message belongs to. */
export type McpPhase = 'request' | 'response';

/** Options for detection. */
export interface DetectOptions {
  /** Tool name whose overrides apply (`tools.<name>` in the config). */
  tool?: string;
  /**
   * The JSON property name the string was found under, if any. A secret-like name
   * (`password`, `api_key`, `clientSecret`, `authorization`, …) marks the whole value as `SECRET`.
   */
  key?: string | number;
}

/** Options for a transformation of text or JSON. */
export interface TransformOptions extends DetectOptions {
  /** Receives tokenize pairs; required when a `tokenize` strategy applies. */
  tokenizer?: Tokenizer;
}

/** Result of transforming one string. */
export interface TextTransformResult {
  text: string;
  changed: boolean;
  counts: EntityCounts;
  findings: Finding[];
  /** The findings whose strategy is `block`. */
  blocked: Finding[];
}

/** Result of transforming a JSON value (or the walked parts of an MCP message). */
export interface ValueTransformResult<T = unknown> {
  /** The new value; the input reference itself when nothing changed. */
  value: T;
  changed: boolean;
  counts: EntityCounts;
  findings: Finding[];
  /** The findings whose strategy is `block`. */
  blocked: Finding[];
}

/** Result of scanning (detecting without transforming) a JSON value. */
export interface ScanResult {
  counts: EntityCounts;
  findings: Finding[];
}

/** A guard violation: a block-listed entity type at a JSON path. */
export interface Violation {
  path: string;
  type: EntityType;
}

/** Result of {@link PiiEngine.guard}. */
export interface GuardResult {
  allowed: boolean;
  violations: Violation[];
}
