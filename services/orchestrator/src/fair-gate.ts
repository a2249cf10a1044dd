/**
 * Fair queueing of a backend's slots: at most `maxRunning` calls run at once; the others
 * wait per fairness key (who made them) and a freed slot goes to the keys in turn, so one
 * principal's backlog cannot make everyone else wait behind it. Pure: no I/O, no timers.
 */
import type { Principal } from '@fleet/core';
import { BulkheadRejectedError, TaskCancelledError } from 'cockatiel';

/** The fairness key of the calls the gateway makes for itself (schema cache, reconnects). */
export const GATEWAY_FAIRNESS_KEY = 'gateway';

/**
 * Whose turn a client's backend call waits for: its principal when that has an id (all its
 * sessions and stateless requests together), else its session, else (anonymous stateless
 * requests, a stdio client) one key shared by all of them. The kinds are spelt apart, so a
 * principal's id never names a session or the gateway's own key.
 */
export function fairnessKeyOf(principal: Principal, sessionId: string | undefined): string {
  if (principal.id !== undefined) return `principal ${principal.type}:${principal.id}`;
  return sessionId === undefined ? 'anonymous' : `session ${sessionId}`;
}

/**
 * A fairness key as a log may show it: a principal's id passed through `scrub` (an id may be
 * an e-mail address), a session's id left out (whoever holds it can use the session); the
 * other keys as they are. The inverse of {@link fairnessKeyOf}'s spelling: a principal's type
 * (`user`, `service`) holds no colon, so the first one ends it.
 */
export function shownFairnessKey(key: string, scrub: (id: string) => string): string {
  if (key.startsWith('principal ')) {
    const colon = key.indexOf(':');
    return `${key.slice(0, colon + 1)}${scrub(key.slice(colon + 1))}`;
  }
  return key.startsWith('session ') ? 'session' : key;
}

/** Options for {@link FairGate}. */
export interface FairGateOptions {
  /** Most calls running at once. */
  maxRunning: number;
  /** Most calls waiting, over every key. */
  maxQueued: number;
}

/** A call waiting for a slot. */
interface Waiter {
  readonly key: string;
  /** Arrival order over every key: the largest is the newest. */
  readonly seq: number;
  /** Give it the slot just freed (the running count already holds it). */
  start(): void;
  /** Refuse it: it leaves without running. */
  refuse(error: Error): void;
}

/**
 * A bulkhead that queues per key. When every slot runs, a call waits in its key's FIFO
 * queue, and each freed slot goes to the next key in turn (round robin over the keys with
 * calls waiting). With `maxQueued` calls waiting, a newcomer whose key holds fewer of them
 * than the key holding the most takes the place of that key's newest waiting call (ties:
 * the newest of those), which is refused; otherwise the newcomer is refused. Refusals reject
 * with cockatiel's `BulkheadRejectedError`; a waiting call whose signal aborts leaves the
 * queue at once and rejects with `TaskCancelledError`, as cockatiel's bulkhead does for a
 * call cancelled before it starts.
 */
export class FairGate {
  readonly #maxRunning: number;
  readonly #maxQueued: number;
  #running = 0;
  #queued = 0;
  #seq = 0;
  /** Waiting calls per key, keys in turn order: the first is served next. None is empty. */
  readonly #queues = new Map<string, Waiter[]>();

  constructor({ maxRunning, maxQueued }: FairGateOptions) {
    this.#maxRunning = maxRunning;
    this.#maxQueued = maxQueued;
  }

  /** Calls running now. */
  get running(): number {
    return this.#running;
  }

  /** Calls waiting now, over every key. */
  get queued(): number {
    return this.#queued;
  }

  /** Calls of `key` waiting now. */
  queuedFor(key: string): number {
    return this.#queues.get(key)?.length ?? 0;
  }

  /**
   * Run `fn` in a slot as `key`: at once when one is free, else in `key`'s turn.
   * @throws {BulkheadRejectedError} when refused (no room, or its place given to another key).
   * @throws {TaskCancelledError} when `signal` aborts before it starts.
   */
  execute<T>(key: string, fn: () => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(new TaskCancelledError());
    if (this.#running < this.#maxRunning) {
      this.#running++;
      return this.#run(fn);
    }
    if (this.#queued >= this.#maxQueued && !this.#makeRoomFor(key))
      return Promise.reject(this.#rejection());
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        if (this.#remove(waiter)) reject(new TaskCancelledError());
      };
      const waiter: Waiter = {
        key,
        seq: this.#seq++,
        start: () => {
          signal?.removeEventListener('abort', onAbort);
          // A microtask, not this stack: a chain of calls that fail at once must not recurse.
          queueMicrotask(() => this.#run(fn).then(resolve, reject));
        },
        refuse: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const queue = this.#queues.get(key);
      if (queue === undefined) this.#queues.set(key, [waiter]);
      else queue.push(waiter);
      this.#queued++;
    });
  }

  async #run<T>(fn: () => PromiseLike<T> | T): Promise<T> {
    try {
      return await fn();
    } finally {
      // The slot passes straight to the next call in turn, or is freed.
      const next = this.#next();
      if (next === undefined) this.#running--;
      else next.start();
    }
  }

  /** Take the first waiting call of the key whose turn it is; the key goes to the back. */
  #next(): Waiter | undefined {
    const first = this.#queues.entries().next();
    if (first.done) return undefined;
    const [key, queue] = first.value;
    const waiter = queue.shift() as Waiter;
    this.#queues.delete(key);
    if (queue.length > 0) this.#queues.set(key, queue);
    this.#queued--;
    return waiter;
  }

  /**
   * The queue is full and `key` wants in: refuse the newest call of the key holding the most
   * when `key` holds fewer. True when a place was freed.
   */
  #makeRoomFor(key: string): boolean {
    const own = this.queuedFor(key);
    let longest: Waiter[] | undefined;
    for (const queue of this.#queues.values()) {
      if (
        longest === undefined ||
        queue.length > longest.length ||
        (queue.length === longest.length && newest(queue).seq > newest(longest).seq)
      )
        longest = queue;
    }
    if (longest === undefined || longest.length <= own) return false;
    const evicted = longest.pop() as Waiter;
    if (longest.length === 0) this.#queues.delete(evicted.key);
    this.#queued--;
    evicted.refuse(this.#rejection());
    return true;
  }

  /** Take `waiter` out of its queue; false when it is not waiting any more. */
  #remove(waiter: Waiter): boolean {
    const queue = this.#queues.get(waiter.key);
    const i = queue?.indexOf(waiter) ?? -1;
    if (queue === undefined || i < 0) return false;
    queue.splice(i, 1);
    if (queue.length === 0) this.#queues.delete(waiter.key);
    this.#queued--;
    return true;
  }

  #rejection(): BulkheadRejectedError {
    return new BulkheadRejectedError(this.#maxRunning, this.#maxQueued);
  }
}

function newest(queue: readonly Waiter[]): Waiter {
  return queue[queue.length - 1] as Waiter;
}
