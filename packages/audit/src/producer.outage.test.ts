/**
 * The producer against a Redis that dies and comes back: a private `redis-server` per test,
 * killed by pid with SIGKILL and restarted on the same port.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  captureLogger,
  defer,
  journalIds,
  makeRecords,
  readJobs,
  startRedisServer,
  tempDir,
  uniquePrefix,
  waitFor,
} from '../test/helpers.ts';
import { type AuditRecord, createAuditProducer } from './index.ts';

const ids = (records: readonly { id?: string | undefined }[]): Array<string | undefined> =>
  records.map((r) => r.id);

describe('audit producer when Redis goes away', () => {
  it('buffers, journals and replays every record exactly once, in order', async () => {
    const server = await startRedisServer();
    const prefix = uniquePrefix(server.url);
    const journalPath = join(await tempDir(), 'journal.ndjson');
    const logger = captureLogger();
    const audit = createAuditProducer({
      connection: server.url,
      prefix,
      journalPath,
      logger,
      batchSize: 20,
      flushIntervalMs: 10,
      maxBuffered: 10,
      maxReconnectDelayMs: 100,
    });
    defer(() => audit.close());

    const before = makeRecords(50);
    for (const record of before) audit.enqueue(record);
    await audit.flush();
    expect(audit.metrics()).toMatchObject({ sent: 50, buffered: 0 });
    // The test server has no persistence: snapshot what it holds so the restart keeps it.
    await server.save();

    // Enqueued but not yet sent when Redis dies (the flush timer has not fired).
    const unsent = makeRecords(5, 50);
    for (const record of unsent) audit.enqueue(record);
    await server.kill();

    const during = makeRecords(60, 55);
    for (const record of during) audit.enqueue(record);
    await waitFor(() => audit.metrics().buffered <= 10, 'the overflow to spill');
    const spilled = await journalIds(journalPath);
    expect(spilled.length).toBeGreaterThanOrEqual(65 - 10);
    expect(spilled).toEqual(ids([...unsent, ...during]).slice(0, spilled.length));
    expect(audit.metrics().journalPending).toBe(spilled.length);

    await server.start();
    const after = makeRecords(20, 115);
    for (const record of after) audit.enqueue(record);
    await waitFor(() => {
      const { buffered, journalPending } = audit.metrics();
      return buffered === 0 && journalPending === 0;
    }, 'everything to be delivered');

    const jobs = await readJobs(server.url, prefix);
    expect(ids(jobs)).toEqual(ids([...before, ...unsent, ...during, ...after]));
    const metrics = audit.metrics();
    expect(metrics.journaled).toBeGreaterThan(0);
    expect(metrics.replayed).toBe(metrics.journaled);
    expect(metrics).toMatchObject({ enqueued: 135, dropped: 0, rejected: 0 });
    expect((await stat(journalPath)).size).toBe(0);
    const messages = logger.entries.map((entry) => `${entry.level}: ${entry.message}`);
    expect(messages).toContain('warn: audit queue unreachable; buffering records');
    expect(messages).toContain('info: audit queue reachable again; delivering buffered records');
  });

  it('loses nothing that was in flight when Redis died (durable Redis, steady stream)', async () => {
    const server = await startRedisServer({ durable: true });
    const prefix = uniquePrefix(server.url);
    const audit = createAuditProducer({
      connection: server.url,
      prefix,
      journalPath: join(await tempDir(), 'journal.ndjson'),
      logger: captureLogger(),
      batchSize: 8,
      flushIntervalMs: 1,
      maxBuffered: 30,
      sendTimeoutMs: 500,
      maxReconnectDelayMs: 50,
    });
    defer(() => audit.close());
    await waitFor(() => audit.metrics().connected, 'the producer to connect');

    const all = makeRecords(1500);
    let next = 0;
    const feed = setInterval(() => {
      for (let i = 0; i < 5 && next < all.length; i++) audit.enqueue(all[next++] as AuditRecord);
    }, 1);
    defer(async () => clearInterval(feed));
    const pause = (ms: number) => new Promise((tick) => setTimeout(tick, ms));

    await pause(150);
    const sentBeforeKill = audit.metrics().sent;
    await server.kill();
    await pause(150);
    await server.start();
    await waitFor(() => next === all.length, 'the feed to finish');
    clearInterval(feed);
    await waitFor(() => {
      const { buffered, journalPending } = audit.metrics();
      return buffered === 0 && journalPending === 0;
    }, 'everything to be delivered');

    expect(sentBeforeKill).toBeGreaterThan(0);
    expect(ids(await readJobs(server.url, prefix))).toEqual(ids(all));
    expect(audit.metrics()).toMatchObject({ enqueued: all.length, dropped: 0 });
    expect(audit.metrics().journaled).toBeGreaterThan(0);
  });

  it('holds records while Redis is not up yet and delivers them once it is', async () => {
    const server = await startRedisServer();
    const prefix = uniquePrefix(server.url);
    await server.kill();
    const audit = createAuditProducer({
      connection: server.url,
      prefix,
      journalPath: join(await tempDir(), 'journal.ndjson'),
      logger: captureLogger(),
      maxReconnectDelayMs: 100,
    });
    defer(() => audit.close());
    const records = makeRecords(40);
    for (const record of records) audit.enqueue(record);
    await new Promise((tick) => setTimeout(tick, 200));
    expect(audit.metrics()).toMatchObject({ buffered: 40, sent: 0, connected: false });

    await server.start();
    await audit.flush();
    expect(ids(await readJobs(server.url, prefix))).toEqual(ids(records));
    expect(audit.metrics()).toMatchObject({ buffered: 0, sent: 40, journaled: 0, dropped: 0 });
  });
});
