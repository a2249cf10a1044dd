import { access, readFile, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defer, tempDir } from '../test/helpers.ts';
import {
  AuditJournalInUseError,
  assertJournalFree,
  createJournal,
  type Journal,
  lockJournal,
} from './journal.ts';
import { assertAuditStoreFree } from './store.ts';

async function journalIn(name = 'journal.ndjson'): Promise<{ journal: Journal; path: string }> {
  const path = join(await tempDir(), 'sub', name);
  const journal = createJournal(path);
  defer(() => journal.close());
  return { journal, path };
}

async function readAll(journal: Journal, max: number): Promise<unknown[]> {
  const out: unknown[] = [];
  for (let batch = await journal.read(max); batch; batch = await journal.read(max)) {
    out.push(...batch.records);
    await journal.commit(batch);
  }
  return out;
}

describe('journal', () => {
  it('creates nothing until the first append', async () => {
    const { journal, path } = await journalIn();
    expect(await journal.open()).toBe(0);
    await expect(access(path)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('reads back appended records oldest first, and empties the file once all are committed', async () => {
    const { journal, path } = await journalIn();
    await journal.open();
    await journal.append([{ n: 1 }, { n: 2 }, { n: 3 }]);
    await journal.append([{ n: 4 }]);
    expect(journal.pending).toBe(4);

    const first = await journal.read(3);
    expect(first?.records).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    // Not committed: read again, the same lines come back.
    expect((await journal.read(3))?.records).toEqual(first?.records);
    if (!first) throw new Error('no batch');
    await journal.commit(first);
    expect(journal.pending).toBe(1);
    expect((await stat(path)).size).toBeGreaterThan(0);

    await journal.append([{ n: 5 }]);
    expect(await readAll(journal, 10)).toEqual([{ n: 4 }, { n: 5 }]);
    expect(journal.pending).toBe(0);
    expect((await stat(path)).size).toBe(0);
  });

  it('counts the lines a previous run left, closing a torn tail as one unreadable line', async () => {
    const { journal, path } = await journalIn();
    await createJournal(path).appendSync([{ n: 1 }, { n: 2 }]);
    await writeFile(path, '{"n":3', { flag: 'a' });

    expect(await journal.open()).toBe(3);
    expect(await readFile(path, 'utf8')).toBe('{"n":1}\n{"n":2}\n{"n":3\n');
    const batch = await journal.read(10);
    expect(batch).toMatchObject({ records: [{ n: 1 }, { n: 2 }], corrupt: 1, lines: 3 });
  });

  it('reads a line longer than its read chunk', async () => {
    const { journal } = await journalIn();
    await journal.open();
    const big = { text: 'x'.repeat(700_000) };
    await journal.append([{ n: 0 }, big, { n: 2 }]);
    expect(await readAll(journal, 1)).toEqual([{ n: 0 }, big, { n: 2 }]);
  });

  it('leaves out what JSON cannot write, and says so', async () => {
    const { journal } = await journalIn();
    await journal.open();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const result = await journal.append([{ n: 1 }, cyclic, 10n, { n: 2 }]);
    expect(result).toEqual({ written: 2, unserializable: [cyclic, 10n] });
    expect(await readAll(journal, 10)).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('skips blank lines without counting them as unreadable', async () => {
    const { journal, path } = await journalIn();
    await createJournal(path).appendSync([{ n: 1 }]);
    await writeFile(path, '\n  \n{"n":2}\n', { flag: 'a' });
    await journal.open();
    expect(await journal.read(10)).toMatchObject({ records: [{ n: 1 }, { n: 2 }], corrupt: 0 });
  });

  it('adopts lines appended behind its back instead of truncating them', async () => {
    const { journal, path } = await journalIn();
    await journal.open();
    await journal.append([{ n: 1 }]);
    const batch = await journal.read(10);
    createJournal(path).appendSync([{ n: 2 }]); // e.g. a closed producer's straggler
    if (!batch) throw new Error('no batch');
    await journal.commit(batch);
    expect(journal.pending).toBe(1);
    expect(await readAll(journal, 10)).toEqual([{ n: 2 }]);
    expect((await stat(path)).size).toBe(0);
  });
});

describe('journal lock', () => {
  it('lets one producer hold a journal at a time, in this process', async () => {
    const path = join(await tempDir(), 'journal.ndjson');
    const release = lockJournal(path);
    expect(() => lockJournal(path)).toThrow(AuditJournalInUseError);
    expect(await readFile(`${path}.lock`, 'utf8')).toBe(`${process.pid}\n`);
    release();
    await expect(access(`${path}.lock`)).rejects.toMatchObject({ code: 'ENOENT' });
    lockJournal(path)();
  });

  it('refuses a journal held by another live process, naming it', async () => {
    const path = join(await tempDir(), 'journal.ndjson');
    await writeFile(`${path}.lock`, `${process.ppid}\n`);
    let caught: unknown;
    try {
      lockJournal(path);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(AuditJournalInUseError);
    expect(caught).toMatchObject({ code: 'JOURNAL_IN_USE', path, pid: process.ppid });
  });

  it('checks a journal without locking it: assertJournalFree throws what lockJournal would', async () => {
    const dir = await tempDir();
    const path = join(dir, 'journal.ndjson');
    assertJournalFree(path);
    await expect(access(`${path}.lock`)).rejects.toMatchObject({ code: 'ENOENT' });
    // A stale lock (process gone) passes, like a free one.
    await writeFile(`${path}.lock`, '2147483646\n');
    assertJournalFree(path);
    await writeFile(`${path}.lock`, `${process.ppid}\n`);
    expect(() => assertJournalFree(path)).toThrow(AuditJournalInUseError);
    // Held by this process: in use too; the path is named resolved.
    const other = join(dir, 'other.ndjson');
    const release = lockJournal(other);
    try {
      expect(() => assertJournalFree(relative(process.cwd(), other))).toThrow(
        expect.objectContaining({ code: 'JOURNAL_IN_USE', path: other, pid: process.pid }),
      );
    } finally {
      release();
    }
  });

  it('checks a PGlite directory without opening it: assertAuditStoreFree', async () => {
    const dir = join(await tempDir(), 'pglite');
    assertAuditStoreFree({ pgliteDir: dir });
    await writeFile(`${dir}.lock`, `${process.ppid}\n`);
    expect(() => assertAuditStoreFree({ pgliteDir: dir })).toThrow(
      expect.objectContaining({
        name: 'AuditStoreError',
        code: 'STORE_IN_USE',
        cause: expect.objectContaining({ path: dir, pid: process.ppid }),
      }),
    );
    // PostgreSQL: nothing to check.
    assertAuditStoreFree({ databaseUrl: 'postgres://x', pgliteDir: dir });
    await expect(access(dir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('takes over a lock whose process is gone', async () => {
    const path = join(await tempDir(), 'journal.ndjson');
    await writeFile(`${path}.lock`, '2147483646\n');
    const release = lockJournal(path);
    expect(await readFile(`${path}.lock`, 'utf8')).toBe(`${process.pid}\n`);
    release();
  });
});
