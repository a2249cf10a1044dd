/**
 * The worker against real Redis (a unique prefix per test) and real PostgreSQL (a schema of
 * its own): batching, exactly-once storage under duplicate delivery and replay, malformed
 * jobs, failed inserts, PII scrubbing, a worker killed mid-batch, Redis dying mid-stream.
 */
import { join } from 'node:path';
import { type JobsOptions, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { spawnChild } from '../test/child.ts';
import {
  captureLogger,
  defer,
  makeRecords,
  readJobs,
  SHARED_REDIS_URL,
  startRedisServer,
  tempDir,
  uniquePrefix,
  waitFor,
} from '../test/helpers.ts';
import {
  deniedWith,
  openPostgresTestStore,
  recordAt,
  SHARED_DATABASE_URL,
  type TestStore,
} from '../test/stores.ts';
import {
  AUDIT_BATCH_JOB_NAME,
  AUDIT_JOB_NAME,
  AUDIT_JOB_OPTIONS,
  AUDIT_QUEUE,
  AUDIT_RECORD_LIMITS,
  type AuditRecord,
  type AuditRecordBatch,
  type AuditStore,
  type AuditWorker,
  type AuditWorkerOptions,
  createAuditProducer,
  createAuditWorker,
  PAYLOAD_PREVIEW_MAX_LENGTH,
  SCRUB_FAILED,
  TRUNCATION_MARKER,
} from './index.ts';

let t: TestStore & { schema: string };
beforeAll(async () => {
  t = await openPostgresTestStore();
});
afterAll(async () => {
  await t?.dispose();
});
beforeEach(async () => {
  await t.clear();
});

/** The stored row count once it has not moved for 300 ms (at most ~5 s). */
async function settledCount(): Promise<number> {
  let last = await t.count();
  for (let i = 0; i < 16; i++) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    const now = await t.count();
    if (now === last) return now;
    last = now;
  }
  return last;
}

function worker(options: Partial<AuditWorkerOptions> & { prefix: string }): AuditWorker {
  const created = createAuditWorker({
    store: t.store,
    connection: SHARED_REDIS_URL,
    logger: captureLogger(),
    batchSize: 50,
    flushIntervalMs: 10,
    ...options,
  });
  defer(() => created.close());
  return created;
}

function queue(prefix: string, defaultJobOptions: JobsOptions = AUDIT_JOB_OPTIONS): Queue {
  const connection = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: null });
  const created = new Queue(AUDIT_QUEUE, { connection, prefix, defaultJobOptions });
  defer(async () => {
    await created.close();
    connection.disconnect();
  });
  return created;
}

async function add(
  q: Queue,
  records: readonly unknown[],
  jobId = (r: AuditRecord) => r.id,
): Promise<void> {
  await q.addBulk(
    records.map((data) => ({
      name: AUDIT_JOB_NAME,
      data,
      opts: { jobId: jobId(data as AuditRecord) },
    })),
  );
}

async function storedIds(store: AuditStore): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.query(
      {},
      cursor === undefined ? { limit: 500 } : { cursor, limit: 500 },
    );
    ids.push(...page.records.map((r) => r.id));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return ids.sort();
}

const sortedIds = (records: readonly AuditRecord[]): string[] => records.map((r) => r.id).sort();

// The production job options with the backoff scaled down: all 8 attempts are spent within
// 10 ms × (1 + 2 + … + 64) ≈ 1.3 s, so a job that would end in the failed set gets there fast.
const FAST_RETRIES: JobsOptions = {
  ...AUDIT_JOB_OPTIONS,
  backoff: { type: 'exponential', delay: 10 },
};

// A timestamp PostgreSQL's timestamptz cannot hold: it has no year 0 (SQLSTATE 22008, on
// PostgreSQL and PGlite alike). The schema refuses it when the worker parses a job.
const YEAR_ZERO = '0000-01-01T00:00:00Z';

/**
 * The real PostgreSQL store, except that it inserts the records of `ids` with a year-0
 * timestamp, which PostgreSQL refuses by their data (SQLSTATE 22008). The schema refuses
 * every timestamp PostgreSQL cannot hold, so a record reaching the insert can no longer carry
 * one: this stands for any data the store refuses that the schema does not foresee.
 */
function refusing(ids: readonly string[]): AuditStore {
  return {
    ...t.store,
    insertBatch: (batch) =>
      t.store.insertBatch(
        batch.map((record) =>
          ids.includes(record.id) ? { ...record, timestamp: YEAR_ZERO } : record,
        ),
      ),
  };
}

/**
 * The store `inner` (default the real PostgreSQL store), except that it refuses every insert
 * holding the record `id`, with an error that is no data exception (no SQLSTATE class 22),
 * until that record was refused once on its own; it delegates everything else.
 */
function refusingOnce(id: string, inner: AuditStore = t.store): AuditStore {
  let refusedAlone = false;
  return {
    ...inner,
    insertBatch: (batch) => {
      if (!refusedAlone && batch.some((r) => r.id === id)) {
        refusedAlone = batch.length === 1;
        return Promise.reject(new Error('lock timeout'));
      }
      return inner.insertBatch(batch);
    },
  };
}

/** Jobs of the queue that completed or failed for good. */
async function settled(q: Queue): Promise<number> {
  const counts = await q.getJobCounts('completed', 'failed');
  return (counts.completed ?? 0) + (counts.failed ?? 0);
}

describe('audit worker', () => {
  it('stores what producers enqueue, in batches, each record once', async () => {
    const prefix = uniquePrefix();
    const w = worker({ prefix, batchSize: 40 });
    const producer = createAuditProducer({
      connection: SHARED_REDIS_URL,
      prefix,
      journalPath: join(await tempDir(), 'journal.ndjson'),
      logger: captureLogger(),
    });
    defer(() => producer.close());
    const records = makeRecords(300);
    for (const record of records) producer.enqueue(record);
    await producer.flush();
    await waitFor(async () => (await t.count()) === 300, '300 rows');
    expect(await storedIds(t.store)).toEqual(sortedIds(records));
    await waitFor(() => w.metrics().processed === 300, 'the last acknowledgements');
    const metrics = w.metrics();
    expect(metrics).toMatchObject({ processed: 300, inserted: 300, duplicates: 0, malformed: 0 });
    expect(metrics.batches).toBeLessThan(300 / 5);
  });

  it('stores a record delivered twice exactly once (same id, separate jobs)', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    const records = makeRecords(60);
    await add(q, records);
    await add(q, records, (r) => `${r.id}-again`);
    const w = worker({ prefix });
    await waitFor(() => w.metrics().processed === 120, '120 jobs');
    expect(await t.count()).toBe(60);
    expect(w.metrics()).toMatchObject({ inserted: 60, duplicates: 60 });
  });

  it('stores nothing twice when a whole batch is replayed after it was stored', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    const records = makeRecords(30);
    const w = worker({ prefix });
    await add(q, records);
    await waitFor(() => w.metrics().processed === 30, 'the first delivery');
    // The replay: the same records again, e.g. a journal replayed after a crash.
    await add(q, records, (r) => `${r.id}-replay`);
    await waitFor(() => w.metrics().processed === 60, 'the replay');
    expect(await storedIds(t.store)).toEqual(sortedIds(records));
    expect(w.metrics()).toMatchObject({ inserted: 30, duplicates: 30 });
  });

  it('moves malformed jobs aside without retrying them, counts them, and stores the rest', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    const good = makeRecords(5);
    const bad = [
      { ...recordAt(0), id: 'not-a-ulid' },
      { ...recordAt(1), decision: 'maybe' },
      { ...recordAt(2), traceId: 'XYZ' },
      'just a string',
    ];
    await add(q, good);
    await q.addBulk(
      bad.map((data, i) => ({ name: AUDIT_JOB_NAME, data, opts: { jobId: `bad-${i}` } })),
    );
    const logger = captureLogger();
    const w = worker({ prefix, logger });
    await waitFor(async () => (await q.getFailedCount()) === 4, 'four failed jobs');
    await waitFor(() => w.metrics().processed === 5, 'the good ones');
    expect(await storedIds(t.store)).toEqual(sortedIds(good));
    const failed = await q.getFailed();
    for (const job of failed) expect(job.attemptsMade).toBe(1);
    expect(failed.map((j) => j.failedReason).join('\n')).toMatch(/decision/);
    expect(w.metrics().malformed).toBe(4);
    expect(logger.entries.filter((e) => e.message.startsWith('malformed'))).toHaveLength(4);
  });

  it('retries a batch whose insert failed, and then stores it once', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    let failures = 1;
    const flaky: AuditStore = {
      ...t.store,
      insertBatch: (records) => {
        if (failures-- > 0) return Promise.reject(new Error('database went away'));
        return t.store.insertBatch(records);
      },
    };
    const records = makeRecords(10);
    await add(q, records);
    const w = worker({ prefix, store: flaky });
    await waitFor(async () => (await t.count()) === 10, 'the retried batch', 15_000);
    expect(w.metrics()).toMatchObject({ failedBatches: 1, inserted: 10 });
  });

  it('never lets PII from a payload preview reach the store', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    const pii = ['jane.doe@example.com', '+1 555 010 9999', '4111 1111 1111 1111', 'hunter2'];
    const record = recordAt(0, {
      payloadPreview: `{"name":"tools/call","arguments":{"email":"${pii[0]}","phone":"${pii[1]}","card":"${pii[2]}","password":"${pii[3]}"}}`,
      abortReasons: [
        { interceptor: 'x', reason: `saw ${pii[0]}`, type: 'validation', phase: 'request' },
      ],
    });
    const custom = recordAt(1, { payloadPreview: 'customer 42 is Bob' });
    await add(q, [record]);
    worker({ prefix });
    await waitFor(async () => (await t.count()) === 1, 'the record');
    const raw = await t.rawText();
    for (const value of pii) expect(raw).not.toContain(value);
    const [stored] = (await t.store.query()).records;
    expect(stored?.payloadPreview).toContain('[EMAIL]');
    expect(stored?.payloadPreview).toContain('"password":"[SECRET]"');

    // An injected scrubber (the PII engine's) is used instead; one that throws blanks.
    const prefix2 = uniquePrefix();
    const q2 = queue(prefix2);
    await add(q2, [custom, recordAt(2, { payloadPreview: 'x' })]);
    worker({
      prefix: prefix2,
      scrub: (text) => {
        if (text === 'x') throw new Error('engine down');
        return text.replace('Bob', '<PERSON>');
      },
    });
    await waitFor(async () => (await t.count()) === 3, 'the other two');
    const previews = (await t.store.query()).records.map((r) => r.payloadPreview);
    expect(previews).toContain('customer 42 is <PERSON>');
    expect(previews).toContain(SCRUB_FAILED);
  });

  it('stores a record with oversized fields cut with markers, never refusing it', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    const roles = Array.from({ length: 50_000 }, (_, i) => `role-${i}`);
    await add(q, [
      recordAt(0, {
        event: 'e'.repeat(5000),
        principal: { type: 'user', id: 'alice', claims: { roles } },
      }),
    ]);
    const w = worker({ prefix });
    await waitFor(async () => (await t.count()) === 1, 'the record');
    expect(w.metrics().malformed).toBe(0);
    expect((await t.rawText()).length).toBeLessThan(5_000);
    const [stored] = (await t.store.query()).records;
    expect(stored?.event).toHaveLength(AUDIT_RECORD_LIMITS.eventLength);
    expect(stored?.event.endsWith(TRUNCATION_MARKER)).toBe(true);
    expect(stored?.principal?.claims?.roles).toHaveLength(AUDIT_RECORD_LIMITS.claimItems);
  });

  it('scrubs the target: neither the stored row nor stats byTool hold its PII', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    const uri = 'mailto:bob@example.com?card=4111111111111111';
    const tool = 'notify_jane.doe@example.com';
    await add(q, [
      recordAt(0, { event: 'resources/read', method: 'resources/read', target: uri }),
      recordAt(1, { target: tool }),
    ]);
    worker({ prefix });
    await waitFor(async () => (await t.count()) === 2, 'both records');
    const raw = await t.rawText();
    for (const value of ['bob@example.com', '4111111111111111', 'jane.doe@example.com'])
      expect(raw).not.toContain(value);
    const targets = (await t.store.query()).records.map((r) => r.target).sort();
    expect(targets).toEqual(['[EMAIL]', 'mailto:[EMAIL]?card=[NUMBER]']);
    // The target column (filters, byTool) is filled from the scrubbed record.
    const stats = await t.store.stats(new Date(0));
    expect(stats.byTool.map((row) => row.tool).sort()).toEqual(targets);
    expect((await t.store.query({ tool: '[EMAIL]' })).records).toHaveLength(1);
  });

  it('stores a target that scrubbing made longer cut back to its bound', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    // Within the bound as queued (510); 583 once each address is `[EMAIL]`.
    const target = Array.from({ length: 73 }, () => 'a@b.io').join(' ');
    await add(q, [recordAt(0, { target })]);
    worker({ prefix });
    await waitFor(async () => (await t.count()) === 1, 'the record');
    const [stored] = (await t.store.query()).records;
    expect(stored?.target).toHaveLength(AUDIT_RECORD_LIMITS.idLength);
    expect(stored?.target?.endsWith(TRUNCATION_MARKER)).toBe(true);
    // The target column (the `tool` filter, stats byTool) holds the same cut text.
    const stats = await t.store.stats(new Date(0));
    expect(stats.byTool.map((row) => row.tool)).toEqual([stored?.target]);
  });

  it('stores abort reasons and validator messages that scrubbing made longer cut back to their bound', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    // Within the bound as queued (510); 583 once each address is `[EMAIL]`.
    const text = Array.from({ length: 73 }, () => 'a@b.io').join(' ');
    await add(q, [recordAt(0, deniedWith(text))]);
    worker({ prefix });
    await waitFor(async () => (await t.count()) === 1, 'the record');
    const [stored] = (await t.store.query()).records;
    const texts = [
      stored?.abortReasons[0]?.reason,
      stored?.interceptors[0]?.messages?.[0]?.message,
    ];
    for (const cut of texts) {
      expect(cut).toHaveLength(AUDIT_RECORD_LIMITS.messageLength);
      expect(cut?.endsWith(TRUNCATION_MARKER)).toBe(true);
    }
    expect(await t.rawText()).not.toContain('@b.io');
  });

  it('scrubs a made-up event and method: neither the stored row nor the event filter hold its PII', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    // Any method a client makes up is an event named by it (the audit-logger hooks `*`).
    const invented = 'tools/bob@example.com';
    await add(q, [
      recordAt(0, { event: invented, method: invented }),
      recordAt(1, { event: 'tools/call', method: 'tools/call' }),
    ]);
    worker({ prefix });
    await waitFor(async () => (await t.count()) === 2, 'both records');
    expect(await t.rawText()).not.toContain('bob@example.com');
    const stored = (await t.store.query()).records.map((r) => [r.event, r.method]).sort();
    expect(stored).toEqual([
      ['tools/[EMAIL]', 'tools/[EMAIL]'],
      ['tools/call', 'tools/call'],
    ]);
    // The event column (the `event` filter) is filled from the scrubbed record; an ordinary
    // event is stored as it is, so a query by it finds it.
    expect((await t.store.query({ event: invented })).records).toHaveLength(0);
    expect((await t.store.query({ event: 'tools/[EMAIL]' })).records).toHaveLength(1);
    expect((await t.store.query({ event: 'tools/call' })).records).toHaveLength(1);
  });

  it.each(['beforeInsert', 'afterInsert'])(
    'stores everything exactly once after a worker is killed mid-batch (%s)',
    async (freeze) => {
      const prefix = uniquePrefix();
      const q = queue(prefix);
      const records = makeRecords(80);
      await add(q, records);
      const child = spawnChild('./worker-child.ts', {
        REDIS_URL: SHARED_REDIS_URL,
        PREFIX: prefix,
        DATABASE_URL: SHARED_DATABASE_URL,
        SCHEMA: t.schema,
        BATCH_SIZE: '10',
        FREEZE: freeze,
      });
      const frozen = await child.line((l) => 'frozen' in l);
      expect(frozen).toMatchObject({ frozen: freeze, records: 10 });
      child.process.kill('SIGKILL');
      await child.exited;
      // An INSERT the child sent just before it died still commits in PostgreSQL (the server
      // notices the lost client only after the statement): count once the rows stop moving.
      const storedBeforeKill = await settledCount();
      if (freeze === 'beforeInsert') expect(storedBeforeKill).toBe(0);
      else expect(storedBeforeKill).toBeGreaterThanOrEqual(10);

      // A new worker takes the waiting jobs at once, and the dead one's after its locks expire.
      const w = worker({ prefix, batchSize: 10, stalledIntervalMs: 300 });
      await waitFor(async () => (await t.count()) === 80, 'all 80 rows', 20_000);
      await waitFor(() => w.metrics().processed === 80, 'every job acknowledged', 10_000);
      expect(await storedIds(t.store)).toEqual(sortedIds(records));
      expect(w.metrics().duplicates).toBe(storedBeforeKill);
      expect(await q.getFailedCount()).toBe(0);
    },
    40_000,
  );

  it('loses no record when Redis dies mid-stream (producer journal, durable Redis) end to end', async () => {
    const server = await startRedisServer({ durable: true });
    const prefix = uniquePrefix(server.url);
    const producer = createAuditProducer({
      connection: server.url,
      prefix,
      journalPath: join(await tempDir(), 'journal.ndjson'),
      logger: captureLogger(),
      batchSize: 25,
      flushIntervalMs: 2,
      maxBuffered: 50,
      sendTimeoutMs: 500,
      maxReconnectDelayMs: 50,
    });
    defer(() => producer.close());
    const w = worker({
      prefix,
      connection: server.url,
      batchSize: 20,
      lockDurationMs: 1000,
      stalledIntervalMs: 300,
    });
    await w.waitUntilReady();

    const all = makeRecords(1500);
    let next = 0;
    const feed = setInterval(() => {
      for (let i = 0; i < 6 && next < all.length; i++) producer.enqueue(all[next++] as AuditRecord);
    }, 1);
    defer(async () => clearInterval(feed));
    const pause = (ms: number) => new Promise((tick) => setTimeout(tick, ms));
    await pause(200);
    const storedBeforeKill = await t.count();
    await server.kill();
    await pause(300);
    await server.start();
    await waitFor(() => next === all.length, 'the feed to finish');
    clearInterval(feed);
    await producer.flush(10_000);
    await waitFor(
      async () => (await t.count()) === all.length,
      'every record in PostgreSQL',
      30_000,
    );

    expect(storedBeforeKill).toBeGreaterThan(0);
    expect(await storedIds(t.store)).toEqual(sortedIds(all));
    expect(producer.metrics()).toMatchObject({ dropped: 0, journalPending: 0, buffered: 0 });
    expect(producer.metrics().journaled).toBeGreaterThan(0);
  }, 60_000);

  it('stores batch jobs (producers with batchJobs) exactly once, with one job per batch', async () => {
    const prefix = uniquePrefix();
    const producer = createAuditProducer({
      connection: SHARED_REDIS_URL,
      prefix,
      journalPath: join(await tempDir(), 'journal.ndjson'),
      logger: captureLogger(),
      batchSize: 100,
      batchJobs: true,
    });
    defer(() => producer.close());
    const records = makeRecords(250);
    for (const record of records) producer.enqueue(record);
    await producer.flush();
    const jobs = await readJobs(SHARED_REDIS_URL, prefix);
    expect(
      jobs.map((job) => [job.name, (job.data as unknown as AuditRecordBatch).records.length]),
    ).toEqual([
      [AUDIT_BATCH_JOB_NAME, 100],
      [AUDIT_BATCH_JOB_NAME, 100],
      [AUDIT_BATCH_JOB_NAME, 50],
    ]);
    const q = queue(prefix);
    // A replayed batch (another job id) and single-record jobs of the same records mix in.
    await q.add(
      AUDIT_BATCH_JOB_NAME,
      { records: records.slice(0, 100) },
      { jobId: 'replayed-batch' },
    );
    await add(q, records.slice(240), (r) => `${r.id}-single`);
    const w = worker({ prefix });
    await waitFor(() => w.metrics().processed === 360, 'every record of every job');
    expect(await storedIds(t.store)).toEqual(sortedIds(records));
    expect(w.metrics()).toMatchObject({ inserted: 250, duplicates: 110, malformed: 0 });
  });

  it('stores the good records of a batch job and moves the job aside for its malformed ones', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix);
    const good = makeRecords(3);
    await q.add(
      AUDIT_BATCH_JOB_NAME,
      { records: [good[0], { ...recordAt(0), status: 'weird' }, good[1], 42, good[2]] },
      { jobId: 'mixed' },
    );
    await q.add(AUDIT_BATCH_JOB_NAME, { nothing: true }, { jobId: 'no-records' });
    const w = worker({ prefix });
    await waitFor(async () => (await q.getFailedCount()) === 2, 'both jobs failed');
    expect(await storedIds(t.store)).toEqual(sortedIds(good));
    expect(w.metrics()).toMatchObject({ malformed: 3, processed: 3 });
    const mixed = await q.getJob('mixed');
    expect(mixed?.attemptsMade).toBe(1);
    expect(mixed?.failedReason).toMatch(/2 of 5/);
  });

  it('stores records holding NUL or lone surrogates, the characters replaced by U+FFFD, with their batch', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix, FAST_RETRIES);
    const good = makeRecords(5);
    // PostgreSQL text and jsonb hold no U+0000 (SQLSTATE 22P05) and jsonb no lone surrogate
    // (22P02): caller text carrying either used to fail its whole batch.
    const nul = recordAt(0, {
      target: 'get\u0000weather',
      principal: { type: 'user', id: 'al\u0000ice', claims: { 'ro\u0000le': ['ad\u0000min'] } },
      interceptors: [
        {
          name: 'guard\u0000',
          type: 'validation',
          mode: 'active',
          outcome: 'denied',
          durationMs: 1,
          messages: [{ path: 'a\u0000', severity: 'error', message: 'saw \u0000' }],
        },
      ],
      abortReasons: [
        { interceptor: 'guard', reason: 'nul \u0000', type: 'validation', phase: 'request' },
      ],
      payloadPreview: '{"q":"\u0000"}',
    });
    const lone = recordAt(1, { target: 'half \ud83d', sessionId: '\ude00 tail' });
    // An emoji straddling the stored preview length: the worker's cut leaves it out whole.
    const straddling = recordAt(2, {
      payloadPreview: `${'a'.repeat(PAYLOAD_PREVIEW_MAX_LENGTH - 1)}\u{1F600} and more`,
    });
    await add(q, [...good, nul, lone, straddling]);
    const w = worker({ prefix });
    await waitFor(async () => (await settled(q)) === 8, 'every job done or failed');
    expect(await q.getFailedCount()).toBe(0);
    expect(await t.count()).toBe(8);
    expect(w.metrics()).toMatchObject({ inserted: 8, refused: 0 });
    const stored = new Map((await t.store.query()).records.map((r) => [r.id, r]));
    expect(stored.get(nul.id)).toMatchObject({
      target: 'get\ufffdweather',
      principal: { type: 'user', id: 'al\ufffdice', claims: { 'ro\ufffdle': ['ad\ufffdmin'] } },
      interceptors: [
        { name: 'guard\ufffd', messages: [{ path: 'a\ufffd', message: 'saw \ufffd' }] },
      ],
      abortReasons: [{ reason: 'nul \ufffd' }],
      payloadPreview: '{"q":"\ufffd"}',
    });
    expect(stored.get(lone.id)).toMatchObject({ target: 'half \ufffd', sessionId: '\ufffd tail' });
    expect(stored.get(straddling.id)?.payloadPreview).toBe(
      'a'.repeat(PAYLOAD_PREVIEW_MAX_LENGTH - 1),
    );
    // The columns the filters read hold the same text as the record.
    expect((await t.store.query({ tool: 'get\ufffdweather' })).records).toHaveLength(1);
    expect((await t.store.query({ principal: 'al\ufffdice' })).records).toHaveLength(1);
  });

  it('stores every other record of a batch that one unstorable record made fail, and fails only its job', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix, FAST_RETRIES);
    const good = makeRecords(30);
    const [bad] = makeRecords(1) as [AuditRecord];
    await add(q, [...good.slice(0, 12), bad, ...good.slice(12)]);
    const sizes: number[] = [];
    const logger = captureLogger();
    // One batch of all 31 records: it fills before the flush interval ends.
    const w = worker({
      prefix,
      logger,
      store: refusing([bad.id]),
      batchSize: 31,
      flushIntervalMs: 5000,
      hooks: { beforeInsert: (records) => void sizes.push(records.length) },
    });
    await waitFor(async () => (await settled(q)) === 31, 'every job done or failed');
    expect(sizes[0]).toBe(31);
    expect(await storedIds(t.store)).toEqual(sortedIds(good));
    expect(await q.getFailedCount()).toBe(1);
    expect(w.metrics()).toMatchObject({ inserted: 30, duplicates: 0, refused: 1, malformed: 0 });
    const [failed] = await q.getFailed();
    expect(failed?.id).toBe(bad.id);
    // Its data is refused (a data exception): retrying it would fail the same way.
    expect(failed?.attemptsMade).toBe(1);
    expect(failed?.failedReason).toMatch(/^the audit store refused this record \(SQLSTATE 22008\)/);
    const refusals = logger.entries.filter((e) => e.message.startsWith('audit store refused'));
    expect(refusals).toEqual([
      expect.objectContaining({ level: 'warn', fields: expect.objectContaining({ refused: 1 }) }),
    ]);
    // The log names how many and why, never the record's content.
    expect(JSON.stringify(logger.entries)).not.toContain('0000-01-01');
  });

  it('stores the other records of a batch job holding an unstorable record, and fails that job', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix, FAST_RETRIES);
    const good = makeRecords(20);
    const [bad] = makeRecords(1) as [AuditRecord];
    await q.add(
      AUDIT_BATCH_JOB_NAME,
      { records: [...good.slice(0, 5), bad, ...good.slice(5, 10)] },
      { jobId: 'with-unstorable' },
    );
    await q.add(AUDIT_BATCH_JOB_NAME, { records: good.slice(10) }, { jobId: 'all-good' });
    const w = worker({ prefix, batchSize: 21, flushIntervalMs: 5000, store: refusing([bad.id]) });
    await waitFor(async () => (await settled(q)) === 2, 'both jobs done or failed');
    expect(await storedIds(t.store)).toEqual(sortedIds(good));
    expect(await q.getCompletedCount()).toBe(1);
    expect(w.metrics()).toMatchObject({ inserted: 20, refused: 1 });
    const failed = await q.getJob('with-unstorable');
    expect(failed?.attemptsMade).toBe(1);
    expect(failed?.failedReason).toMatch(/^1 of 11 audit records refused by the store: \[5\] /);
  });

  it('fails a record whose timestamp PostgreSQL cannot hold as malformed, before any insert, and stores its batch', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix, FAST_RETRIES);
    const good = makeRecords(10);
    const yearZero = { ...recordAt(0), timestamp: YEAR_ZERO };
    const farOffset = { ...recordAt(1), timestamp: '2025-06-01T12:00:00+16:00' };
    await add(q, [...good.slice(0, 5), yearZero, farOffset, ...good.slice(5)]);
    const logger = captureLogger();
    // The ten good records fill one batch; the two bad ones never reach it.
    const w = worker({ prefix, logger, batchSize: 10, flushIntervalMs: 5000 });
    await waitFor(async () => (await settled(q)) === 12, 'every job done or failed');
    expect(await storedIds(t.store)).toEqual(sortedIds(good));
    // Refused at parse, like any malformed record: no insert failed, nothing was isolated.
    expect(w.metrics()).toMatchObject({ inserted: 10, malformed: 2, refused: 0, failedBatches: 0 });
    const failed = await q.getFailed();
    expect(failed.map((job) => job.id).sort()).toEqual([yearZero.id, farOffset.id].sort());
    for (const job of failed) {
      expect(job.attemptsMade).toBe(1);
      expect(job.failedReason).toMatch(/^invalid audit record: timestamp: /);
    }
    expect(logger.entries.filter((e) => e.message.startsWith('malformed'))).toHaveLength(2);
  });

  it('retries the job of a record whose insert fails for a reason other than its data', async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix, FAST_RETRIES);
    const records = makeRecords(10);
    const victim = records[4] as AuditRecord;
    await add(q, records);
    const w = worker({ prefix, store: refusingOnce(victim.id) });
    await waitFor(async () => (await settled(q)) === 10, 'every job done or failed');
    expect(await storedIds(t.store)).toEqual(sortedIds(records));
    expect(await q.getFailedCount()).toBe(0);
    expect((await q.getJob(victim.id))?.attemptsMade).toBe(2);
    expect(w.metrics()).toMatchObject({ inserted: 10, refused: 1 });
  });

  it("counts its jobs completed, retried and failed, and reads the queue's length by state", async () => {
    const prefix = uniquePrefix();
    const q = queue(prefix, FAST_RETRIES);
    const records = makeRecords(6);
    const [bad, victim] = records as [AuditRecord, AuditRecord];
    // The real store, refusing `bad` by its data (its job fails at once) and `victim` once
    // with an error that is no data exception (its job is retried, then completes).
    const store = refusingOnce(victim.id, refusing([bad.id]));
    const w = worker({ prefix, store, autorun: false });
    await add(q, records);
    await add(q, [{ kind: 'not a record' }], () => 'malformed');
    const later = makeRecords(2, 6);
    await q.addBulk(
      later.map((data) => ({
        name: AUDIT_JOB_NAME,
        data,
        opts: { jobId: data.id, delay: 3_600_000 },
      })),
    );
    expect(await w.jobCounts()).toEqual({ waiting: 7, active: 0, delayed: 2, failed: 0 });

    w.run();
    await waitFor(async () => (await settled(q)) === 7, 'every waiting job done or failed');
    await waitFor(() => w.metrics().completedJobs === 5, 'the completions to be counted');
    expect(w.metrics()).toMatchObject({
      completedJobs: 5,
      retriedJobs: 1,
      failedJobs: 2,
      processed: 5,
      refused: 2,
      malformed: 1,
    });
    expect(await w.jobCounts()).toEqual({ waiting: 0, active: 0, delayed: 2, failed: 2 });
    // A paused queue's jobs are waiting too.
    await q.pause();
    await add(q, makeRecords(3, 8));
    expect(await w.jobCounts()).toEqual({ waiting: 3, active: 0, delayed: 2, failed: 2 });
  });

  it("answers a reading of the queue's length made while Redis is down once it is back", async () => {
    const server = await startRedisServer();
    const w = worker({ connection: server.url, prefix: uniquePrefix(server.url) });
    await w.waitUntilReady();
    await w.jobCounts();
    await server.kill();
    let answer: unknown;
    void w.jobCounts().then(
      (counts) => {
        answer = counts;
      },
      (error: unknown) => {
        answer = error;
      },
    );
    await new Promise((tick) => setTimeout(tick, 1000));
    expect(answer).toBeUndefined();
    await server.start();
    await waitFor(() => answer !== undefined, 'the reading to be answered', 10_000);
    expect(answer).toEqual({ waiting: 0, active: 0, delayed: 0, failed: 0 });
  });

  it('refuses option values out of range', () => {
    expect(() => createAuditWorker({ store: t.store, batchSize: 0 })).toThrow(RangeError);
    expect(() => createAuditWorker({ store: t.store, concurrency: 1.5 })).toThrow(/concurrency/);
  });
});
