/**
 * How an aborted chain reaches the client: a JSON-RPC error (DESIGN.md §2), or for
 * `tools/call` optionally a `CallToolResult` with `isError: true` so a model sees the denial.
 */
import type { ChainResult } from './chain.ts';
import { JsonRpcCode, ProtocolError } from './errors.ts';

/** One blocking validator as reported to the client. */
export interface ValidationErrorEntry {
  interceptor: string;
  reason: string;
  type: 'validation' | 'invocation';
  phase: 'request' | 'response';
}

/**
 * The JSON-RPC error for an aborted chain, or undefined when it succeeded.
 * - explicit validation denial → -32602 `{validationErrors: [...]}` (every blocking
 *   validator; DESIGN.md §2): a policy decision, told apart from malformed params by its
 *   `validationErrors` (see `isDenial`)
 * - invocation failure without failOpen → -32603 `{failedInterceptor, reason, phase}`
 * - chain budget exhausted → -32603 `{reason: "timeout", phase, timeoutMs}`
 */
export function chainAbortToError(result: ChainResult): ProtocolError | undefined {
  const { status, phase, abortedAt } = result;
  if (status === 'success') return undefined;
  if (status === 'timeout') {
    return new ProtocolError(
      JsonRpcCode.INTERNAL_ERROR,
      `Interceptor chain timed out in the ${phase} phase`,
      {
        reason: 'timeout',
        phase,
        timeoutMs: result.timeoutMs,
        ...(abortedAt[0] ? { interceptor: abortedAt[0].interceptor } : {}),
      },
    );
  }
  const denials = abortedAt.filter((a) => a.type === 'validation');
  if (denials.length > 0) {
    const validationErrors: ValidationErrorEntry[] = abortedAt
      .filter((a) => a.type === 'validation' || a.type === 'invocation')
      .map((a) => ({
        interceptor: a.interceptor,
        reason: a.reason,
        type: a.type as ValidationErrorEntry['type'],
        phase: a.phase,
      }));
    const first = denials[0];
    const message =
      validationErrors.length === 1 && first
        ? `Blocked by interceptor "${first.interceptor}": ${first.reason}`
        : `Blocked by ${validationErrors.length} interceptors: ${validationErrors.map((v) => v.interceptor).join(', ')}`;
    return new ProtocolError(JsonRpcCode.INVALID_PARAMS, message, { validationErrors });
  }
  const failed = abortedAt[0];
  const failedInterceptor = failed?.interceptor ?? 'unknown';
  const reason = failed?.reason ?? 'failed';
  return new ProtocolError(
    JsonRpcCode.INTERNAL_ERROR,
    `Interceptor "${failedInterceptor}" failed in the ${phase} phase: ${reason}`,
    { failedInterceptor, reason, phase },
  );
}

/** A `CallToolResult` that reports an aborted `tools/call` to the model. */
export interface DenialToolResult {
  [key: string]: unknown;
  content: Array<{ type: 'text'; text: string }>;
  isError: true;
  structuredContent?: Record<string, unknown>;
}

/**
 * The `CallToolResult` form of an aborted chain (`chain.denyAs: toolResult`), or undefined
 * when it succeeded. The error's code and data ride along in `_meta` so tools can still
 * branch on them.
 */
export function chainAbortToToolResult(result: ChainResult): DenialToolResult | undefined {
  const error = chainAbortToError(result);
  if (error === undefined) return undefined;
  return {
    content: [{ type: 'text', text: error.message }],
    isError: true,
    _meta: { 'fleet/denial': error.toJSON() },
  };
}
