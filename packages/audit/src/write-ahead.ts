/**
 * The producer's write-ahead log (`writeAhead`): every record is written to it, one `write`
 * into the page cache (no fsync), before `enqueue` returns. A record then survives its
 * process being killed (SIGKILL, the OOM killer, a crash) while it waits in memory for its
 * batch; only the machine going down can still lose it.
 *
 * Two segment files beside the journal (`<journal>.wal.0`, `<journal>.wal.1`) take turns.
 * Records go to the current one; once every record of the other has left memory (Redis took
 * it, or it was spilled to the journal) that one is emptied, and the current one hands over
 * once it has grown past {@link HANDOVER_BYTES}. Under steady load each segment therefore
 * holds about one batch interval of records.
 *
 * A producer that starts on a journal first moves whatever segments a previous run left
 * into the journal ({@link recoverWriteAhead}), which it then replays as usual. That run may
 * have sent some of them already: they are sent again, and the job ids and the store's
 * `ON CONFLICT (id) DO NOTHING` make a record delivered twice one row.
 *
 * The journal's lock (`<journal>.lock`) covers the segments: one writer per file.
 */
import {
  appendFileSync,
  closeSync,
  ftruncateSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';

/** A segment hands over to the other once it holds this much (and the other is empty). */
export const HANDOVER_BYTES = 1 << 20;

const NEWLINE = 0x0a;
const SEGMENTS = 2;

/** The segment files of the journal at `journalPath`, in no particular order. */
export function writeAheadPaths(journalPath: string): string[] {
  return Array.from({ length: SEGMENTS }, (_, i) => `${journalPath}.wal.${i}`);
}

/** What {@link recoverWriteAhead} moved. */
export interface WriteAheadRecovery {
  /** Records (whole lines) moved into the journal. */
  records: number;
  /** Bytes of a line cut short by the crash, dropped (a record whose write never finished). */
  tornBytes: number;
}

function readIfPresent(path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** The `id` of a segment's first record: ULIDs sort in time, so the older segment first. */
function firstId(content: Buffer): string {
  const end = content.indexOf(NEWLINE);
  try {
    const id = (JSON.parse(content.toString('utf8', 0, end)) as { id?: unknown }).id;
    return typeof id === 'string' ? id : '';
  } catch {
    return '';
  }
}

/**
 * Move the records of segments left by a previous run into the journal at `journalPath`
 * (appended, oldest segment first), then remove the segments. Call with the journal's lock
 * held and before the journal is opened.
 * @throws the error of a read or write that failed (nothing is removed then).
 */
export function recoverWriteAhead(journalPath: string): WriteAheadRecovery {
  const found: Array<{ path: string; whole: Buffer; torn: number }> = [];
  for (const path of writeAheadPaths(journalPath)) {
    const content = readIfPresent(path);
    if (content === undefined) continue;
    const end = content.lastIndexOf(NEWLINE) + 1;
    found.push({ path, whole: content.subarray(0, end), torn: content.length - end });
  }
  found.sort((a, b) => (firstId(a.whole) < firstId(b.whole) ? -1 : 1));
  let records = 0;
  let tornBytes = 0;
  for (const { whole, torn } of found) {
    if (whole.length > 0) {
      appendFileSync(journalPath, whole);
      for (let i = whole.indexOf(NEWLINE); i !== -1; i = whole.indexOf(NEWLINE, i + 1)) records++;
    }
    tornBytes += torn;
  }
  for (const { path } of found) rmSync(path, { force: true });
  return { records, tornBytes };
}

/** An open write-ahead log. */
export interface WriteAheadLog {
  /**
   * Write one record's line (ending in a newline) as the record numbered `seq` (numbers
   * only grow).
   * @throws the error of a write that failed; the segment is cut back to what it held.
   */
  append(line: string, seq: number): void;
  /** Every record numbered below `lowestPending` has left memory: empty what held only those. */
  release(lowestPending: number): void;
  /** Close and remove the segments: call once nothing they hold is needed any more. */
  close(): void;
}

interface Segment {
  readonly path: string;
  fd: number;
  bytes: number;
  /** The highest record number written since the segment was last emptied; -1 when empty. */
  lastSeq: number;
}

/**
 * Create (empty) and open the segments of the journal at `journalPath`: run
 * {@link recoverWriteAhead} first, or what they held is gone.
 */
export function openWriteAhead(journalPath: string): WriteAheadLog {
  const segments: Segment[] = [];
  try {
    for (const path of writeAheadPaths(journalPath)) {
      writeFileSync(path, '');
      // Appending: after an ftruncate the next write lands at the new end, not in a hole.
      segments.push({ path, fd: openSync(path, 'a'), bytes: 0, lastSeq: -1 });
    }
  } catch (error) {
    for (const segment of segments) closeSync(segment.fd);
    throw error;
  }
  let current = 0;
  const empty = (segment: Segment): void => {
    ftruncateSync(segment.fd, 0);
    segment.bytes = 0;
    segment.lastSeq = -1;
  };
  const cutBack = (segment: Segment): void => {
    try {
      ftruncateSync(segment.fd, segment.bytes);
    } catch {
      // The write's own failure is what the caller hears of.
    }
  };
  return {
    append(line, seq) {
      const segment = segments[current] as Segment;
      const length = Buffer.byteLength(line);
      let written = -1;
      try {
        written = writeSync(segment.fd, line);
      } finally {
        // A failed or short write (disk full) is cut back off, so the next line does not
        // continue a torn one.
        if (written !== length) cutBack(segment);
      }
      if (written !== length)
        throw Object.assign(new Error(`short write to ${segment.path}`), { code: 'ENOSPC' });
      segment.bytes += length;
      segment.lastSeq = seq;
    },

    release(lowestPending) {
      for (const segment of segments)
        if (segment.lastSeq >= 0 && segment.lastSeq < lowestPending) empty(segment);
      const other = segments[(current + 1) % SEGMENTS] as Segment;
      if ((segments[current] as Segment).bytes >= HANDOVER_BYTES && other.lastSeq < 0)
        current = (current + 1) % SEGMENTS;
    },

    close() {
      for (const segment of segments) {
        try {
          closeSync(segment.fd);
        } catch {
          // Already closed: nothing to do.
        }
        rmSync(segment.path, { force: true });
      }
    },
  };
}
