/**
 * The worker against a PostgreSQL database that goes away for longer than the jobs' whole
 * retry budget (a database of its own, closed to connections with `ALLOW_CONNECTIONS false`
 * and its sessions terminated): records wait, nothing reaches the failed set, and every
 * record is stored exactly once when the database is back.
 */
import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  captureLogger,
  defer,
  makeRecords,
  SHARED_REDIS_URL,
  uniquePrefix,
  waitFor,
} from '../test/helpers.ts';
import { SHARED_DATABASE_URL } from '../test/stores.ts';
import {
  AUDIT_JOB_NAME,
  AUDIT_JOB_OPTIONS,
  AUDIT_QUEUE,
  type AuditStore,
  createAuditWorker,
  openAuditStore,
} from './index.ts';

const database = `audit_outage_${process.pid}_${randomBytes(4).toString('hex')}`;
let admin: pg.Client;
let store: AuditStore;

beforeAll(async () => {
  admin = new pg.Client({ connectionString: SHARED_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${database}"`);
  const url = new URL(SHARED_DATABASE_URL);
  url.pathname = `/${database}`;
  store = await openAuditStore({ databaseUrl: url.href, logger: captureLogger() });
});
afterAll(async () => {
  await store?.close();
  await admin?.query(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS true`).catch(() => undefined);
  await admin?.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  await admin?.end();
});

/** Close the database to new connections and end every session on it. */
async function takeDatabaseDown(): Promise<void> {
  await admin.query(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS false`);
  await admin.query(
    'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
    [database],
  );
}

async function bringDatabaseBack(): Promise<void> {
  await admin.query(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS true`);
}

async function rowCount(): Promise<number> {
  const url = new URL(SHARED_DATABASE_URL);
  url.pathname = `/${database}`;
  const client = new pg.Client({ connectionString: url.href });
  await client.connect();
  try {
    const result = await client.query('SELECT count(*)::int AS n FROM audit_records');
    return (result.rows[0] as { n: number }).n;
  } finally {
    await client.end();
  }
}

describe('audit worker when the store goes away', () => {
  it('holds records through an outage longer than every retry of their jobs, then stores each once', async () => {
    const prefix = uniquePrefix();
    const connection = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: null });
    // The production job options, with the backoff scaled down: all 8 attempts would be spent
    // within 10 ms × (1 + 2 + … + 64) ≈ 1.3 s of outage.
    const jobOptions = { ...AUDIT_JOB_OPTIONS, backoff: { type: 'exponential', delay: 10 } };
    const queue = new Queue(AUDIT_QUEUE, { connection, prefix, defaultJobOptions: jobOptions });
    defer(async () => {
      await queue.close();
      connection.disconnect();
    });
    const logger = captureLogger();
    const worker = createAuditWorker({
      store,
      connection: SHARED_REDIS_URL,
      prefix,
      logger,
      batchSize: 10,
      flushIntervalMs: 5,
      storeRetryDelayMs: 50,
      storeRetryMaxDelayMs: 200,
    });
    defer(() => worker.close());
    await worker.waitUntilReady();

    const before = makeRecords(20);
    const add = (records: typeof before) =>
      queue.addBulk(records.map((r) => ({ name: AUDIT_JOB_NAME, data: r, opts: { jobId: r.id } })));
    await add(before);
    await waitFor(async () => (await rowCount()) === 20, 'the records before the outage');

    await takeDatabaseDown();
    // More records than the worker holds at once (4 × batchSize): the rest wait in the queue.
    const during = makeRecords(100, 20);
    await add(during);
    await waitFor(() => worker.metrics().failedBatches > 0, 'the first failed insert');
    await new Promise((tick) => setTimeout(tick, 3000));
    expect(await queue.getFailedCount()).toBe(0);
    expect(await queue.getActiveCount()).toBeLessThanOrEqual(40);
    expect(await queue.getWaitingCount()).toBeGreaterThanOrEqual(60);
    expect(worker.metrics().storeUnavailable).toBe(true);
    expect(logger.entries.map((e) => e.message)).toContain(
      'audit store unavailable; holding records until it answers',
    );

    await bringDatabaseBack();
    await waitFor(() => worker.metrics().processed === 120, 'every record stored', 20_000);
    expect(await rowCount()).toBe(120);
    await waitFor(async () => (await queue.getCompletedCount()) === 120, 'every job acknowledged');
    expect(await queue.getFailedCount()).toBe(0);
    const jobs = await queue.getCompleted(0, -1);
    // One attempt each (the one that completed): the outage spent none.
    expect(Math.max(...jobs.map((job) => job.attemptsMade))).toBe(1);
    expect(worker.metrics()).toMatchObject({ storeUnavailable: false, inserted: 120 });
    expect(logger.entries.map((e) => e.message)).toContain(
      'audit store answers again; storing held records',
    );
  }, 40_000);

  it('closes promptly while the store is away, leaving held jobs to be redelivered', async () => {
    const prefix = uniquePrefix();
    const connection = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: null });
    const queue = new Queue(AUDIT_QUEUE, {
      connection,
      prefix,
      defaultJobOptions: AUDIT_JOB_OPTIONS,
    });
    defer(async () => {
      await queue.close();
      connection.disconnect();
    });
    const options = {
      store,
      connection: SHARED_REDIS_URL,
      prefix,
      logger: captureLogger(),
      batchSize: 10,
      flushIntervalMs: 5,
      lockDurationMs: 1000,
      stalledIntervalMs: 300,
      storeRetryDelayMs: 50,
      storeRetryMaxDelayMs: 200,
    };
    const first = createAuditWorker(options);
    defer(() => first.close());
    await first.waitUntilReady();
    const before = await rowCount();
    await takeDatabaseDown();
    const records = makeRecords(10);
    await queue.addBulk(
      records.map((r) => ({ name: AUDIT_JOB_NAME, data: r, opts: { jobId: r.id } })),
    );
    await waitFor(() => first.metrics().storeUnavailable, 'the worker to hold the batch');
    const started = Date.now();
    await first.close();
    expect(Date.now() - started).toBeLessThan(3000);

    await bringDatabaseBack();
    const second = createAuditWorker(options);
    defer(() => second.close());
    await waitFor(
      async () => (await rowCount()) === before + 10,
      'the redelivered records',
      15_000,
    );
    await waitFor(async () => (await queue.getCompletedCount()) === 10, 'every job acknowledged');
    expect(await queue.getFailedCount()).toBe(0);
  }, 40_000);
});
