/**
 * The interceptors of the pii-redactor service:
 * - `pii-redactor` (mutation): on the way in, applies the configured strategies to
 *   `tools/call` arguments and restores the caller's own tokens; on the way out, applies
 *   them to every string and key of a result but its protocol-structural fields, storing
 *   tokenized values in the vault under the caller's scope (callers without one: nowhere).
 * - `pii-guard` (validation): refuses `tools/call` arguments that carry blocked entity types
 *   (secrets and private keys by default), naming the type and the JSON path, never the value.
 */
import { randomUUID } from 'node:crypto';
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
  findTokens,
  formatToken,
  mintTokenId,
  type PiiEngine,
  PiiLimitError,
  restoreTokensInValue,
  type Tokenizer,
  type TokenPair,
} from '@fleet/pii';
import { VaultFullError, type VaultScope } from './vault.ts';

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

/**
 * The vault scope of an invocation: the principal, and the session when there is one.
 * `undefined` when the caller has neither a principal id nor a session: such callers are
 * indistinguishable from each other, so nothing of theirs is stored or restored.
 */
export function scopeOf(ctx: HandlerContext): VaultScope | undefined {
  const p = ctx.context.principal;
  const session = ctx.context.sessionId;
  if (!p?.id && !session) return undefined;
  const principal = p ? `${p.type}:${p.id ?? ''}` : 'anonymous:';
  return session ? { principal, session } : { principal };
}

/**
 * The scope token ids are minted in: the caller's, or for a caller without one a random scope
 * of this invocation only, so equal values of different anonymous callers get unrelated tokens.
 */
function mintScopeOf(scope: VaultScope | undefined): VaultScope {
  return scope ?? { principal: `unscoped:${randomUUID()}` };
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
 * A payload over the engine's depth or size limits is the caller's input at fault, not a
 * failure of the interceptor: -32602 with `data.name` (the interceptor, as for any invalid
 * params, DESIGN §2), the limit and the JSON path where it was crossed (never the value).
 * So is a payload with more distinct tokenized values than the caller's vault scope may
 * hold (`vaultEntriesPerScope`), or its principal over all its sessions
 * (`vaultEntriesPerPrincipal`); no path. The kit counts it as outcome `rejected`, not `failed`.
 */
function refuseOverLimit<A extends unknown[], R>(
  name: string,
  fn: (...args: A) => R,
): (...args: A) => R {
  const refuse = (error: unknown): never => {
    if (error instanceof PiiLimitError || error instanceof VaultFullError) {
      throw new ProtocolError(JsonRpcCode.INVALID_PARAMS, `Invalid params: ${error.message}`, {
        name,
        reason: 'limit_exceeded',
        limit: error.limit,
        max: error.max,
        ...(error instanceof PiiLimitError ? { path: error.path } : {}),
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

function argumentsOf(params: unknown): unknown {
  return typeof params === 'object' && params !== null && !Array.isArray(params)
    ? (params as { arguments?: unknown }).arguments
    : undefined;
}

function withArguments(params: unknown, args: unknown): unknown {
  return { ...(params as Record<string, unknown>), arguments: args };
}

/** What the request phase did: the params for the backend and what was counted. */
interface RequestOutcome {
  /** The params to forward; the input itself when nothing changed. */
  value: unknown;
  counts: EntityCounts;
  /** Caller-sent tokens replaced by their value. */
  restored: number;
  /** Caller-sent tokens left as they are (unknown, expired, another scope's, or no scope). */
  unrestorable: number;
}

/**
 * The request phase: new PII the caller typed is transformed first; then the tokens the caller
 * sent are restored, so a restored value is never transformed again. Only tokens present in
 * the arguments as sent are restorable, and only where the caller put them: each is swapped
 * for a random placeholder of the same shape (the engine never detects its own token format)
 * before the transform and swapped back after it. A token the transform mints for a value in
 * this same request therefore never looks like a caller's token, even though ids are
 * deterministic per scope: restoring it would hand the raw value to the backend.
 */
async function transformRequest(
  engine: PiiEngine,
  vault: TokenStore,
  payload: unknown,
  scope: VaultScope | undefined,
  tokenizer: Tokenizer,
): Promise<RequestOutcome> {
  const tool = toolOf(payload);
  const limits = engine.config.limits;
  const args = argumentsOf(payload);
  // Walked where they sit in the payload, so an over-limit refusal names the payload's path
  // (`arguments.a...`) and the same depth as the transform and pii-guard would.
  const sent = args === undefined ? [] : collectTokens({ arguments: args }, limits);
  let input = payload;
  const sentBy = new Map<string, string>();
  if (sent.length > 0) {
    const placeholderOf = new Map<string, string>();
    for (const token of sent) {
      const placeholder = formatToken(findTokens(token)[0]?.type ?? 'TOKEN', mintTokenId());
      placeholderOf.set(token, placeholder);
      sentBy.set(placeholder, token);
    }
    input = withArguments(
      payload,
      restoreTokensInValue(args, (t) => placeholderOf.get(t), limits).value,
    );
  }
  const transformed = engine.transformMcp('request', 'tools/call', input, {
    tokenizer,
    ...(tool ? { tool } : {}),
  });
  const outcome: RequestOutcome = {
    value: transformed.value === input ? payload : transformed.value,
    counts: transformed.counts,
    restored: 0,
    unrestorable: 0,
  };
  if (sent.length === 0) return outcome;
  const found = scope ? await vault.restore(sent, scope) : new Map<string, string>();
  const back = restoreTokensInValue(
    argumentsOf(transformed.value),
    (placeholder) => {
      const token = sentBy.get(placeholder);
      if (token === undefined) return undefined; // minted in this request: never restored
      const original = found.get(token);
      if (original !== undefined) outcome.restored++;
      else outcome.unrestorable++;
      return original ?? token;
    },
    limits,
  ).value;
  if (transformed.value !== input || outcome.restored > 0)
    outcome.value = withArguments(transformed.value, back);
  return outcome;
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
    handler: refuseOverLimit('pii-redactor', async (payload: unknown, ctx: HandlerContext) => {
      const engine = deps.engine();
      const scope = scopeOf(ctx);
      const mintScope = mintScopeOf(scope);
      const pairs: TokenPair[] = [];
      const tokenizer = {
        onToken: (pair: TokenPair) => pairs.push(pair),
        mintId: (type: string, original: string) =>
          deps.vault.tokenIdFor(type, original, mintScope),
      };
      const store = async () => {
        // A caller without a scope gets tokens nobody can restore: nothing is stored.
        if (pairs.length > 0 && scope)
          await deps.vault.store(new Map(pairs.map((p) => [p.token, p.original])), scope);
      };
      if (ctx.phase === 'request') {
        const result = await transformRequest(engine, deps.vault, payload, scope, tokenizer);
        await store();
        const { value, counts, restored, unrestorable } = result;
        const info = { counts: nonZero(counts), restored, unrestorable };
        return value !== payload ? modified(value, info) : unchanged(info);
      }
      const transformed = engine.transformMcp('response', ctx.event, payload, { tokenizer });
      await store();
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
    handler: refuseOverLimit('pii-guard', (payload: unknown, ctx: HandlerContext) => {
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
