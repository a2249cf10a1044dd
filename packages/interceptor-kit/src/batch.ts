/**
 * `fleet/interceptor/invokeBatch`, both sides: the service runs each invocation of a batch
 * as if it had come alone and answers in order; the caller matches the answers back. A
 * batch only saves the round trips and wake-ups of invocations nobody waits on (audit
 * mode); it never changes what an interceptor sees or returns.
 */
import {
  FleetError,
  JsonRpcCode,
  MAX_INVOKE_BATCH,
  ProtocolError,
  toProtocolError,
} from '@fleet/core';

/** One answer of a batch: the invocation's result or its JSON-RPC error. */
export type BatchAnswer =
  | { result: unknown }
  | { error: { code: number; message: string; data?: unknown } };

/** Serve a batch: every invocation through `invokeOne`, concurrently, answers in order. */
export async function runInvokeBatch(
  params: unknown,
  invokeOne: (invocation: unknown) => Promise<unknown>,
): Promise<{ results: BatchAnswer[] }> {
  const invocations = (params as { invocations?: unknown } | null | undefined)?.invocations;
  if (!Array.isArray(invocations) || invocations.length === 0) {
    throw new ProtocolError(
      JsonRpcCode.INVALID_PARAMS,
      'Invalid params: "invocations" must be a non-empty array of interceptor/invoke params',
      { path: 'invocations' },
    );
  }
  if (invocations.length > MAX_INVOKE_BATCH) {
    throw new ProtocolError(
      JsonRpcCode.INVALID_PARAMS,
      `Invalid params: "invocations" holds ${invocations.length} items, at most ${MAX_INVOKE_BATCH} are allowed`,
      { path: 'invocations', maxItems: MAX_INVOKE_BATCH },
    );
  }
  const results = await Promise.all(
    invocations.map(async (invocation): Promise<BatchAnswer> => {
      try {
        return { result: await invokeOne(invocation) };
      } catch (error) {
        return { error: toProtocolError(error).toJSON() };
      }
    }),
  );
  return { results };
}

/**
 * The answers of a batch of `count` invocations, in order: each a result or the
 * {@link ProtocolError} it carried. A reply of any other shape is a transport error.
 */
export function parseInvokeBatchResult(
  raw: unknown,
  count: number,
  url: string,
): Array<{ result: unknown } | { error: ProtocolError }> {
  const results = (raw as { results?: unknown } | null | undefined)?.results;
  if (!Array.isArray(results) || results.length !== count) {
    throw new FleetError(
      'TRANSPORT_ERROR',
      `${url} answered a batch of ${count} with no matching results`,
      {
        data: { url },
      },
    );
  }
  return results.map((answer: unknown) => {
    const a = answer as {
      result?: unknown;
      error?: { code?: unknown; message?: unknown; data?: unknown };
    };
    if (a !== null && typeof a === 'object' && 'result' in a) return { result: a.result };
    const error = a?.error;
    return {
      error: new ProtocolError(
        typeof error?.code === 'number' ? error.code : JsonRpcCode.INTERNAL_ERROR,
        typeof error?.message === 'string' ? error.message : 'invalid batch answer',
        error?.data,
      ),
    };
  });
}
