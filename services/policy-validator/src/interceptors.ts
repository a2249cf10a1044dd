/**
 * The interceptors this service exposes: `policy-validator` (validation, request phase, on
 * the policy's events) decides each call and enforces its rate limits; `tool-filter`
 * (mutation, response phase on the list methods) hides what the principal could never use.
 */
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
}

/** Build the two interceptors for the policy currently in force. */
export function createPolicyInterceptors(deps: PolicyInterceptorDeps): Interceptor[] {
  const events = [...deps.policy().events];
  const validator = defineValidator({
    name: 'policy-validator',
    description:
      'Allows or denies each call under the declarative policy (first matching rule wins) and enforces its rate limits',
    version: '0.1.0',
    hooks: [{ events, phase: 'request' }],
    handler: async (payload, ctx) => {
      const policy = deps.policy();
      const input = policyInputOf(ctx.event, ctx.phase, payload, ctx.context);
      const decision = evaluate(policy, input);
      if (!decision.allowed) {
        return deny(decision.message ?? `denied by rule "${decision.rule}"`, {
          info: { rule: decision.rule },
        });
      }
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
  // Filtering a list under a Cedar policy costs ~1 ms per item (no pre-parsed partial
  // evaluation); the answer only depends on the policy, the principal and the names.
  const filterCache = new Map<string, ReturnType<typeof filterListResult<unknown>>>();
  let cachedChars = 0;
  const filter = defineMutator({
    name: 'tool-filter',
    description:
      'Removes tools, prompts and resources the principal could never be allowed to use under the policy',
    version: '0.1.0',
    hooks: [{ events: [...FILTERABLE_LIST_EVENTS], phase: 'response' }],
    handler: (payload, ctx) => {
      const principal = ctx.context.principal ?? { type: 'anonymous' as const };
      const policy = deps.policy();
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
      if (filtered.removed.length === 0) return unchanged({ kept: filtered.kept });
      return modified(filtered.result, { kept: filtered.kept, removed: filtered.removed.length });
    },
  });
  return [validator, filter];
}
