/** The retention job scheduler against real Redis and PostgreSQL. */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureLogger, defer, SHARED_REDIS_URL, uniquePrefix, waitFor } from '../test/helpers.ts';
import { openPostgresTestStore, recordAt, type TestStore } from '../test/stores.ts';
import {
  createAuditRecord,
  RETENTION_QUEUE,
  RETENTION_SCHEDULER_ID,
  startAuditRetention,
} from './index.ts';

let t: TestStore;
beforeAll(async () => {
  t = await openPostgresTestStore();
});
afterAll(async () => {
  await t?.dispose();
});

describe('audit retention', () => {
  it('registers one repeatable job for all replicas and deletes old records when it runs', async () => {
    const prefix = uniquePrefix();
    const recent = createAuditRecord({ ...recordAt(0), id: undefined, timestamp: undefined });
    await t.store.insertBatch([recordAt(0), recordAt(1000), recent]);
    const options = {
      store: t.store,
      connection: SHARED_REDIS_URL,
      prefix,
      retentionDays: 30,
      everyMs: 1000,
      logger: captureLogger(),
    };
    const replicas = [startAuditRetention(options), startAuditRetention(options)];
    for (const replica of replicas) defer(() => replica.close());
    await Promise.all(replicas.map((replica) => replica.scheduled()));

    const connection = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: null });
    const queue = new Queue(RETENTION_QUEUE, { connection, prefix });
    defer(async () => {
      await queue.close();
      connection.disconnect();
    });
    const schedulers = await queue.getJobSchedulers();
    expect(schedulers.map((s) => s.key)).toEqual([RETENTION_SCHEDULER_ID]);
    expect(schedulers[0]?.every).toBe(1000);

    await waitFor(async () => (await t.count()) === 1, 'the scheduled run', 10_000);
    expect((await t.store.query()).records.map((r) => r.id)).toEqual([recent.id]);
  });

  it('runs now on demand', async () => {
    await t.clear();
    await t.store.insertBatch([recordAt(0)]);
    const retention = startAuditRetention({
      store: t.store,
      connection: SHARED_REDIS_URL,
      prefix: uniquePrefix(),
      logger: captureLogger(),
    });
    defer(() => retention.close());
    expect((await retention.runNow()).deleted).toBe(1);
    expect(await t.count()).toBe(0);
  });

  it('refuses a retention that is not a positive number of days', () => {
    expect(() => startAuditRetention({ store: t.store, retentionDays: 0 })).toThrow(RangeError);
    expect(() => startAuditRetention({ store: t.store, everyMs: 10 })).toThrow(RangeError);
  });
});
