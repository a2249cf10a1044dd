/**
 * Starts audit-mode interceptor invocations in batches. They never hold up a call, but each
 * one still wakes its interceptor service; started together, a batch is read by the
 * service in one wake-up instead of one per call, which matters more than anything else
 * on a loaded machine with few cores. Each start carries its own trace context (the chain
 * hands each invocation its stage's), so its span still belongs to the call's trace.
 */

/** Batches deferred starts; `delayMs` 0 starts each at once. */
export class AuditBatcher {
  readonly #delayMs: number;
  #queue: Array<() => void> = [];
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(delayMs: number) {
    this.#delayMs = delayMs;
  }

  /** Schedule `start` (the chain's `deferAudit` hook). */
  readonly defer = (start: () => void): void => {
    if (this.#delayMs <= 0) {
      start();
      return;
    }
    this.#queue.push(start);
    this.#timer ??= setTimeout(() => this.flush(), this.#delayMs);
  };

  /** Start everything deferred so far (also called on shutdown: nothing is dropped). */
  flush(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#queue;
    this.#queue = [];
    for (const start of batch) {
      try {
        start();
      } catch {
        // One failed start must not stop the rest; the chain records audit failures itself.
      }
    }
  }
}
