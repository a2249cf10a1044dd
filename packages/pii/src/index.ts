/**
 * @fleet/pii: PII and secret detection, transformation (redact, mask, hash, tokenize, block),
 * bounded JSON walking over MCP messages, and the config schema of the pii-redactor service.
 * Pure: no I/O (node:crypto only for HMAC and random token ids).
 */

export type { EntitySettings, PiiConfig, PiiConfigInput, ToolOverride } from './config.ts';
export {
  AllowListSchema,
  EntitySettingsSchema,
  EntityTypeSchema,
  PiiConfigSchema,
  parsePiiConfig,
  StrategySchema,
  ToolOverrideSchema,
} from './config.ts';
export type { PiiEngine, PiiEngineOptions, ValueOptions } from './engine.ts';
export { createPiiEngine, createTextRedactor } from './engine.ts';
export type { EntityType } from './entities.ts';
export {
  ENTITY_TYPES,
  isEntityType,
  SECRET_ENTITY_TYPES,
  STRUCTURED_ENTITY_TYPES,
} from './entities.ts';
export type { PiiConfigIssue, PiiErrorCode, PiiLimit } from './errors.ts';
export { PiiConfigError, PiiError, PiiLimitError } from './errors.ts';
export type { RestoreResult, ValueRestoreResult } from './tokens.ts';
export {
  collectTokens,
  findTokens,
  formatToken,
  mintTokenId,
  restoreTokens,
  restoreTokensInValue,
} from './tokens.ts';
export { hashValue, maskValue, STRATEGIES } from './transform.ts';
export type {
  Detection,
  DetectOptions,
  EntityCounts,
  Finding,
  FoundToken,
  GuardResult,
  McpPhase,
  ScanResult,
  Strategy,
  TextTransformResult,
  Tokenizer,
  TokenPair,
  TransformOptions,
  ValueTransformResult,
  Violation,
  WalkLimits,
} from './types.ts';
export type { LeafVisitor, PathSegment, TargetPattern } from './walk.ts';
export {
  DEFAULT_WALK_LIMITS,
  formatJsonPath,
  mapMcpStrings,
  mapStringLeaves,
  mcpTargets,
} from './walk.ts';
