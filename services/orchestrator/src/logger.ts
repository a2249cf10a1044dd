/** The orchestrator logs through the kit's logger (pino, JSON on stderr). */
export { createLogger, type Logger, silentLogger } from '@fleet/interceptor-kit';

/**
 * For logging a failure that can repeat on every request: `due()` is true the first time,
 * then at most once per `intervalMs`; `count` is how many times it was asked in all.
 */
export function logThrottle(
  intervalMs: number,
  now: () => number = () => performance.now(),
): { due(): boolean; readonly count: number } {
  let count = 0;
  let loggedAt = Number.NEGATIVE_INFINITY;
  return {
    due() {
      count++;
      const at = now();
      if (at - loggedAt < intervalMs) return false;
      loggedAt = at;
      return true;
    },
    get count() {
      return count;
    },
  };
}
