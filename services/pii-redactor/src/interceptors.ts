/**
 * The interceptors of the pii-redactor service:
 * - `pii-redactor` (mutation): on the way in, applies the configured strategies to
 *   `tools/call` arguments and restores the caller's own tokens; on the way out, applies
 *   them to results (`content[].text`, `structuredContent`, resource contents, prompt
 *   messages), storing tokenized values in the vault under the caller's scope.
 * - `pii-guard` (validation): refuses `tools/call` arguments that carry blocked entity types
 *   (secrets and private keys by default), naming the type and the JSON path, never the value.
 */
import { JsonRpcCode, ProtocolError } from '@fleet/core';
import {
  allow,
  defineMutator,
  defineValidator,
  type HandlerContext,
  type Interceptor,
  modified,
  unchanged,
} from '@fleet/interceptor-kit';
import {
  collectTokens,
  type EntityCounts,
  type PiiEngine,
  PiiLimitError,
  restoreTokensInValue,
  type TokenPair,
} from '@fleet/pii';
import type { VaultScope } from './vault.ts';

/** What the interceptors need from the token vault. */
export interface TokenStore {
  tokenIdFor(type: string, value: string, scope: VaultScope): string;
  store(entries: ReadonlyMap<string, string>, scope: VaultScope): Promise<void>;
  restore(tokens: readonly string[], scope: VaultScope): Promise<Map<string, string>>;
}

/** Dependencies of the PII interceptors. */
export interface PiiInterceptorDeps {
  /** The engine for the config in force (reloads swap it). */
  engine: () => PiiEngine;
  vault: TokenStore;
}

/** The vault scope of an invocation: the principal, and the session when there is one. */
export function scopeOf(ctx: HandlerContext): VaultScope {
  const p = ctx.context.principal;
  const principal = p ? `${p.type}:${p.id ?? ''}` : 'anonymous:';
  return ctx.context.sessionId ? { principal, session: ctx.context.sessionId } : { principal };
}

function toolOf(payload: unknown): string | undefined {
  const name = (payload as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? name : undefined;
}

function nonZero(counts: EntityCounts): Record<string, number> {
  return Object.fromEntries(Object.entries(counts).filter(([, n]) => (n ?? 0) > 0)) as Record<
    string,
    number
  >;
}

/**
 * A payload over the engine's depth or size limits is the caller's input at fault: -32602
 * naming the limit and the JSON path where it was crossed (never the value), not a failure
 * of the interceptor.
 */
function refuseOverLimit<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R {
  const refuse = (error: unknown): never => {
    if (error instanceof PiiLimitError) {
      throw new ProtocolError(JsonRpcCode.INVALID_PARAMS, `Invalid params: ${error.message}`, {
        reason: 'limit_exceeded',
        limit: error.limit,
        max: error.max,
        path: error.path,
      });
    }
    throw error;
  };
  return (...args) => {
    try {
      const result = fn(...args);
      return (result instanceof Promise ? result.catch(refuse) : result) as R;
    } catch (error) {
      return refuse(error);
    }
  };
}

/** Build `pii-redactor` and `pii-guard`. */
export function createPiiInterceptors(deps: PiiInterceptorDeps): Interceptor[] {
  const redactor = defineMutator({
    name: 'pii-redactor',
    version: '0.1.0',
    description:
      "Redacts, masks, hashes or tokenizes PII and secrets; restores a caller's own tokens on the way back to the tool",
    hooks: [
      { events: ['tools/call'], phase: 'request' },
      { events: ['tools/call', 'prompts/get', 'resources/read'], phase: 'response' },
    ],
    priorityHint: { request: -1000, response: 1000 },
    handler: refuseOverLimit(async (payload: unknown, ctx: HandlerContext) => {
      const engine = deps.engine();
      const scope = scopeOf(ctx);
      const pairs: TokenPair[] = [];
      const tokenizer = {
        onToken: (pair: TokenPair) => pairs.push(pair),
        mintId: (type: string, original: string) => deps.vault.tokenIdFor(type, original, scope),
      };
      if (ctx.phase === 'request') {
        const tool = toolOf(payload);
        // New PII the caller typed is transformed first; then the caller's own tokens are
        // restored, so a restored value is never transformed again.
        const transformed = engine.transformMcp('request', ctx.event, payload, {
          tokenizer,
          ...(tool ? { tool } : {}),
        });
        let value = transformed.value;
        let restored = 0;
        let unknown = 0;
        const tokens = collectTokens((value as { arguments?: unknown } | null)?.arguments ?? value);
        if (tokens.length > 0) {
          const found = await deps.vault.restore(tokens, scope);
          const result = restoreTokensInValue(value, (token) => found.get(token));
          value = result.value;
          restored = result.restored;
          unknown = result.unknown;
        }
        if (pairs.length > 0)
          await deps.vault.store(new Map(pairs.map((p) => [p.token, p.original])), scope);
        const info = { counts: nonZero(transformed.counts), restored, unrestorable: unknown };
        return transformed.changed || restored > 0 ? modified(value, info) : unchanged(info);
      }
      const transformed = engine.transformMcp('response', ctx.event, payload, { tokenizer });
      if (pairs.length > 0)
        await deps.vault.store(new Map(pairs.map((p) => [p.token, p.original])), scope);
      const info = { counts: nonZero(transformed.counts) };
      return transformed.changed ? modified(transformed.value, info) : unchanged(info);
    }),
  });

  const guard = defineValidator({
    name: 'pii-guard',
    version: '0.1.0',
    description:
      'Refuses tool arguments that carry blocked entity types (secrets and private keys by default)',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: refuseOverLimit((payload: unknown, ctx: HandlerContext) => {
      const result = deps.engine().guard(ctx.event, payload);
      if (result.allowed) return allow();
      const first = result.violations[0];
      const list = result.violations.map((v) => `${v.type} at ${v.path}`).join(', ');
      return {
        valid: false,
        severity: 'error',
        messages: result.violations.map((v) => ({
          path: v.path,
          severity: 'error' as const,
          message: `${v.type} at ${v.path} is not allowed in tool arguments`,
        })),
        info: {
          blocked: list,
          count: result.violations.length,
          ...(first ? { first: first.type } : {}),
        },
      };
    }),
  });
  return [redactor, guard];
}
