/** Public types of the policy package: what goes into a decision and what comes out. */
import type { Phase, Principal } from '@fleet/core';

/** What a rule (or the policy default) does when it matches. */
export type Effect = 'allow' | 'deny';

/** The language the rules are written in. */
export type PolicyEngine = 'cel' | 'cedar';

/**
 * One MCP operation as a policy sees it. Build it from an `interceptor/invoke` call with
 * `policyInputOf`; every field except `event`, `phase` and `principal` may be absent.
 */
export interface PolicyInput {
  /** The governed MCP method, e.g. `tools/call`. */
  event: string;
  phase: Phase;
  /** Tool name (`tools/call`). */
  tool?: string;
  /** Prompt name (`prompts/get`). */
  prompt?: string;
  /** Resource URI (`resources/read`). */
  resource?: string;
  /** Tool or prompt arguments; treated as an empty map when absent. */
  arguments?: Record<string, unknown>;
  /** Who is asking; `{type: "anonymous"}` when the request carried no principal. */
  principal: Principal;
}

/** A rule whose condition could not be evaluated for one input. */
export interface RuleError {
  /** Rule id (CEL) or Cedar policy id. */
  readonly rule: string;
  readonly message: string;
}

/** The outcome of evaluating a policy for one input. */
export interface Decision {
  readonly allowed: boolean;
  /** Id of the rule that decided, or `"default"` when none did. */
  readonly rule: string;
  /** Present exactly when denied: `denied by rule "<id>": <rule message>`. */
  readonly message?: string;
  /** Cedar only: every policy id that determined the decision (`rule` is the first). */
  readonly reasons?: readonly string[];
  /** Rules whose condition failed to evaluate on this input (log these; never shown to clients). */
  readonly errors?: readonly RuleError[];
}

/** A rule as written, for admin views and logs. */
export interface RuleSummary {
  readonly id: string;
  readonly effect: Effect;
  readonly events: readonly string[];
  readonly tools?: readonly string[];
  readonly principals?: readonly string[];
  readonly when?: string;
  readonly message?: string;
}

/** A Cedar policy of an `engine: cedar` document. */
export interface CedarPolicySummary {
  /** The `@id("...")` annotation, else `policy<N>` (N counts policies in text order from 0). */
  readonly id: string;
  /** `permit` is `allow`, `forbid` is `deny`. */
  readonly effect: Effect;
  /** The `@message("...")` annotation, used in deny messages. */
  readonly message?: string;
}

/** A rate-limit rule as written, with its window in milliseconds. */
export interface RateLimitSummary {
  readonly id: string;
  readonly events: readonly string[];
  readonly tools?: readonly string[];
  readonly principals?: readonly string[];
  readonly when?: string;
  /** CEL expression (a dotted path such as `principal.id` is one) giving the bucket key. */
  readonly key: string;
  readonly limit: number;
  /** The window as written (`60s`). */
  readonly window: string;
  readonly windowMs: number;
  readonly failOpen: boolean;
  readonly message?: string;
}

/**
 * Tool pinning as configured: when `enabled`, the service pins the first definition seen of
 * each tool and hides and refuses a tool whose definition changed until it is approved.
 */
export interface PinningSettings {
  readonly enabled: boolean;
  /** When the pin store is unreachable: `true` lets lists and calls through (and logs). */
  readonly failOpen: boolean;
}

/**
 * A policy compiled once per load by `compilePolicy` (or `allowAllPolicy`): immutable, safe to
 * share and to swap atomically on reload. The fields describe it; evaluation state is private.
 */
export interface CompiledPolicy {
  readonly version: 1;
  readonly engine: PolicyEngine;
  /** What happens when no rule decides. */
  readonly default: Effect;
  /**
   * The events the policy governs: the `policy-validator` hooks, and the events of every rule
   * or rate limit that does not list its own.
   */
  readonly events: readonly string[];
  /** CEL rules in evaluation order (empty for `engine: cedar`). */
  readonly rules: readonly RuleSummary[];
  /** Cedar policies in text order (empty for `engine: cel`). */
  readonly cedarPolicies: readonly CedarPolicySummary[];
  readonly rateLimits: readonly RateLimitSummary[];
  /** Tool pinning (`pinning:`); `enabled: false` when the document has no such block. */
  readonly pinning: PinningSettings;
  /** First 16 hex digits of the SHA-256 of the source text (`"allow-all"` for `allowAllPolicy`). */
  readonly fingerprint: string;
  /** Where the text came from, as given in `CompilePolicyOptions.sourceName`. */
  readonly sourceName?: string;
}

/** A rate limit that applies to one input: the service counts `key` in a window of `windowMs`. */
export interface RateLimitMatch {
  readonly id: string;
  /** The bucket key; `""` when the key expression reads an absent field or fails. */
  readonly key: string;
  readonly limit: number;
  readonly windowMs: number;
  /** What to do when the counter store is unreachable: `true` allows (and logs). */
  readonly failOpen: boolean;
  readonly message?: string;
}

/** Whether one part of a rule matched, and why. */
export interface MatchExplanation {
  readonly matched: boolean;
  readonly reason: string;
}

/** The value of one condition in a `when`, as evaluated. */
export type ConditionResult = 'true' | 'false' | 'absent' | 'error' | 'unknown';

/**
 * One leaf of a `when` (a comparison, membership test, call...; `&&`, `||`, `!` and `?:` are
 * split into their operands). `absent` means it read a field the input does not have.
 */
export interface ConditionExplanation {
  readonly expression: string;
  readonly result: ConditionResult;
  readonly detail?: string;
}

/** How a rule's `when` evaluated. `none` means the rule has no `when`. */
export interface WhenExplanation {
  readonly result: 'true' | 'false' | 'error' | 'none';
  readonly reason: string;
  /** The leaves in evaluation order (short-circuited ones are not listed). */
  readonly conditions: readonly ConditionExplanation[];
}

/** One rule (CEL) or Cedar policy in an explanation. */
export interface RuleExplanation {
  readonly id: string;
  readonly effect: Effect;
  /** Every part matched (for Cedar: the policy was satisfied). */
  readonly matched: boolean;
  /** This rule produced the decision. */
  readonly decisive: boolean;
  /** CEL rules: the event check. */
  readonly events?: MatchExplanation;
  /** CEL rules: the tool/prompt/resource name check. */
  readonly tools?: MatchExplanation;
  /** CEL rules: the principal check. */
  readonly principals?: MatchExplanation;
  /** CEL rules: the condition. */
  readonly when?: WhenExplanation;
  /** Cedar policies: why it was or was not satisfied. */
  readonly reason?: string;
  /** The condition failed to evaluate. */
  readonly error?: string;
}

/**
 * Everything `explain` knows about one decision: every rule is evaluated (also after the
 * decisive one, so shadowed matches show up), and the matching rate limits are listed.
 */
export interface Explanation {
  readonly engine: PolicyEngine;
  readonly decision: Decision;
  readonly default: Effect;
  /** The name the `tools` globs were matched against (tool, prompt or resource URI). */
  readonly target?: string;
  readonly rules: readonly RuleExplanation[];
  readonly rateLimits: readonly RateLimitMatch[];
}

/** What `couldEverAllow` asks about: a call that is not made yet, so without arguments. */
export interface CallQuery {
  /** The call event: `tools/call`, `prompts/get` or `resources/read`. */
  event: string;
  tool?: string;
  prompt?: string;
  resource?: string;
  principal: Principal;
}

/** A list result with the items the principal could never use removed. */
export interface ListFilterResult<T> {
  /** A shallow copy of the input with the item array replaced (the input itself when none was removed). */
  readonly result: T;
  readonly total: number;
  readonly kept: number;
  /** Names (or URIs) of the removed items, in list order. */
  readonly removed: readonly string[];
}
