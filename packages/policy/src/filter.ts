/**
 * List filtering for the `tool-filter` mutator: remove the tools, prompts and resources a
 * principal could never be allowed to use, so clients do not see them. At list time the
 * call's arguments are unknown, so the question is "could any arguments be allowed?":
 *
 * - CEL: rules are walked in order with every condition leaf that reads `arguments` unknown.
 *   A rule whose scope matches and whose condition is true decides (allow keeps, deny
 *   drops); an unknown allow keeps (it might allow); an unknown deny is passed over (it
 *   might not apply) and the walk goes on; at the end the default decides.
 * - Cedar: partial evaluation with `context.arguments` unknown; dropped only when denied
 *   whatever the arguments.
 *
 * An item is dropped only when it is denied for sure; everything else is kept.
 */
import type { Principal } from '@fleet/core';
import { cedarCouldEverAllow } from './cedar.ts';
import { type Activation, evaluateCondition, FALSE, UNDECIDED } from './cel.ts';
import { scopeMatches, targetOf } from './evaluate.ts';
import { programOf } from './internal.ts';
import type { CallQuery, CompiledPolicy, ListFilterResult } from './types.ts';

const NO_ARGUMENTS: Record<string, unknown> = Object.freeze({});

/**
 * Whether `query.principal` could be allowed to make the call under the policy for some
 * arguments. `false` only when a deny rule matches for sure before any allow rule could, or
 * when the default denies and no allow rule could match.
 */
export function couldEverAllow(policy: CompiledPolicy, query: CallQuery): boolean {
  const program = programOf(policy);
  if (program.cedar) return cedarCouldEverAllow(program.cedar, query);
  const target = targetOf(query);
  let activation: Activation | undefined;
  for (const rule of program.rules) {
    if (!scopeMatches(rule, query.event, target, query.principal)) continue;
    if (rule.when !== undefined) {
      activation ??= {
        event: query.event,
        phase: 'request',
        tool: query.tool,
        prompt: query.prompt,
        resource: query.resource,
        arguments: NO_ARGUMENTS,
        principal: query.principal,
      };
      const truth = evaluateCondition(rule.when, activation, true);
      if (truth === FALSE) continue;
      if (truth === UNDECIDED) {
        if (rule.effect === 'allow') return true;
        continue;
      }
    }
    return rule.effect === 'allow';
  }
  return program.defaultDecision.allowed;
}

/** How one list event maps to the call its items are for. */
interface ListKind {
  readonly items: string;
  readonly call: string;
  readonly field: 'name' | 'uri';
  readonly as: 'tool' | 'prompt' | 'resource';
}

const LIST_KINDS: Readonly<Record<string, ListKind>> = Object.freeze({
  'tools/list': { items: 'tools', call: 'tools/call', field: 'name', as: 'tool' },
  'prompts/list': { items: 'prompts', call: 'prompts/get', field: 'name', as: 'prompt' },
  'resources/list': { items: 'resources', call: 'resources/read', field: 'uri', as: 'resource' },
});

function queryOf(kind: ListKind, name: string, principal: Principal): CallQuery {
  if (kind.as === 'tool') return { event: kind.call, tool: name, principal };
  if (kind.as === 'prompt') return { event: kind.call, prompt: name, principal };
  return { event: kind.call, resource: name, principal };
}

/** The list events `filterListResult` filters. */
export const FILTERABLE_LIST_EVENTS: readonly string[] = Object.freeze(Object.keys(LIST_KINDS));

/**
 * Filters a `tools/list`, `prompts/list` or `resources/list` result for a principal. The
 * result is not modified: a shallow copy with a shorter item array is returned when items
 * are removed (the input itself otherwise), keeping every other field (`nextCursor`...).
 * Items without a string name (or URI), other events and results without the item array
 * are left alone.
 */
export function filterListResult<T>(
  policy: CompiledPolicy,
  listEvent: string,
  result: T,
  principal: Principal,
): ListFilterResult<T> {
  const kind = LIST_KINDS[listEvent];
  const items =
    kind && result !== null && typeof result === 'object'
      ? (result as Record<string, unknown>)[kind.items]
      : undefined;
  if (!kind || !Array.isArray(items)) return { result, total: 0, kept: 0, removed: [] };
  const kept: unknown[] = [];
  const removed: string[] = [];
  for (const item of items as unknown[]) {
    const name =
      item !== null && typeof item === 'object'
        ? (item as Record<string, unknown>)[kind.field]
        : undefined;
    if (typeof name !== 'string' || couldEverAllow(policy, queryOf(kind, name, principal))) {
      kept.push(item);
    } else {
      removed.push(name);
    }
  }
  const out = removed.length === 0 ? result : ({ ...result, [kind.items]: kept } as T);
  return { result: out, total: items.length, kept: kept.length, removed };
}

/** {@link filterListResult} for a `tools/list` result. */
export function filterToolsList<T extends { tools: readonly { name: string }[] }>(
  policy: CompiledPolicy,
  result: T,
  principal: Principal,
): ListFilterResult<T> {
  return filterListResult(policy, 'tools/list', result, principal);
}

/** {@link filterListResult} for a `prompts/list` result. */
export function filterPromptsList<T extends { prompts: readonly { name: string }[] }>(
  policy: CompiledPolicy,
  result: T,
  principal: Principal,
): ListFilterResult<T> {
  return filterListResult(policy, 'prompts/list', result, principal);
}

/** {@link filterListResult} for a `resources/list` result. */
export function filterResourcesList<T extends { resources: readonly { uri: string }[] }>(
  policy: CompiledPolicy,
  result: T,
  principal: Principal,
): ListFilterResult<T> {
  return filterListResult(policy, 'resources/list', result, principal);
}
