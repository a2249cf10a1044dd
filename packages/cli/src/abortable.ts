/**
 * Waiting on work that a signal (Ctrl-C, SIGTERM) may cut short: the waiter stops at once,
 * the work itself is left to finish or to the process's exit.
 */

/**
 * `work`, unless `signal` aborts first (or has already): then a rejection with what
 * `aborted` makes of the abort's reason. Absent `signal`: `work` as it is.
 */
export function unlessAborted<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  aborted: (reason: unknown) => unknown,
): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(aborted(signal.reason));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
