/**
 * A bound on work in flight per key, e.g. audit-mode invocations per interceptor service
 * ({@link RunChainOptions.auditLimit}). Pure bookkeeping: one instance is shared by every
 * chain run of a gateway, so the bound holds across concurrent calls.
 */

/** Counts what is in flight per key and refuses more than {@link InFlightLimit.max}. */
export interface InFlightLimit {
  /** Most in flight per key. */
  readonly max: number;
  /** Take a slot for `key`: true when one was free (then {@link release} it exactly once). */
  tryAcquire(key: string): boolean;
  /** Give back a slot of `key` taken with {@link tryAcquire}. */
  release(key: string): void;
  /** How many slots of `key` are taken. */
  inFlight(key: string): number;
}

/**
 * An {@link InFlightLimit} of `max` per key. Keys with nothing in flight hold no memory.
 * @throws RangeError when `max` is not a positive integer.
 */
export function createInFlightLimit(max: number): InFlightLimit {
  if (!Number.isInteger(max) || max < 1)
    throw new RangeError(`max must be a positive integer, got ${max}`);
  const counts = new Map<string, number>();
  return {
    max,
    tryAcquire(key) {
      const count = counts.get(key) ?? 0;
      if (count >= max) return false;
      counts.set(key, count + 1);
      return true;
    },
    release(key) {
      const count = counts.get(key);
      // A release without its acquire never takes the count below zero.
      if (count === undefined) return;
      if (count <= 1) counts.delete(key);
      else counts.set(key, count - 1);
    },
    inFlight: (key) => counts.get(key) ?? 0,
  };
}
