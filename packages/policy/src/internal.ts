/**
 * The private half of a compiled policy: precompiled matchers, conditions and precomputed
 * decisions. Reached through a symbol so the public `CompiledPolicy` stays descriptive.
 */
import type { Principal } from '@fleet/core';
import type { CedarProgram } from './cedar.ts';
import type { Condition, KeyReader } from './cel.ts';
import type { Matcher } from './match.ts';
import type { CompiledPolicy, Decision, Effect, RateLimitSummary, RuleSummary } from './types.ts';

/** The matchers every rule and rate limit share. */
export interface CompiledScope {
  readonly events: Matcher<string>;
  /** Absent: any target, also none. */
  readonly targets: Matcher<string> | undefined;
  readonly principals: Matcher<Principal> | undefined;
  readonly when: Condition | undefined;
}

/** A compiled CEL rule. */
export interface CompiledRule extends CompiledScope {
  readonly id: string;
  readonly effect: Effect;
  readonly summary: RuleSummary;
  /** Returned as is when the rule decides (no allocation on the hot path). */
  readonly decision: Decision;
}

/** A compiled rate limit. */
export interface CompiledRateLimit extends CompiledScope {
  readonly summary: RateLimitSummary;
  readonly key: KeyReader;
}

/** Everything evaluation needs. */
export interface PolicyProgram {
  readonly rules: readonly CompiledRule[];
  readonly rateLimits: readonly CompiledRateLimit[];
  readonly defaultDecision: Decision;
  readonly cedar: CedarProgram | undefined;
}

const PROGRAM: unique symbol = Symbol('fleet.policy.program');

/** A compiled policy with its program attached. */
type PolicyWithProgram = CompiledPolicy & { readonly [PROGRAM]: PolicyProgram };

/** Attaches a program to a policy description and freezes the result. */
export function withProgram(policy: CompiledPolicy, program: PolicyProgram): CompiledPolicy {
  // Not enumerable: a spread copy of a policy is not a policy.
  const out = Object.defineProperty({ ...policy }, PROGRAM, { value: program, enumerable: false });
  return Object.freeze(out);
}

/** The program of a policy made by `compilePolicy` or `allowAllPolicy`. */
export function programOf(policy: CompiledPolicy): PolicyProgram {
  const program = (policy as Partial<PolicyWithProgram>)[PROGRAM];
  if (program === undefined) {
    throw new TypeError('not a compiled policy: use compilePolicy() or allowAllPolicy()');
  }
  return program;
}

/** The decision message for a deny. */
export function denyMessage(rule: string, message: string | undefined): string {
  return message ? `denied by rule "${rule}": ${message}` : `denied by rule "${rule}"`;
}

/** The decision when no rule decides. */
export function defaultDecisionOf(effect: Effect): Decision {
  return Object.freeze(
    effect === 'allow'
      ? { allowed: true, rule: 'default' }
      : { allowed: false, rule: 'default', message: denyMessage('default', 'no rule allowed it') },
  );
}
