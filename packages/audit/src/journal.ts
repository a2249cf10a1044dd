/**
 * The producer's spill file: an append-only NDJSON journal of records that Redis has not
 * accepted yet, read back oldest first and truncated only once all of it was accepted.
 *
 * One writer per file, and no concurrent operations on one journal: the producer runs every
 * journal operation from its single pump. A line is written whole with its newline in one
 * append; a write that fails is cut back off the file, so a later append never continues a
 * torn line. A torn tail left by a crash is closed with a newline when the journal is
 * opened and then counts as one unreadable line.
 */
import { appendFileSync, rmSync } from 'node:fs';
import { type FileHandle, open, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { makeDirectory } from './directory.ts';
import { claimPidFile, journalHolder, journalLockPath } from './lock.ts';

const NEWLINE = 0x0a;
const SCAN_CHUNK_BYTES = 1 << 20;
const READ_CHUNK_BYTES = 256 * 1024;

/** A journal file is held by another producer (this process or another live one). */
export class AuditJournalInUseError extends Error {
  override readonly name = 'AuditJournalInUseError';
  readonly code = 'JOURNAL_IN_USE';
  /** The journal file. */
  readonly path: string;
  /** The process holding it. */
  readonly pid: number | undefined;

  constructor(path: string, pid: number | undefined) {
    super(`audit journal ${path} is in use by process ${pid ?? '?'}; give each producer its own`);
    this.path = path;
    this.pid = pid;
  }
}

const heldLocks = new Set<string>();

/**
 * Throw as {@link lockJournal} would when another producer holds the journal at `path`, without
 * taking its lock: a service checks its journal before slower start-up steps (opening a PGlite
 * store takes seconds) to fail fast. A free lock, or one left by a process that is gone, passes.
 * @throws AuditJournalInUseError when a live producer holds it (`path` resolved).
 */
export function assertJournalFree(path: string): void {
  const file = resolve(path);
  if (heldLocks.has(journalLockPath(file))) throw new AuditJournalInUseError(file, process.pid);
  const holder = journalHolder(file);
  // Our own pid is a lock from a previous life of this pid: stale, as lockJournal takes it.
  if (holder !== undefined && holder !== process.pid)
    throw new AuditJournalInUseError(file, holder);
}

/**
 * Take the journal's lock file (`<path>.lock`, holding the owner's pid) so that no two
 * producers, in this process or another, share one journal. A lock left by a process that
 * is gone is taken over. Creates the journal's directory. Returns the release function.
 * @throws AuditJournalInUseError when a live producer holds it.
 */
export function lockJournal(path: string): () => void {
  const lockPath = journalLockPath(path);
  if (heldLocks.has(lockPath)) throw new AuditJournalInUseError(path, process.pid);
  makeDirectory(dirname(path));
  // Our own pid in it is a lock from a previous life of a process with the same pid (a
  // restarted container): stale, like that of a process that is gone.
  if (!claimPidFile(lockPath)) throw new AuditJournalInUseError(path, journalHolder(path));
  heldLocks.add(lockPath);
  return () => {
    heldLocks.delete(lockPath);
    rmSync(lockPath, { force: true });
  };
}

async function countLines(file: FileHandle, from: number, to: number): Promise<number> {
  const buffer = Buffer.allocUnsafe(Math.min(SCAN_CHUNK_BYTES, Math.max(1, to - from)));
  let lines = 0;
  for (let position = from; position < to; ) {
    const { bytesRead } = await file.read(
      buffer,
      0,
      Math.min(buffer.length, to - position),
      position,
    );
    if (bytesRead === 0) break;
    const view = buffer.subarray(0, bytesRead);
    for (let i = view.indexOf(NEWLINE); i !== -1; i = view.indexOf(NEWLINE, i + 1)) lines++;
    position += bytesRead;
  }
  return lines;
}

/** Records read from the journal, to be committed once Redis accepted them. */
export interface JournalBatch {
  /** The parsed lines, oldest first. */
  records: unknown[];
  /** Lines that were not JSON (a torn write); skipped, and gone once committed. */
  corrupt: number;
  /** Lines consumed, blank ones included. */
  lines: number;
  /** Bytes consumed. */
  bytes: number;
}

/** What an append wrote. */
export interface JournalAppendResult {
  written: number;
  /** Records `JSON.stringify` could not write (cycles, BigInt, ...); not in the journal. */
  unserializable: unknown[];
}

/** An NDJSON journal file. */
export interface Journal {
  readonly path: string;
  /** Lines written and not yet committed. */
  readonly pending: number;
  /**
   * Look at what a previous run left (nothing is created when there is no file yet) and
   * close a torn tail. Resolves with the number of lines waiting to be replayed.
   */
  open(): Promise<number>;
  /** Append records, one line each, in order. Rejects when the file cannot be written. */
  append(records: readonly unknown[]): Promise<JournalAppendResult>;
  /** Append synchronously, for use after {@link Journal.close} (shutdown stragglers). */
  appendSync(records: readonly unknown[]): JournalAppendResult;
  /** Read up to `max` of the oldest uncommitted lines; `undefined` when there are none. */
  read(max: number): Promise<JournalBatch | undefined>;
  /** Mark a batch from {@link Journal.read} as delivered; empties the file once all is. */
  commit(batch: JournalBatch): Promise<void>;
  /** Sync and close the file. */
  close(): Promise<void>;
}

function serialise(records: readonly unknown[]): {
  text: string;
  count: number;
  unserializable: unknown[];
} {
  const lines: string[] = [];
  const unserializable: unknown[] = [];
  for (const record of records) {
    let text: string | undefined;
    try {
      text = JSON.stringify(record);
    } catch {
      text = undefined;
    }
    if (typeof text === 'string') lines.push(text);
    else unserializable.push(record);
  }
  return {
    text: lines.length > 0 ? `${lines.join('\n')}\n` : '',
    count: lines.length,
    unserializable,
  };
}

function isNotFound(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === 'ENOENT';
}

/** A journal at `path` (an absolute path; its directory is made on the first append). */
export function createJournal(path: string): Journal {
  let handle: FileHandle | undefined;
  let size = 0;
  let readOffset = 0;
  let pending = 0;

  const ensureOpen = async (): Promise<FileHandle> => {
    if (handle) return handle;
    makeDirectory(dirname(path));
    const opened = await open(path, 'a+');
    handle = opened;
    size = (await opened.stat()).size;
    return opened;
  };

  return {
    path,
    get pending() {
      return pending;
    },

    async open() {
      try {
        await stat(path);
      } catch (error) {
        if (isNotFound(error)) return 0;
        throw error;
      }
      const file = await ensureOpen();
      let lines = await countLines(file, 0, size);
      const tail = Buffer.alloc(1, NEWLINE);
      if (size > 0) await file.read(tail, 0, 1, size - 1);
      if (tail[0] !== NEWLINE) {
        await file.appendFile('\n');
        size += 1;
        lines += 1;
      }
      readOffset = 0;
      pending = lines;
      return pending;
    },

    async append(records) {
      const { text, count, unserializable } = serialise(records);
      if (count === 0) return { written: 0, unserializable };
      const data = Buffer.from(text);
      const file = await ensureOpen();
      try {
        await file.appendFile(data);
      } catch (error) {
        // Cut a partial write back off so the next append does not continue a torn line.
        await file.truncate(size).catch(() => undefined);
        throw error;
      }
      size += data.length;
      pending += count;
      return { written: count, unserializable };
    },

    appendSync(records) {
      const { text, count, unserializable } = serialise(records);
      if (count === 0) return { written: 0, unserializable };
      makeDirectory(dirname(path));
      appendFileSync(path, text);
      return { written: count, unserializable };
    },

    async read(max) {
      if (pending === 0 || !handle || readOffset >= size) {
        pending = 0;
        return undefined;
      }
      const file = handle;
      for (let chunk = READ_CHUNK_BYTES; ; chunk *= 2) {
        const want = Math.min(chunk, size - readOffset);
        const buffer = Buffer.allocUnsafe(want);
        const { bytesRead } = await file.read(buffer, 0, want, readOffset);
        const view = buffer.subarray(0, bytesRead);
        const records: unknown[] = [];
        let corrupt = 0;
        let lines = 0;
        let position = 0;
        while (lines < max) {
          const end = view.indexOf(NEWLINE, position);
          if (end === -1) break;
          const text = view.toString('utf8', position, end);
          lines++;
          position = end + 1;
          if (text.trim() === '') continue;
          try {
            records.push(JSON.parse(text));
          } catch {
            corrupt++;
          }
        }
        if (lines > 0) return { records, corrupt, lines, bytes: position };
        if (want === size - readOffset) {
          // No newline before the end: cannot happen after open() closed the tail, but
          // never loop on it: the rest counts as one unreadable line.
          return { records: [], corrupt: 1, lines: Math.min(1, pending), bytes: size - readOffset };
        }
        // One line longer than the chunk: read more.
      }
    },

    async commit(batch) {
      readOffset += batch.bytes;
      pending = Math.max(0, pending - batch.lines);
      if (readOffset >= size && handle) {
        // Someone appended behind our back (a closed producer's stragglers): adopt, not cut.
        const actual = (await handle.stat()).size;
        if (actual > size) {
          pending += await countLines(handle, size, actual);
          size = actual;
          return;
        }
        await handle.truncate(0);
        size = 0;
        readOffset = 0;
        pending = 0;
      }
    },

    async close() {
      const file = handle;
      handle = undefined;
      if (!file) return;
      await file.datasync().catch(() => undefined);
      await file.close();
    },
  };
}
