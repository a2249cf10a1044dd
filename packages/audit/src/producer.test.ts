import { mkdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  captureLogger,
  defer,
  freePort,
  journalIds,
  makeRecords,
  readJobs,
  SHARED_REDIS_URL,
  tempDir,
  uniquePrefix,
  waitFor,
} from '../test/helpers.ts';
import {
  AUDIT_JOB_NAME,
  AuditJournalInUseError,
  type AuditProducer,
  type AuditProducerOptions,
  type AuditRecord,
  createAuditProducer,
} from './index.ts';

async function producer(options: AuditProducerOptions): Promise<AuditProducer> {
  const journalPath = options.journalPath ?? join(await tempDir(), 'journal.ndjson');
  const created = createAuditProducer({ logger: captureLogger(), ...options, journalPath });
  defer(() => created.close());
  return created;
}

const ids = (records: readonly { id?: string | undefined }[]): Array<string | undefined> =>
  records.map((r) => r.id);

describe('audit producer with Redis up', () => {
  it('delivers records as jobs, in order, in batches, with the record id as job id', async () => {
    const prefix = uniquePrefix();
    const audit = await producer({ connection: SHARED_REDIS_URL, prefix, batchSize: 100 });
    const records = makeRecords(250);
    for (const record of records) audit.enqueue(record);
    await audit.flush();

    const jobs = await readJobs(SHARED_REDIS_URL, prefix);
    expect(ids(jobs)).toEqual(ids(records));
    expect(jobs.map((job) => job.data)).toEqual(records);
    expect(new Set(jobs.map((job) => job.name))).toEqual(new Set([AUDIT_JOB_NAME]));
    expect(audit.metrics()).toMatchObject({
      enqueued: 250,
      sent: 250,
      batches: 3,
      buffered: 0,
      journaled: 0,
      dropped: 0,
    });
  });

  it('stores a record enqueued twice as one job', async () => {
    const prefix = uniquePrefix();
    const audit = await producer({ connection: SHARED_REDIS_URL, prefix });
    const [first, second] = makeRecords(2) as [AuditRecord, AuditRecord];
    audit.enqueue(first);
    audit.enqueue(first);
    await audit.flush();
    audit.enqueue(second);
    audit.enqueue(first);
    await audit.flush();

    expect(ids(await readJobs(SHARED_REDIS_URL, prefix))).toEqual([first.id, second.id]);
    expect(audit.metrics()).toMatchObject({ enqueued: 4, sent: 4 });
  });

  it('enqueue returns before any I/O: the records are only buffered', async () => {
    const prefix = uniquePrefix();
    const audit = await producer({ connection: SHARED_REDIS_URL, prefix, batchSize: 10 });
    await waitFor(() => audit.metrics().connected, 'the producer to connect');
    const records = makeRecords(1000);
    for (const record of records) audit.enqueue(record);

    // Still in the same turn of the event loop: nothing can have been sent.
    expect(audit.metrics()).toMatchObject({
      enqueued: 1000,
      buffered: 1000,
      sent: 0,
      batches: 0,
      connected: true,
    });
    await audit.flush();
    expect(audit.metrics()).toMatchObject({ buffered: 0, sent: 1000, batches: 100 });
  });

  it('sends a lone record after flushIntervalMs without an explicit flush', async () => {
    const prefix = uniquePrefix();
    const audit = await producer({ connection: SHARED_REDIS_URL, prefix, flushIntervalMs: 20 });
    await audit.flush();
    const [record] = makeRecords(1) as [AuditRecord];
    audit.enqueue(record);
    const deadline = Date.now() + 5000;
    while (audit.metrics().sent === 0 && Date.now() < deadline)
      await new Promise((tick) => setTimeout(tick, 10));
    expect(ids(await readJobs(SHARED_REDIS_URL, prefix))).toEqual([record.id]);
  });

  it('refuses a record without a ULID id, logs it, and keeps delivering the others', async () => {
    const prefix = uniquePrefix();
    const logger = captureLogger();
    const audit = await producer({ connection: SHARED_REDIS_URL, prefix, logger });
    const [good] = makeRecords(1) as [AuditRecord];
    audit.enqueue({ ...good, id: 'not-a-ulid' });
    audit.enqueue(good);
    await audit.flush();

    expect(audit.metrics()).toMatchObject({
      rejected: 1,
      rejectedBy: { invalidId: 1, unserialisable: 0 },
      enqueued: 1,
      sent: 1,
    });
    expect(logger.entries).toContainEqual(
      expect.objectContaining({ level: 'error', message: 'audit records rejected' }),
    );
    expect(ids(await readJobs(SHARED_REDIS_URL, prefix))).toEqual([good.id]);
  });

  it('takes a record JSON cannot serialise out of its batch and delivers the rest', async () => {
    const prefix = uniquePrefix();
    const logger = captureLogger();
    const audit = await producer({ connection: SHARED_REDIS_URL, prefix, logger });
    await waitFor(() => audit.metrics().connected, 'the producer to connect');
    const [before, bad, after] = makeRecords(3) as [AuditRecord, AuditRecord, AuditRecord];
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    audit.enqueue(before);
    audit.enqueue(Object.assign(bad, { principal: { type: 'user', claims: cyclic } }));
    audit.enqueue(after);
    await audit.flush();

    expect(ids(await readJobs(SHARED_REDIS_URL, prefix))).toEqual([before.id, after.id]);
    expect(audit.metrics()).toMatchObject({
      rejected: 1,
      rejectedBy: { invalidId: 0, unserialisable: 1 },
      sent: 2,
      dropped: 0,
    });
    expect(logger.entries).toContainEqual(
      expect.objectContaining({
        level: 'error',
        message: 'audit records rejected',
        fields: expect.objectContaining({ why: 'not serialisable', ids: [bad.id] }),
      }),
    );
  });

  it('replays a journal left by a previous run before newer records', async () => {
    const prefix = uniquePrefix();
    const journalPath = join(await tempDir(), 'nested', 'journal.ndjson');
    const old = makeRecords(5);
    await mkdir(dirname(journalPath));
    await writeFile(journalPath, old.map((r) => `${JSON.stringify(r)}\n`).join(''));

    const logger = captureLogger();
    const audit = await producer({ connection: SHARED_REDIS_URL, prefix, journalPath, logger });
    const fresh = makeRecords(3, 5);
    for (const record of fresh) audit.enqueue(record);
    await audit.flush();

    expect(ids(await readJobs(SHARED_REDIS_URL, prefix))).toEqual(ids([...old, ...fresh]));
    expect(audit.metrics()).toMatchObject({ replayed: 5, sent: 8, journalPending: 0, dropped: 0 });
    expect((await stat(journalPath)).size).toBe(0);
    expect(logger.entries).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        message: 'replaying the audit journal of a previous run',
      }),
    );
  });

  it('skips a torn last journal line, counting it as dropped and logging it', async () => {
    const prefix = uniquePrefix();
    const journalPath = join(await tempDir(), 'journal.ndjson');
    const old = makeRecords(3);
    const torn = JSON.stringify(makeRecords(1, 3)[0]).slice(0, 40);
    await writeFile(journalPath, `${old.map((r) => `${JSON.stringify(r)}\n`).join('')}${torn}`);

    const logger = captureLogger();
    const audit = await producer({ connection: SHARED_REDIS_URL, prefix, journalPath, logger });
    await audit.flush();

    expect(ids(await readJobs(SHARED_REDIS_URL, prefix))).toEqual(ids(old));
    expect(audit.metrics()).toMatchObject({
      replayed: 3,
      dropped: 1,
      droppedBy: { journalWrite: 0, journalRead: 1 },
      journalPending: 0,
    });
    expect(logger.entries).toContainEqual(
      expect.objectContaining({ level: 'error', fields: expect.objectContaining({ lost: 1 }) }),
    );
  });
});

describe('audit producer shutdown', () => {
  it('close() delivers what is buffered while Redis is up, leaving no journal', async () => {
    const prefix = uniquePrefix();
    const journalPath = join(await tempDir(), 'journal.ndjson');
    const audit = await producer({ connection: SHARED_REDIS_URL, prefix, journalPath });
    await waitFor(() => audit.metrics().connected, 'the producer to connect');
    const records = makeRecords(700);
    for (const record of records) audit.enqueue(record);
    await audit.close();

    expect(ids(await readJobs(SHARED_REDIS_URL, prefix))).toEqual(ids(records));
    expect(audit.metrics()).toMatchObject({ sent: 700, journaled: 0, connected: false });
    expect(await journalIds(journalPath)).toEqual([]);
  });
});

describe('audit producer journal ownership', () => {
  it('refuses a second producer on the same journal until the first is closed', async () => {
    const journalPath = join(await tempDir(), 'journal.ndjson');
    const first = await producer({ connection: SHARED_REDIS_URL, journalPath });
    expect(() => createAuditProducer({ connection: SHARED_REDIS_URL, journalPath })).toThrow(
      AuditJournalInUseError,
    );
    await first.close();
    await producer({ connection: SHARED_REDIS_URL, journalPath });
  });
});

describe('audit producer with Redis away', () => {
  it('close() journals what it could not deliver, and the next start delivers it', async () => {
    const journalPath = join(await tempDir(), 'journal.ndjson');
    const nowhere = `redis://127.0.0.1:${await freePort()}`;
    const audit = createAuditProducer({
      connection: nowhere,
      journalPath,
      logger: captureLogger(),
      closeTimeoutMs: 200,
    });
    const records = makeRecords(30);
    for (const record of records) audit.enqueue(record);
    await audit.close();

    expect(audit.metrics()).toMatchObject({ journaled: 30, sent: 0, dropped: 0, buffered: 0 });
    expect(await journalIds(journalPath)).toEqual(ids(records));

    // A straggler after close goes straight to the journal.
    const [late] = makeRecords(1, 30) as [AuditRecord];
    audit.enqueue(late);
    expect(await journalIds(journalPath)).toEqual(ids([...records, late]));

    const prefix = uniquePrefix();
    const next = await producer({ connection: SHARED_REDIS_URL, prefix, journalPath });
    await next.flush();
    expect(ids(await readJobs(SHARED_REDIS_URL, prefix))).toEqual(ids([...records, late]));
  });

  it('spills beyond maxBuffered to the journal, oldest first', async () => {
    const journalPath = join(await tempDir(), 'journal.ndjson');
    const nowhere = `redis://127.0.0.1:${await freePort()}`;
    const audit = await producer({
      connection: nowhere,
      journalPath,
      maxBuffered: 10,
      batchSize: 4,
    });
    const records = makeRecords(25);
    for (const record of records) audit.enqueue(record);
    const deadline = Date.now() + 5000;
    while (audit.metrics().buffered > 10 && Date.now() < deadline)
      await new Promise((tick) => setTimeout(tick, 10));

    const { buffered, journaled, journalPending } = audit.metrics();
    expect(buffered).toBeLessThanOrEqual(10);
    expect(journaled).toBe(25 - buffered);
    expect(journalPending).toBe(journaled);
    expect(await journalIds(journalPath)).toEqual(ids(records.slice(0, journaled)));
  });

  it('counts and loudly logs records it cannot journal (the only way to lose one)', async () => {
    const dir = await tempDir();
    await writeFile(join(dir, 'not-a-directory'), '');
    const logger = captureLogger();
    const audit = createAuditProducer({
      connection: `redis://127.0.0.1:${await freePort()}`,
      journalPath: join(dir, 'not-a-directory', 'journal.ndjson'),
      logger,
      maxBuffered: 2,
      closeTimeoutMs: 100,
    });
    for (const record of makeRecords(5)) audit.enqueue(record);
    await audit.close();

    expect(audit.metrics()).toMatchObject({
      enqueued: 5,
      dropped: 5,
      droppedBy: { journalWrite: 5, journalRead: 0 },
      journaled: 0,
      sent: 0,
    });
    const lost = logger.entries.filter(
      (entry) => entry.level === 'error' && entry.message.startsWith('AUDIT RECORDS LOST'),
    );
    expect(lost.length).toBeGreaterThan(0);
    // mkdir reports EEXIST or ENOTDIR for a path through a file.
    expect(lost[0]?.fields).toMatchObject({ error: { code: expect.stringMatching(/^E/) } });
  });
});
