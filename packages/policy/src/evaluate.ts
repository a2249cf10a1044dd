/**
 * Evaluation: rules in order, the first that matches decides, else the policy default.
 * A rule matches when its events, its `tools` globs (on the tool or prompt name or the
 * resource URI), its `principals` and its `when` all match. Conditions read absent fields
 * safely (see `cel.ts`); a condition that fails for another reason never grants access: a
 * failing deny rule denies, a failing allow rule does not match, and the failure is listed
 * in `Decision.errors`.
 */
import type { InvocationContext, Phase, Principal } from '@fleet/core';
import { cedarDecide, cedarExplain } from './cedar.ts';
import {
  type Activation,
  evaluateCondition,
  FALSE,
  firstError,
  keyString,
  TRUE,
  UNDECIDED,
} from './cel.ts';
import { type CompiledRule, type CompiledScope, programOf } from './internal.ts';
import type {
  CompiledPolicy,
  ConditionExplanation,
  Decision,
  Explanation,
  MatchExplanation,
  PolicyInput,
  RateLimitMatch,
  RuleError,
  RuleExplanation,
  WhenExplanation,
} from './types.ts';

const ANONYMOUS: Principal = Object.freeze({ type: 'anonymous' });
const NO_ARGUMENTS: Record<string, unknown> = Object.freeze({});
const NO_MATCHES: readonly RateLimitMatch[] = Object.freeze([]);

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Builds the policy input of one `interceptor/invoke` call. In the request phase,
 * `tools/call` gives `tool` and `arguments`, `prompts/get` gives `prompt` and `arguments`,
 * `resources/read` gives `resource` (the URI); other events and the response phase give
 * neither. A missing principal is `{type: "anonymous"}`.
 */
export function policyInputOf(
  event: string,
  phase: Phase,
  payload: unknown,
  context?: InvocationContext,
): PolicyInput {
  const input: PolicyInput = { event, phase, principal: context?.principal ?? ANONYMOUS };
  if (phase !== 'request' || !isRecord(payload)) return input;
  switch (event) {
    case 'tools/call':
    case 'prompts/get': {
      if (typeof payload.name === 'string') {
        if (event === 'tools/call') input.tool = payload.name;
        else input.prompt = payload.name;
      }
      if (isRecord(payload.arguments)) input.arguments = payload.arguments;
      break;
    }
    case 'resources/read':
      if (typeof payload.uri === 'string') input.resource = payload.uri;
      break;
    default:
      break;
  }
  return input;
}

/** The name `tools` globs match: the tool, else the prompt, else the resource URI. */
export function targetOf(input: {
  tool?: string | undefined;
  prompt?: string | undefined;
  resource?: string | undefined;
}): string | undefined {
  return input.tool ?? input.prompt ?? input.resource;
}

/** The CEL variables of an input; `arguments` is an empty map when absent. */
export function activationOf(input: PolicyInput): Activation {
  return {
    event: input.event,
    phase: input.phase,
    tool: input.tool,
    prompt: input.prompt,
    resource: input.resource,
    arguments: input.arguments ?? NO_ARGUMENTS,
    principal: input.principal,
  };
}

/** Events, names and principals: the parts of a scope that need no CEL. */
export function scopeMatches(
  scope: CompiledScope,
  event: string,
  target: string | undefined,
  principal: Principal,
): boolean {
  if (!scope.events(event)) return false;
  if (scope.targets !== undefined && (target === undefined || !scope.targets(target))) {
    return false;
  }
  return scope.principals === undefined || scope.principals(principal);
}

function conditionError(rule: CompiledRule, activation: Activation): RuleError {
  const trace: ConditionExplanation[] = [];
  if (rule.when) evaluateCondition(rule.when, activation, false, trace);
  return { rule: rule.id, message: firstError(trace) };
}

/**
 * Decides one input. Never throws for a policy made by `compilePolicy`/`allowAllPolicy`;
 * with the CEL engine, a decision that no condition failed on is a shared frozen object
 * (no allocation per call).
 */
export function evaluate(policy: CompiledPolicy, input: PolicyInput): Decision {
  const program = programOf(policy);
  if (program.cedar) return cedarDecide(program.cedar, input);
  const target = input.tool ?? input.prompt ?? input.resource;
  let activation: Activation | undefined;
  let errors: RuleError[] | undefined;
  for (const rule of program.rules) {
    if (!scopeMatches(rule, input.event, target, input.principal)) continue;
    if (rule.when !== undefined) {
      activation ??= activationOf(input);
      const truth = evaluateCondition(rule.when, activation, false);
      if (truth === FALSE) continue;
      if (truth === UNDECIDED) {
        errors ??= [];
        errors.push(conditionError(rule, activation));
        if (rule.effect === 'allow') continue;
      }
    }
    return errors ? { ...rule.decision, errors } : rule.decision;
  }
  return errors ? { ...program.defaultDecision, errors } : program.defaultDecision;
}

/**
 * The rate limits that apply to one input, each with its bucket key. Every matching limit
 * applies (not only the first). A limit's `when` that fails to evaluate applies the limit.
 */
export function matchRateLimits(
  policy: CompiledPolicy,
  input: PolicyInput,
): readonly RateLimitMatch[] {
  const { rateLimits } = programOf(policy);
  if (rateLimits.length === 0) return NO_MATCHES;
  const target = targetOf(input);
  let activation: Activation | undefined;
  let out: RateLimitMatch[] | undefined;
  for (const limit of rateLimits) {
    if (!scopeMatches(limit, input.event, target, input.principal)) continue;
    activation ??= activationOf(input);
    if (limit.when && evaluateCondition(limit.when, activation, false) === FALSE) continue;
    const { id, limit: max, windowMs, failOpen, message } = limit.summary;
    out ??= [];
    out.push({
      id,
      key: keyString(limit.key(activation)),
      limit: max,
      windowMs,
      failOpen,
      ...(message === undefined ? {} : { message }),
    });
  }
  return out ?? NO_MATCHES;
}

function listed(values: readonly string[]): string {
  return `[${values.map((v) => JSON.stringify(v)).join(', ')}]`;
}

function principalLabel(principal: Principal): string {
  return principal.id === undefined ? principal.type : `${principal.type}:${principal.id}`;
}

function explainRule(
  rule: CompiledRule,
  input: PolicyInput,
  target: string | undefined,
  activation: Activation,
  decision: Decision,
): RuleExplanation {
  const { summary } = rule;
  const eventMatched = rule.events(input.event);
  const events: MatchExplanation = {
    matched: eventMatched,
    reason: `event "${input.event}" ${eventMatched ? 'matches' : 'matches none of'} ${listed(summary.events)}`,
  };
  let tools: MatchExplanation;
  if (rule.targets === undefined || summary.tools === undefined) {
    tools = { matched: true, reason: 'no tools filter' };
  } else if (target === undefined) {
    tools = { matched: false, reason: 'the request names no tool, prompt or resource' };
  } else {
    const matched = rule.targets(target);
    tools = {
      matched,
      reason: `"${target}" ${matched ? 'matches' : 'matches none of'} ${listed(summary.tools)}`,
    };
  }
  let principals: MatchExplanation;
  if (rule.principals === undefined || summary.principals === undefined) {
    principals = { matched: true, reason: 'no principals filter' };
  } else {
    const matched = rule.principals(input.principal);
    principals = {
      matched,
      reason: `${principalLabel(input.principal)} ${matched ? 'matches' : 'matches none of'} ${listed(summary.principals)}`,
    };
  }
  let when: WhenExplanation;
  let error: string | undefined;
  if (rule.when === undefined) {
    when = { result: 'none', reason: 'no condition', conditions: [] };
  } else {
    const conditions: ConditionExplanation[] = [];
    const truth = evaluateCondition(rule.when, activation, false, conditions);
    if (truth === UNDECIDED) {
      error = firstError(conditions);
      const consequence =
        rule.effect === 'deny' ? 'so this deny rule applies' : 'so this allow rule does not apply';
      when = {
        result: 'error',
        reason: `failed to evaluate (${error}), ${consequence}`,
        conditions,
      };
    } else {
      const absent = conditions.filter((c) => c.result === 'absent').map((c) => c.detail);
      const note = absent.length > 0 ? ` (${absent.join('; ')})` : '';
      when = {
        result: truth === TRUE ? 'true' : 'false',
        reason: `${truth === TRUE ? 'true' : 'false'}${note}`,
        conditions,
      };
    }
  }
  const whenMatches = when.result === 'true' || when.result === 'none';
  const matched =
    events.matched &&
    tools.matched &&
    principals.matched &&
    (whenMatches || (when.result === 'error' && rule.effect === 'deny'));
  return {
    id: rule.id,
    effect: rule.effect,
    matched,
    decisive: decision.rule === rule.id,
    events,
    tools,
    principals,
    when,
    ...(error === undefined ? {} : { error }),
  };
}

/**
 * Explains a decision for debugging and the admin API: for every rule (also those after the
 * decisive one), whether its events, names, principals and condition matched and why, down
 * to each leaf of the condition; plus the rate limits that apply. The decision is the one
 * `evaluate` returns for the same input.
 */
export function explain(policy: CompiledPolicy, input: PolicyInput): Explanation {
  const program = programOf(policy);
  const target = targetOf(input);
  const rateLimits = matchRateLimits(policy, input);
  const base = {
    engine: policy.engine,
    default: policy.default,
    ...(target === undefined ? {} : { target }),
    rateLimits,
  };
  if (program.cedar) {
    const { decision, rules } = cedarExplain(program.cedar, input);
    return { ...base, decision, rules };
  }
  const decision = evaluate(policy, input);
  const activation = activationOf(input);
  const rules = program.rules.map((rule) => explainRule(rule, input, target, activation, decision));
  return { ...base, decision, rules };
}
