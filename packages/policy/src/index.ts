/**
 * @fleet/policy: the policy language (YAML rules with CEL conditions, or Cedar) and its pure
 * evaluator. Compile once per load, then decide, explain, filter list results and match
 * rate limits, all without I/O; the policy-validator service adds file watching and Redis.
 */

export type { PolicyIssue } from './errors.ts';
export { formatPolicyIssue, PolicyLoadError } from './errors.ts';
export { evaluate, explain, matchRateLimits, policyInputOf } from './evaluate.ts';
export {
  couldEverAllow,
  FILTERABLE_LIST_EVENTS,
  filterListResult,
  filterPromptsList,
  filterResourcesList,
  filterToolsList,
} from './filter.ts';
export type { CompilePolicyOptions } from './load.ts';
export { allowAllPolicy, compilePolicy } from './load.ts';
export type {
  PinningDocument,
  PolicyDocument,
  RateLimitDocument,
  RuleDocument,
} from './schema.ts';
export {
  DEFAULT_POLICY_EVENTS,
  PinningSchema,
  PolicyDocumentSchema,
  parseDuration,
  RateLimitSchema,
  RuleSchema,
} from './schema.ts';
export type {
  CallQuery,
  CedarPolicySummary,
  CompiledPolicy,
  ConditionExplanation,
  ConditionResult,
  Decision,
  Effect,
  Explanation,
  ListFilterResult,
  MatchExplanation,
  PinningSettings,
  PolicyEngine,
  PolicyInput,
  RateLimitMatch,
  RateLimitSummary,
  RuleError,
  RuleExplanation,
  RuleSummary,
  WhenExplanation,
} from './types.ts';
