/**
 * The Cedar engine (`engine: cedar`). The policy set is parsed, optionally validated against
 * a schema, and pre-parsed into cedar-wasm's cache once per load; a decision is one
 * `statefulIsAuthorized` call. The input maps to Cedar as:
 *
 * - principal: `User::"<id>"`, `Service::"<id>"` or `Anonymous::"anonymous"` (an absent id
 *   is `""` for users and services);
 * - action: `Action::"<event>"`, e.g. `Action::"tools/call"`;
 * - resource: `Tool::"<name>"`, `Prompt::"<name>"`, `Resource::"<uri>"` (each with a `name`
 *   attribute), or `Server::"mcp"` for events without a target;
 * - context: `{event, phase, arguments, claims}`.
 *
 * Every entity type is prefixed with `cedar.namespace` when one is set.
 */
import { createHash } from 'node:crypto';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { merged, type Principal } from '@fleet/core';
import { defaultDecisionOf, denyMessage } from './internal.ts';
import { invalidIdReason } from './schema.ts';
import type {
  CallQuery,
  CedarPolicySummary,
  Decision,
  Effect,
  PolicyInput,
  RuleError,
  RuleExplanation,
} from './types.ts';

/** A pre-parsed Cedar policy set and what we know about its policies. */
export interface CedarProgram {
  /** The id of the pre-parsed set in cedar-wasm's cache (derived from the content). */
  readonly setId: string;
  readonly namespace: string | undefined;
  readonly policies: readonly CedarPolicySummary[];
  readonly byId: ReadonlyMap<string, CedarPolicySummary>;
  /** The same set by id, for calls that cannot use the cache (partial evaluation). */
  readonly staticPolicies: Readonly<Record<string, string>>;
  readonly defaultEffect: Effect;
  /** Ids of the policies whose conditions may read `context.arguments`. */
  readonly readArguments: ReadonlySet<string>;
  /** Those policies by id: the set list filtering partially evaluates. */
  readonly argumentPolicies: Readonly<Record<string, string>>;
  /** Pre-parsed set of the permits that do not read `context.arguments`, if any. */
  readonly plainPermitsSetId: string | undefined;
}

/** A problem in the Cedar text; `offset` is 0-based in `cedar.policies` when known. */
export interface CedarIssue {
  readonly message: string;
  readonly offset?: number;
  readonly policy?: string;
}

/** What a `cedar:` block compiles from. */
export interface CedarSource {
  readonly policies: string;
  readonly schema?: string | Record<string, unknown>;
  readonly namespace?: string;
}

type CompileResult =
  | { readonly ok: true; readonly program: CedarProgram }
  | { readonly ok: false; readonly issues: readonly CedarIssue[] };

function detailedIssues(errors: readonly cedar.DetailedError[], base = 0, policy?: string) {
  return errors.map((error): CedarIssue => {
    const offset = error.sourceLocations?.[0]?.start;
    const help = error.help ? ` (${error.help})` : '';
    const label = error.sourceLocations?.[0]?.label;
    const message = `${error.message}${label ? `: ${label}` : ''}${help}`;
    return {
      message,
      ...(offset === undefined ? {} : { offset: base + offset }),
      ...(policy === undefined ? {} : { policy }),
    };
  });
}

function isContext(node: unknown): boolean {
  return (node as { Var?: unknown } | null)?.Var === 'context';
}

/**
 * Whether a policy's conditions (Cedar's JSON form) may read `context.arguments`: any
 * access to it, and, conservatively, any use of `context` as a whole.
 */
function readsArguments(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(readsArguments);
  if (node === null || typeof node !== 'object') return false;
  if (isContext(node)) return true;
  const record = node as Record<string, unknown>;
  for (const op of ['.', 'has']) {
    const access = record[op] as { left?: unknown; attr?: unknown } | undefined;
    if (access !== undefined && isContext(access.left)) {
      const attr = Array.isArray(access.attr) ? access.attr[0] : access.attr;
      return attr === 'arguments';
    }
  }
  return Object.values(record).some(readsArguments);
}

/** Parses, validates (with a schema) and pre-parses a Cedar policy set. */
export function compileCedar(source: CedarSource, defaultEffect: Effect): CompileResult {
  const text = source.policies;
  const parts = cedar.policySetTextToParts(text);
  if (parts.type === 'failure') return { ok: false, issues: detailedIssues(parts.errors) };
  if (parts.policy_templates.length > 0) {
    return { ok: false, issues: [{ message: 'policy templates are not supported' }] };
  }
  // Cedar names the policies of a text policy0, policy1... in text order and returns the
  // parts sorted by that id as a string (policy0, policy1, policy10, policy2...).
  const count = parts.policies.length;
  const textOrder = Array.from({ length: count }, (_, i) => `policy${i}`);
  const sorted = [...textOrder].sort();
  const inTextOrder: string[] = new Array(count);
  sorted.forEach((cedarId, i) => {
    inTextOrder[Number(cedarId.slice('policy'.length))] = parts.policies[i] as string;
  });

  const issues: CedarIssue[] = [];
  const policies: CedarPolicySummary[] = [];
  const staticPolicies: Record<string, string> = {};
  const offsets = new Map<string, number>();
  const readArguments = new Set<string>();
  let searchFrom = 0;
  inTextOrder.forEach((policyText, index) => {
    const at = text.indexOf(policyText, searchFrom);
    if (at !== -1) searchFrom = at + policyText.length;
    const json = cedar.policyToJson(policyText);
    if (json.type === 'failure') {
      issues.push(...detailedIssues(json.errors, Math.max(at, 0)));
      return;
    }
    const annotations = json.json.annotations ?? {};
    const id = annotations.id ?? `policy${index}`;
    const base = at === -1 ? {} : { offset: at };
    const invalid = invalidIdReason(id);
    if (invalid !== undefined) {
      issues.push({ message: `@id(${JSON.stringify(id)}) ${invalid}`, ...base });
      return;
    }
    if (staticPolicies[id] !== undefined) {
      issues.push({ message: `duplicate policy id "${id}"`, policy: id, ...base });
      return;
    }
    staticPolicies[id] = policyText;
    if (readsArguments(json.json.conditions)) readArguments.add(id);
    offsets.set(id, Math.max(at, 0));
    const message = annotations.message;
    policies.push(
      Object.freeze({
        id,
        effect: json.json.effect === 'permit' ? 'allow' : 'deny',
        ...(message === undefined ? {} : { message }),
      }),
    );
  });
  if (issues.length > 0) return { ok: false, issues };

  if (source.schema !== undefined) {
    const schema = source.schema as cedar.Schema;
    const validated = cedar.validate({
      schema,
      policies: { staticPolicies },
      validationSettings: { mode: 'strict' },
    });
    if (validated.type === 'failure')
      return { ok: false, issues: detailedIssues(validated.errors) };
    for (const { policyId, error } of validated.validationErrors) {
      issues.push(...detailedIssues([error], offsets.get(policyId) ?? 0, policyId));
    }
    if (issues.length > 0) return { ok: false, issues };
  }

  const hash = createHash('sha256').update(JSON.stringify(staticPolicies)).digest('hex');
  const setId = `fleet-policy-${hash.slice(0, 24)}`;
  const preparsed = cedar.preparsePolicySet(setId, { staticPolicies });
  if (preparsed.type === 'failure') return { ok: false, issues: detailedIssues(preparsed.errors) };
  const argumentPolicies: Record<string, string> = {};
  const plainPermits: Record<string, string> = {};
  for (const policy of policies) {
    const policyText = staticPolicies[policy.id] as string;
    if (readArguments.has(policy.id)) argumentPolicies[policy.id] = policyText;
    else if (policy.effect === 'allow') plainPermits[policy.id] = policyText;
  }
  let plainPermitsSetId: string | undefined;
  if (Object.keys(plainPermits).length > 0) {
    plainPermitsSetId = `${setId}-plain-permits`;
    const plain = cedar.preparsePolicySet(plainPermitsSetId, { staticPolicies: plainPermits });
    if (plain.type === 'failure') return { ok: false, issues: detailedIssues(plain.errors) };
  }
  return {
    ok: true,
    program: {
      setId,
      namespace: source.namespace,
      policies: Object.freeze(policies),
      byId: new Map(policies.map((p) => [p.id, p])),
      readArguments,
      argumentPolicies: Object.freeze(argumentPolicies),
      plainPermitsSetId,
      staticPolicies: Object.freeze(staticPolicies),
      defaultEffect,
    },
  };
}

const PRINCIPAL_TYPE = { user: 'User', service: 'Service', anonymous: 'Anonymous' } as const;
const ESCAPE_KEYS: ReadonlySet<string> = new Set(['__entity', '__extn', '__expr']);
const MAX_DEPTH = 32;

/**
 * Converts a JSON value to a Cedar value. Integers are Longs; other numbers are `decimal`s
 * when they have at most four fractional digits, else strings; null is dropped (Cedar has
 * none); keys that Cedar's JSON format reserves (`__entity`, `__extn`, `__expr`) are dropped
 * so that arguments cannot forge entity references.
 */
function toCedarValue(value: unknown, depth: number): cedar.CedarValueJson | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (Number.isSafeInteger(value)) return value;
      if (!Number.isFinite(value)) return undefined;
      if (/^-?\d{1,14}\.\d{1,4}$/.test(String(value))) {
        return { __extn: { fn: 'decimal', arg: String(value) } };
      }
      return String(value);
    case 'bigint':
      return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
        ? Number(value)
        : value.toString();
    case 'object': {
      if (value === null || depth >= MAX_DEPTH) return undefined;
      if (Array.isArray(value)) {
        const set: cedar.CedarValueJson[] = [];
        for (const item of value) {
          const converted = toCedarValue(item, depth + 1);
          if (converted !== undefined) set.push(converted);
        }
        return set;
      }
      return toCedarRecord(value as Record<string, unknown>, depth + 1);
    }
    default:
      return undefined;
  }
}

function toCedarRecord(
  record: Record<string, unknown> | undefined,
  depth = 0,
): Record<string, cedar.CedarValueJson> {
  const out: Record<string, cedar.CedarValueJson> = {};
  if (record === undefined) return out;
  for (const key of Object.keys(record)) {
    if (ESCAPE_KEYS.has(key)) continue;
    const converted = toCedarValue(record[key], depth);
    if (converted !== undefined) out[key] = converted;
  }
  return out;
}

interface CedarRequest {
  principal: cedar.EntityUid;
  action: cedar.EntityUid;
  resource: cedar.EntityUid;
  context: cedar.Context;
  entities: cedar.Entities;
}

function typeName(program: CedarProgram, base: string): string {
  return program.namespace ? `${program.namespace}::${base}` : base;
}

function principalUid(program: CedarProgram, principal: Principal): cedar.TypeAndId {
  const id = principal.id ?? (principal.type === 'anonymous' ? 'anonymous' : '');
  return { type: typeName(program, PRINCIPAL_TYPE[principal.type]), id };
}

function resourceOf(input: {
  tool?: string | undefined;
  prompt?: string | undefined;
  resource?: string | undefined;
}): [string, string] {
  if (input.tool !== undefined) return ['Tool', input.tool];
  if (input.prompt !== undefined) return ['Prompt', input.prompt];
  if (input.resource !== undefined) return ['Resource', input.resource];
  return ['Server', 'mcp'];
}

function requestOf(
  program: CedarProgram,
  input: PolicyInput | CallQuery,
  args: cedar.CedarValueJson,
  phase: string,
): CedarRequest {
  const principal = principalUid(program, input.principal);
  const [kind, name] = resourceOf(input);
  const resource = { type: typeName(program, kind), id: name };
  return {
    principal,
    action: { type: typeName(program, 'Action'), id: input.event },
    resource,
    context: {
      event: input.event,
      phase,
      arguments: args,
      claims: toCedarRecord(input.principal.claims),
    },
    entities: [
      { uid: principal, attrs: {}, parents: [] },
      { uid: resource, attrs: { name }, parents: [] },
    ],
  };
}

function failedDecision(errors: readonly cedar.DetailedError[]): Decision {
  const message = errors.map((e) => e.message).join('; ') || 'authorization failed';
  return {
    allowed: false,
    rule: 'default',
    message: denyMessage('default', 'the policy engine failed'),
    errors: [{ rule: 'default', message }],
  };
}

function decide(program: CedarProgram, response: cedar.Response): Decision {
  const reasons = response.diagnostics.reason;
  const errors: RuleError[] = response.diagnostics.errors.map((e) => ({
    rule: e.policyId,
    message: e.error.message,
  }));
  const withErrors = errors.length > 0 ? { errors } : {};
  const first = reasons[0];
  if (first !== undefined) {
    if (response.decision === 'allow')
      return { allowed: true, rule: first, reasons, ...withErrors };
    const message = program.byId.get(first)?.message;
    return {
      allowed: false,
      rule: first,
      message: denyMessage(first, message),
      reasons,
      ...withErrors,
    };
  }
  // Nothing determined the decision: the policy default applies, except that a forbid that
  // failed to evaluate never lets the default allow.
  const forbidFailed = errors.some((e) => program.byId.get(e.rule)?.effect === 'deny');
  const effect = forbidFailed ? 'deny' : program.defaultEffect;
  const base = defaultDecisionOf(effect);
  return errors.length > 0 ? { ...base, errors } : base;
}

/** Decides one input with the pre-parsed policy set. */
export function cedarDecide(program: CedarProgram, input: PolicyInput): Decision {
  const request = requestOf(program, input, toCedarRecord(input.arguments), input.phase);
  const answer = cedar.statefulIsAuthorized({
    ...request,
    preparsedPolicySetId: program.setId,
  });
  if (answer.type === 'failure') return failedDecision(answer.errors);
  return decide(program, answer.response);
}

/**
 * Explains a Cedar decision: which policies were satisfied, which failed and which
 * determined the decision (a partial evaluation with nothing unknown lists all satisfied
 * policies, not only the determining ones).
 */
export function cedarExplain(
  program: CedarProgram,
  input: PolicyInput,
): { decision: Decision; rules: RuleExplanation[] } {
  const decision = cedarDecide(program, input);
  const request = requestOf(program, input, toCedarRecord(input.arguments), input.phase);
  const answer = cedar.isAuthorizedPartial({
    ...request,
    policies: { staticPolicies: program.staticPolicies },
  });
  const satisfied = new Set(answer.type === 'residuals' ? answer.response.satisfied : []);
  const errored = new Map((decision.errors ?? []).map((e) => [e.rule, e.message]));
  const decisive = new Set(decision.reasons ?? []);
  const rules = program.policies.map((policy): RuleExplanation => {
    const error = errored.get(policy.id);
    const matched = satisfied.has(policy.id);
    const reason =
      error !== undefined
        ? `failed to evaluate: ${error}`
        : matched
          ? 'satisfied'
          : 'not satisfied (scope or condition did not match)';
    return {
      id: policy.id,
      effect: policy.effect,
      matched,
      decisive: decisive.has(policy.id),
      reason,
      ...(error === undefined ? {} : { error }),
    };
  });
  return { decision, rules };
}

const UNKNOWN_ARGUMENTS: cedar.CedarValueJson = { __extn: { fn: 'unknown', arg: 'arguments' } };
const NO_ARGUMENTS: Record<string, cedar.CedarValueJson> = {};
const SATISFIED_PERMIT = 'permit(principal, action, resource);';

/**
 * Whether a call could be allowed for some arguments.
 *
 * 1. One pre-parsed decision with empty arguments answers most cases exactly: allowed means
 *    yes; denied by a satisfied forbid that does not read `context.arguments`, or with no
 *    permit that could read them, means no.
 * 2. Otherwise Cedar's partial evaluation with `context.arguments` unknown decides, over the
 *    policies that read the arguments only (the others cannot change with them; a satisfied
 *    plain permit stands in as one unconditional permit). Partial evaluation re-parses what
 *    it is given, so keeping that set small keeps filtering fast.
 *
 * An engine failure keeps the item (conservative).
 */
export function cedarCouldEverAllow(program: CedarProgram, query: CallQuery): boolean {
  const probe = requestOf(program, query, NO_ARGUMENTS, 'request');
  const answer = cedar.statefulIsAuthorized(merged(probe, { preparsedPolicySetId: program.setId }));
  if (answer.type === 'failure') return true;
  const decision = decide(program, answer.response);
  if (decision.allowed) return true;
  if (decision.errors !== undefined) return true;
  const reasons = decision.reasons ?? [];
  if (reasons.some((id) => !program.readArguments.has(id))) return false;
  if (reasons.length === 0 && !program.policies.some((p) => isArgumentPermit(program, p))) {
    return false;
  }
  return partiallyAllowed(program, query, probe);
}

function isArgumentPermit(program: CedarProgram, policy: CedarPolicySummary): boolean {
  return policy.effect === 'allow' && program.readArguments.has(policy.id);
}

function partiallyAllowed(program: CedarProgram, query: CallQuery, probe: CedarRequest): boolean {
  let plainPermitSatisfied = false;
  if (program.plainPermitsSetId !== undefined) {
    const plain = cedar.statefulIsAuthorized({
      ...probe,
      preparsedPolicySetId: program.plainPermitsSetId,
    });
    if (plain.type === 'failure') return true;
    plainPermitSatisfied = plain.response.decision === 'allow';
  }
  // Ids from the document cannot start with "(", so this one cannot collide.
  const staticPolicies = plainPermitSatisfied
    ? { ...program.argumentPolicies, '(plain permits)': SATISFIED_PERMIT }
    : program.argumentPolicies;
  const request = requestOf(program, query, UNKNOWN_ARGUMENTS, 'request');
  const answer = cedar.isAuthorizedPartial({ ...request, policies: { staticPolicies } });
  if (answer.type === 'failure') return true;
  const { decision, satisfied } = answer.response;
  if (decision !== 'deny') return true;
  // Denied for sure: by a satisfied forbid, or because no permit can apply (then the
  // default decides, and a residual forbid might still deny: keep it as a "maybe").
  if (satisfied.some((id) => program.byId.get(id)?.effect === 'deny')) return false;
  return program.defaultEffect === 'allow';
}
