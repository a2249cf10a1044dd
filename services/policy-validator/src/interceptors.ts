/**
 * The interceptors this service exposes: `policy-validator` (validation, request phase, on
 * the policy's events) decides each call and enforces its rate limits; `tool-filter`
 * (mutation, response phase on the list methods) hides what the principal could never use.
 * With `pinning` enabled, `tool-filter` also pins each tool's first definition and hides a tool
 * whose definition drifted, and `policy-validator` refuses calls to it until it is approved. A
 * tool the full pin store cannot pin is unverifiable: `pinning.failOpen` decides (hidden and
 * refused when false, passed when true).
 */

import { matchesEvent } from '@fleet/core';
import {
  allow,
  defineMutator,
  defineValidator,
  deny,
  type Interceptor,
  modified,
  unchanged,
} from '@fleet/interceptor-kit';
import {
  type CompiledPolicy,
  evaluate,
  FILTERABLE_LIST_EVENTS,
  filterListResult,
  matchRateLimits,
  policyInputOf,
} from '@fleet/policy';
import {
  type PinStore,
  type PinVerdict,
  type RecordedDrift,
  type ToolDrift,
  toolDigest,
  type UnpinnedAction,
} from './pinning.ts';
import type { RateLimitDecision } from './rate-limit.ts';

/** Most list answers the Cedar filter cache holds. */
const FILTER_CACHE_MAX_ENTRIES = 512;
/** Most characters of cache keys (the answers' JSON) it holds: ~16 MB with their results. */
const FILTER_CACHE_MAX_CHARS = 8 * 1024 * 1024;
/** A longer answer is filtered every time rather than cached. */
const FILTER_CACHE_MAX_ENTRY_CHARS = FILTER_CACHE_MAX_CHARS / 4;

/** Counts a hit against a rate limit; throws when its store is unreachable. */
export interface RateLimiter {
  hit(ruleId: string, key: string, limit: number, windowMs: number): Promise<RateLimitDecision>;
}

/** What the interceptors need. */
export interface PolicyInterceptorDeps {
  policy: () => CompiledPolicy;
  limiter?: RateLimiter | undefined;
  /** Told when a rate-limit store failure was tolerated (failOpen) or not. */
  onLimiterError?: (ruleId: string, error: unknown, failedOpen: boolean) => void;
  /** Tool pins (used when the policy enables `pinning`; without a store pinning is off). */
  pins?: PinStore | undefined;
  /** Told of each drift a `tools/list` recorded: a new one, or a known one that changed again. */
  onDrift?: (drift: RecordedDrift) => void;
  /**
   * Told of the never-seen tools of a list or call that the full pin store could not pin, and
   * what became of them: `hidden` from the list, the call `refused`, or `passed` (failOpen).
   */
  onUnpinned?: (tools: readonly string[], action: UnpinnedAction) => void;
  /** Told when a pin store failure was tolerated (`pinning.failOpen`) or not. */
  onPinStoreError?: (error: unknown, failedOpen: boolean) => void;
}

/** Why a list or a call is refused when pins cannot be checked and pinning fails closed. */
const PINS_UNAVAILABLE =
  'tool pins cannot be checked (their store is unavailable) and pinning is configured to fail closed';

/** Thrown by `tool-filter` when pins cannot be checked and pinning fails closed. */
export class PinStoreUnavailableError extends Error {
  override readonly name = 'PinStoreUnavailableError';
  readonly code = 'PIN_STORE_UNAVAILABLE';
}

/** The denial of a call to a drifted tool: which tool, since when, and how to approve. */
function driftMessage(drift: ToolDrift): string {
  return (
    `tool "${drift.tool}" changed since it was pinned (a different definition was first seen at ` +
    `${drift.firstSeen}; pinned sha256 ${drift.pinned}, now ${drift.seen}); calls are refused until ` +
    `an operator approves the new definition: POST /policy/pins/${encodeURIComponent(drift.tool)}/approve ` +
    'on the policy-validator'
  );
}

/** The denial of a call to a tool the full store never pinned, when pinning fails closed. */
function storeFullMessage(tool: string, maxTools: number): string {
  return (
    `tool "${tool}" is not pinned and cannot be: the tool pin store is full (${maxTools} tools) ` +
    'and pinning is configured to fail closed; an operator can forget pins no longer needed ' +
    '(`fleet pins forget`) or raise PINNING_MAX_TOOLS on the policy-validator'
  );
}

type NamedTool = Record<string, unknown> & { name: string };

/** A `tools/list` item that can be pinned: an object with a string name. */
function isNamedTool(tool: unknown): tool is NamedTool {
  return (
    tool !== null &&
    typeof tool === 'object' &&
    typeof (tool as { name?: unknown }).name === 'string'
  );
}

/** Whether the policy's own `events` cover `event`. */
function governs(policy: CompiledPolicy, event: string): boolean {
  return policy.events.some((pattern) => matchesEvent(pattern, event));
}

/** Build the two interceptors for the policy currently in force. */
export function createPolicyInterceptors(deps: PolicyInterceptorDeps): Interceptor[] {
  const { pins } = deps;
  const initial = deps.policy();
  const events = [...initial.events];
  // Pinning refuses calls to drifted tools even when the policy does not govern tools/call.
  if (initial.pinning.enabled && !governs(initial, 'tools/call')) events.push('tools/call');
  const validator = defineValidator({
    name: 'policy-validator',
    description:
      'Allows or denies each call under the declarative policy (first matching rule wins), enforces its rate limits and, with pinning, refuses calls to tools whose definition changed',
    version: '0.1.0',
    hooks: [{ events, phase: 'request' }],
    handler: async (payload, ctx) => {
      const policy = deps.policy();
      const input = policyInputOf(ctx.event, ctx.phase, payload, ctx.context);
      if (ctx.event === 'tools/call' && policy.pinning.enabled && !governs(policy, ctx.event)) {
        // Only hooked for pinning (see above): the policy's rules and limits do not apply.
        return (await pinDenial(policy, input.tool)) ?? allow({});
      }
      const decision = evaluate(policy, input);
      if (!decision.allowed) {
        return deny(decision.message ?? `denied by rule "${decision.rule}"`, {
          info: { rule: decision.rule },
        });
      }
      // Before the rate limits, so a refused call is not counted.
      const refused = await pinDenial(policy, input.tool);
      if (refused) return refused;
      for (const limit of matchRateLimits(policy, input)) {
        let verdict: RateLimitDecision | undefined;
        try {
          verdict = await deps.limiter?.hit(limit.id, limit.key, limit.limit, limit.windowMs);
        } catch (error) {
          deps.onLimiterError?.(limit.id, error, limit.failOpen);
          if (limit.failOpen) continue;
          return deny(
            `rate limit "${limit.id}" cannot be checked (its store is unavailable) and is configured to fail closed`,
            {
              info: { rateLimit: limit.id },
            },
          );
        }
        if (verdict && !verdict.allowed) {
          const message =
            limit.message ??
            `rate limit "${limit.id}" exceeded: ${limit.limit} per ${limit.windowMs / 1000}s`;
          return deny(message, {
            info: { rateLimit: limit.id, retryAfterMs: verdict.retryAfterMs },
          });
        }
      }
      return allow({ rule: decision.rule });
    },
  });
  async function pinDenial(policy: CompiledPolicy, tool: string | undefined) {
    if (!policy.pinning.enabled || pins === undefined || tool === undefined) return undefined;
    const { failOpen } = policy.pinning;
    let verdict: PinVerdict;
    try {
      verdict = await pins.verify(tool);
    } catch (error) {
      deps.onPinStoreError?.(error, failOpen);
      if (failOpen) return undefined;
      return deny(PINS_UNAVAILABLE, { info: { pinning: 'unavailable' } });
    }
    switch (verdict.status) {
      case 'ok':
        return undefined;
      case 'drifted':
        return deny(driftMessage(verdict.drift), { info: { pinning: verdict.drift } });
      case 'store-full':
        deps.onUnpinned?.([tool], failOpen ? 'passed' : 'refused');
        if (failOpen) return undefined;
        return deny(storeFullMessage(tool, pins.maxTools), { info: { pinning: 'store_full' } });
    }
  }

  /**
   * The list without its drifted tools (pinning its unseen ones) and, when pinning fails closed,
   * without the tools the full store could not pin; how many of each were dropped.
   */
  async function pinned(policy: CompiledPolicy, event: string, payload: unknown) {
    const none = { payload, drifted: 0, unpinned: 0 };
    if (!policy.pinning.enabled || pins === undefined || event !== 'tools/list') return none;
    const list = (payload as { tools?: unknown } | null)?.tools;
    if (!Array.isArray(list)) return none;
    const { failOpen } = policy.pinning;
    const tools = list.filter(isNamedTool);
    let drifted: ReadonlySet<string>;
    let unpinned: ReadonlySet<string>;
    try {
      const check = await pins.check(tools.map((t) => ({ name: t.name, digest: toolDigest(t) })));
      for (const drift of check.drifted) deps.onDrift?.(drift);
      if (check.unpinned.length > 0)
        deps.onUnpinned?.(check.unpinned, failOpen ? 'passed' : 'hidden');
      drifted = check.hidden;
      unpinned = failOpen ? new Set() : new Set(check.unpinned);
    } catch (error) {
      deps.onPinStoreError?.(error, failOpen);
      if (failOpen) return none;
      throw new PinStoreUnavailableError(PINS_UNAVAILABLE, { cause: error });
    }
    if (drifted.size === 0 && unpinned.size === 0) return none;
    const kept = list.filter(
      (t) => !(isNamedTool(t) && (drifted.has(t.name) || unpinned.has(t.name))),
    );
    return {
      payload: { ...(payload as Record<string, unknown>), tools: kept },
      drifted: tools.filter((t) => drifted.has(t.name)).length,
      unpinned: tools.filter((t) => unpinned.has(t.name)).length,
    };
  }

  // Filtering a list under a Cedar policy costs ~1 ms per item (no pre-parsed partial
  // evaluation); the answer only depends on the policy, the principal and the names.
  const filterCache = new Map<string, ReturnType<typeof filterListResult<unknown>>>();
  let cachedChars = 0;
  const filter = defineMutator({
    name: 'tool-filter',
    description:
      'Removes tools, prompts and resources the principal could never be allowed to use under the policy and, with pinning, tools whose definition changed since it was pinned',
    version: '0.1.0',
    hooks: [{ events: [...FILTERABLE_LIST_EVENTS], phase: 'response' }],
    handler: async (input, ctx) => {
      const principal = ctx.context.principal ?? { type: 'anonymous' as const };
      const policy = deps.policy();
      const { payload, drifted, unpinned } = await pinned(policy, ctx.event, input);
      let filtered: ReturnType<typeof filterListResult<unknown>> | undefined;
      if (policy.engine === 'cedar') {
        const key = `${policy.fingerprint}\u0000${ctx.event}\u0000${JSON.stringify(principal)}\u0000${JSON.stringify(payload)}`;
        filtered = filterCache.get(key);
        if (filtered === undefined) {
          filtered = filterListResult(policy, ctx.event, payload, principal);
          // Bounded in size too: any caller may send lists to filter, each up to the body
          // limit, and an entry keeps about twice its key's length (key and filtered copy).
          if (key.length <= FILTER_CACHE_MAX_ENTRY_CHARS) {
            const full =
              filterCache.size >= FILTER_CACHE_MAX_ENTRIES ||
              cachedChars + key.length > FILTER_CACHE_MAX_CHARS;
            if (full) {
              filterCache.clear();
              cachedChars = 0;
            }
            filterCache.set(key, filtered);
            cachedChars += key.length;
          }
        }
      } else filtered = filterListResult(policy, ctx.event, payload, principal);
      if (drifted > 0 || unpinned > 0) {
        return modified(filtered.result, {
          kept: filtered.kept,
          removed: filtered.removed.length,
          ...(drifted > 0 ? { drifted } : {}),
          ...(unpinned > 0 ? { unpinned } : {}),
        });
      }
      if (filtered.removed.length === 0) return unchanged({ kept: filtered.kept });
      return modified(filtered.result, { kept: filtered.kept, removed: filtered.removed.length });
    },
  });
  return [validator, filter];
}
