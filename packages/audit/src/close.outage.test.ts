/**
 * Shutting down while Redis is away: the worker and the retention runner close promptly
 * (bounded graceful close, then forced), and a job being processed when the worker is forced
 * down is stored exactly once after a restart (BullMQ redelivers unacknowledged jobs).
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  captureLogger,
  defer,
  makeRecords,
  startRedisServer,
  uniquePrefix,
  waitFor,
} from '../test/helpers.ts';
import { openPostgresTestStore, type TestStore } from '../test/stores.ts';
import {
  AUDIT_JOB_NAME,
  AUDIT_JOB_OPTIONS,
  AUDIT_QUEUE,
  type AuditRetention,
  type AuditWorker,
  type AuditWorkerOptions,
  createAuditWorker,
  startAuditRetention,
} from './index.ts';

let t: TestStore;
beforeAll(async () => {
  t = await openPostgresTestStore();
});
afterAll(async () => {
  await t?.dispose();
});
beforeEach(async () => {
  await t.clear();
});

async function timed(promise: Promise<unknown>): Promise<number> {
  const started = Date.now();
  await promise;
  return Date.now() - started;
}

const pause = (ms: number) => new Promise((tick) => setTimeout(tick, ms));

/** A worker on `url` (closed after the test) with a 500 ms close bound unless told otherwise. */
function startWorker(url: string, options: Partial<AuditWorkerOptions> = {}): AuditWorker {
  const worker = createAuditWorker({
    store: t.store,
    connection: url,
    prefix: uniquePrefix(url),
    logger: captureLogger(),
    closeTimeoutMs: 500,
    ...options,
  });
  defer(() => worker.close());
  return worker;
}

/** Retention on `url` (closed after the test) with a 500 ms close bound. */
function startRetention(url: string): AuditRetention {
  const retention = startAuditRetention({
    store: t.store,
    connection: url,
    prefix: uniquePrefix(url),
    logger: captureLogger(),
    closeTimeoutMs: 500,
  });
  defer(() => retention.close());
  return retention;
}

describe('closing while Redis is away', () => {
  it('the worker closes within its closeTimeoutMs when Redis is down', async () => {
    const server = await startRedisServer();
    const worker = startWorker(server.url);
    await worker.waitUntilReady();
    await server.kill();
    // Long enough for the worker to try (and queue) commands against the dead Redis.
    await pause(1500);
    expect(await timed(worker.close())).toBeLessThan(3000);
  });

  it("the worker closes promptly when Redis is down with a reading of the queue's length outstanding", async () => {
    const server = await startRedisServer();
    const worker = startWorker(server.url);
    await worker.waitUntilReady();
    expect(await worker.jobCounts()).toEqual({ waiting: 0, active: 0, delayed: 0, failed: 0 });
    await server.kill();
    void worker.jobCounts().catch(() => undefined);
    await pause(1500);
    expect(await timed(worker.close())).toBeLessThan(3000);
    await expect(worker.jobCounts()).rejects.toThrow(/closed/);
  });

  it('retention closes within its closeTimeoutMs when Redis is down', async () => {
    const server = await startRedisServer();
    const retention = startRetention(server.url);
    await retention.scheduled();
    await server.kill();
    await pause(1500);
    expect(await timed(retention.close())).toBeLessThan(3000);
  });

  it('the worker closes promptly when Redis was never reachable', async () => {
    const server = await startRedisServer();
    await server.kill();
    const worker = startWorker(server.url);
    const retention = startRetention(server.url);
    await pause(300);
    expect(await timed(Promise.all([worker.close(), retention.close()]))).toBeLessThan(3000);
  });

  it('the worker gives up a graceful close after closeTimeoutMs when Redis stops answering', async () => {
    const server = await startRedisServer();
    const logger = captureLogger();
    const worker = startWorker(server.url, { logger });
    await worker.waitUntilReady();
    // A frozen Redis: connections stay open, nothing answers.
    const pid = await redisPid(server.url);
    process.kill(pid, 'SIGSTOP');
    defer(async () => {
      process.kill(pid, 'SIGCONT');
    });
    const ms = await timed(worker.close());
    expect(ms).toBeGreaterThanOrEqual(450);
    expect(ms).toBeLessThan(3000);
    expect(logger.entries.map((e) => e.message)).toContainEqual(
      expect.stringMatching(/^audit worker did not close within 500 ms/),
    );
  });

  it.each(['commits late', 'never commits'])(
    'stores a job that was being processed when the worker was forced down exactly once after a restart (insert %s)',
    async (insert) => {
      const server = await startRedisServer({ durable: true });
      const prefix = uniquePrefix(server.url);
      const connection = new Redis(server.url, { maxRetriesPerRequest: null });
      connection.on('error', () => undefined);
      const queue = new Queue(AUDIT_QUEUE, {
        connection,
        prefix,
        defaultJobOptions: AUDIT_JOB_OPTIONS,
      });
      queue.on('error', () => undefined);
      defer(async () => {
        await queue.close().catch(() => undefined);
        connection.disconnect();
      });
      const records = makeRecords(5);
      await queue.addBulk(
        records.map((r) => ({ name: AUDIT_JOB_NAME, data: r, opts: { jobId: r.id } })),
      );

      // The first worker takes the jobs and hangs in its insert (nothing committed yet).
      let release: () => void = () => undefined;
      const hanging = new Promise<void>((done) => {
        release = done;
      });
      defer(async () => release());
      let taken = 0;
      const first = startWorker(server.url, {
        prefix,
        batchSize: 5,
        flushIntervalMs: 5,
        lockDurationMs: 1000,
        stalledIntervalMs: 300,
        hooks: {
          beforeInsert: async () => {
            taken += 5;
            await hanging;
            if (insert === 'never commits') throw new Error('the database never answered');
          },
        },
      });
      await waitFor(() => taken === 5, 'the first worker to take all five');
      await server.kill();
      expect(await timed(first.close())).toBeLessThan(3000);
      // The stuck insert finishes after the worker gave up on it (or fails).
      release();

      await server.start();
      const second = startWorker(server.url, {
        prefix,
        batchSize: 5,
        flushIntervalMs: 5,
        stalledIntervalMs: 300,
      });
      await waitFor(() => second.metrics().processed === 5, 'the redelivered jobs', 15_000);
      expect(await t.count()).toBe(5);
      await waitFor(async () => (await queue.getCompletedCount()) === 5, 'five completed jobs');
      expect(await queue.getFailedCount()).toBe(0);
      expect(await queue.getActiveCount()).toBe(0);
    },
    30_000,
  );
});

async function redisPid(url: string): Promise<number> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const info = await client.info('server');
    return Number(/process_id:(\d+)/.exec(info)?.[1]);
  } finally {
    client.disconnect();
  }
}
