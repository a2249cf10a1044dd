/**
 * Closing BullMQ workers in bounded time. `Worker.close()` waits for the jobs in flight and
 * then quits its connections; while Redis does not answer, both wait for commands that are
 * never sent, so a graceful close could hang a shutdown for good. Nothing un-acknowledged is
 * lost by cutting it short: a job whose completion never reached Redis stays active with an
 * expiring lock, and BullMQ's stalled-job check hands it to a worker again (the store
 * inserts idempotently, so a job whose records did commit stores nothing twice).
 */
import type { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { type AuditLogger, errorFields } from './logger.ts';

/** How long a connection may take to say goodbye (QUIT) before it is dropped. */
const QUIT_TIMEOUT_MS = 1000;

/** Resolves with the promise's value, or `undefined` once `ms` have passed. */
export function raceTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<undefined>((done) => {
      timer = setTimeout(() => done(undefined), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** What {@link closeWorkerPromptly} closes. */
export interface PromptCloseTarget {
  /** What the log line calls it, e.g. `audit worker`. */
  what: string;
  worker: Worker;
  /** A queue sharing the worker's connection, closed after it. */
  queue?: Queue;
  /** The ioredis connection the worker (and queue) share; owned by the caller, dropped here. */
  client: Redis;
  /** Longest wait for the graceful close while Redis answers. */
  timeoutMs: number;
  /** Do not wait for the jobs in flight even if Redis answers. Default false. */
  force?: boolean;
  logger: AuditLogger;
}

/**
 * Close a worker gracefully (in-flight jobs finish and are acknowledged) if Redis answers,
 * at once (`close(true)`) if it does not, and in any case within `timeoutMs`: past that the
 * connections are dropped and the close is abandoned, logged as a warning. Never rejects.
 */
export async function closeWorkerPromptly(target: PromptCloseTarget): Promise<void> {
  const { what, worker, queue, client, timeoutMs, force = false, logger } = target;
  const reachable = client.status === 'ready';
  const closing = (async () => {
    await worker.close(force || !reachable);
    await queue?.close();
  })().then(
    () => true,
    (error: unknown) => {
      logger.warn(`${what} close failed`, { error: errorFields(error) });
      return true;
    },
  );
  const closed = (await raceTimeout(closing, timeoutMs)) === true;
  if (!closed)
    logger.warn(
      `${what} did not close within ${timeoutMs} ms (Redis not answering?); dropping its connections`,
      {
        timeoutMs,
        redis: client.status,
      },
    );
  if (closed && client.status === 'ready')
    await raceTimeout(
      client.quit().catch(() => undefined),
      QUIT_TIMEOUT_MS,
    );
  client.disconnect();
  if (!closed) {
    // The blocking connection is the worker's own: drop it without waiting for a goodbye.
    await raceTimeout(
      worker.disconnect().catch(() => undefined),
      QUIT_TIMEOUT_MS,
    );
  }
}
