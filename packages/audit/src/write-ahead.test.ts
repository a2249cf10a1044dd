/**
 * The write-ahead log on real files, and a producer with it killed by SIGKILL in a child
 * process with records still waiting for their batch: the next producer on its journal
 * delivers every one of them (without the log they are lost, which the control case shows).
 */
import { readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnChild } from '../test/child.ts';
import {
  captureLogger,
  defer,
  freePort,
  makeRecords,
  readJobs,
  SHARED_REDIS_URL,
  tempDir,
  uniquePrefix,
} from '../test/helpers.ts';
import { type AuditRecord, createAuditProducer } from './index.ts';
import {
  HANDOVER_BYTES,
  openWriteAhead,
  recoverWriteAhead,
  writeAheadPaths,
} from './write-ahead.ts';

const lineOf = (record: AuditRecord): string => `${JSON.stringify(record)}\n`;

async function idsIn(path: string): Promise<string[]> {
  const text = await readFile(path, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => (JSON.parse(line) as AuditRecord).id);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

describe('write-ahead segments', () => {
  it('recovers the older segment first, after what the journal holds, dropping a torn line', async () => {
    const journal = join(await tempDir(), 'journal.ndjson');
    const [old1, old2, new1, new2, kept] = makeRecords(5) as [
      AuditRecord,
      AuditRecord,
      AuditRecord,
      AuditRecord,
      AuditRecord,
    ];
    const [zero, one] = writeAheadPaths(journal) as [string, string];
    await writeFile(journal, lineOf(kept));
    // Segment 0 holds the newer records and a line cut short by the crash.
    await writeFile(zero, `${lineOf(new1)}${lineOf(new2)}{"id":"01J`);
    await writeFile(one, `${lineOf(old1)}${lineOf(old2)}`);

    expect(recoverWriteAhead(journal)).toEqual({ records: 4, tornBytes: 10 });
    expect(await idsIn(journal)).toEqual([kept, old1, old2, new1, new2].map((r) => r.id));
    expect(await exists(zero)).toBe(false);
    expect(await exists(one)).toBe(false);
    // Nothing left: a second recovery moves nothing.
    expect(recoverWriteAhead(journal)).toEqual({ records: 0, tornBytes: 0 });
  });

  it('empties a segment once its records have left memory, and hands over when full', async () => {
    const journal = join(await tempDir(), 'journal.ndjson');
    const [zero, one] = writeAheadPaths(journal) as [string, string];
    const log = openWriteAhead(journal);
    defer(async () => log.close());
    const [a, b] = makeRecords(2) as [AuditRecord, AuditRecord];
    log.append(lineOf(a), 0);
    log.append(lineOf(b), 1);
    log.release(1); // record 1 still in memory
    expect(await idsIn(zero)).toEqual([a.id, b.id]);
    log.release(2);
    expect((await stat(zero)).size).toBe(0);

    // Past the threshold, the next release hands over to the other (empty) segment; the
    // full one is emptied once its records have left memory.
    const big = `${JSON.stringify({ id: a.id, pad: 'x'.repeat(HANDOVER_BYTES) })}\n`;
    log.append(big, 2);
    log.release(2);
    log.append(lineOf(b), 3);
    expect((await stat(zero)).size).toBe(Buffer.byteLength(big));
    expect(await idsIn(one)).toEqual([b.id]);
    log.release(3);
    expect((await stat(zero)).size).toBe(0);
    expect(await idsIn(one)).toEqual([b.id]);

    log.close();
    expect(await exists(zero)).toBe(false);
    expect(await exists(one)).toBe(false);
  });

  it('reports a write the disk refuses (ENOSPC)', async () => {
    const journal = join(await tempDir(), 'journal.ndjson');
    const [zero] = writeAheadPaths(journal) as [string];
    await symlink('/dev/full', zero);
    const log = openWriteAhead(journal);
    defer(async () => log.close());
    const [record] = makeRecords(1) as [AuditRecord];
    expect(() => log.append(lineOf(record), 0)).toThrow(
      expect.objectContaining({ code: 'ENOSPC' }),
    );
  });
});

describe('audit producer with the write-ahead log', () => {
  it('has each record on disk when enqueue returns, and empties the log once Redis took them', async () => {
    const prefix = uniquePrefix();
    const journalPath = join(await tempDir(), 'journal.ndjson');
    const audit = createAuditProducer({
      connection: SHARED_REDIS_URL,
      prefix,
      journalPath,
      writeAhead: true,
      flushIntervalMs: 60_000,
      logger: captureLogger(),
    });
    defer(() => audit.close());
    const records = makeRecords(5);
    for (const record of records) audit.enqueue(record);
    const [zero, one] = writeAheadPaths(journalPath) as [string, string];
    expect([...(await idsIn(zero)), ...(await idsIn(one))]).toEqual(records.map((r) => r.id));

    await audit.flush();
    expect((await readJobs(SHARED_REDIS_URL, prefix)).map((job) => job.id)).toEqual(
      records.map((r) => r.id),
    );
    expect((await stat(zero)).size + (await stat(one)).size).toBe(0);
    await audit.close();
    expect(await exists(zero)).toBe(false);
    expect(await exists(one)).toBe(false);
  });

  it('rejects a record it cannot serialise at enqueue', async () => {
    const logger = captureLogger();
    const audit = createAuditProducer({
      connection: SHARED_REDIS_URL,
      prefix: uniquePrefix(),
      journalPath: join(await tempDir(), 'journal.ndjson'),
      writeAhead: true,
      logger,
    });
    defer(() => audit.close());
    const [record] = makeRecords(1) as [AuditRecord];
    audit.enqueue({ ...record, durationMs: 10n as unknown as number });
    expect(audit.metrics()).toMatchObject({
      enqueued: 0,
      buffered: 0,
      rejectedBy: { unserialisable: 1 },
    });
    expect(logger.entries).toContainEqual(
      expect.objectContaining({ level: 'error', message: 'audit records rejected' }),
    );
  });

  it.each([
    { writeAhead: true, delivered: 'all' },
    { writeAhead: false, delivered: 'none' },
  ])(
    'after a SIGKILL with records waiting in memory, the next producer delivers $delivered (writeAhead $writeAhead)',
    async ({ writeAhead }) => {
      const prefix = uniquePrefix();
      const journalPath = join(await tempDir(), 'journal.ndjson');
      // A Redis that never answers: the child's records stay in memory until the kill (with the
      // shared one, its connection could be ready first, and the pump sends what it holds then).
      const child = spawnChild('./producer-child.ts', {
        REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
        PREFIX: prefix,
        JOURNAL: journalPath,
        COUNT: '25',
        WRITE_AHEAD: writeAhead ? '1' : '0',
      });
      const { enqueued, metrics } = (await child.line((l) => 'enqueued' in l)) as {
        enqueued: string[];
        metrics: { sent: number };
      };
      expect(enqueued).toHaveLength(25);
      expect(metrics.sent).toBe(0);
      child.process.kill('SIGKILL');
      await child.exited;

      const logger = captureLogger();
      const next = createAuditProducer({
        connection: SHARED_REDIS_URL,
        prefix,
        journalPath,
        logger,
      });
      defer(() => next.close());
      await next.flush();
      const delivered = (await readJobs(SHARED_REDIS_URL, prefix)).map((job) => job.id);
      if (writeAhead) {
        expect(delivered).toEqual(enqueued);
        expect(next.metrics()).toMatchObject({ writeAheadRecovered: 25, replayed: 25 });
        expect(logger.entries).toContainEqual(
          expect.objectContaining({
            level: 'warn',
            message: 'moved the audit write-ahead log of a run that did not close to the journal',
            fields: expect.objectContaining({ records: 25 }),
          }),
        );
      } else {
        expect(delivered).toEqual([]);
        expect(next.metrics()).toMatchObject({ writeAheadRecovered: 0, replayed: 0 });
      }
      for (const path of writeAheadPaths(journalPath)) expect(await exists(path)).toBe(false);
    },
  );
});
