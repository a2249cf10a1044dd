/**
 * `fleet audit export`: every audit record the filters of `audit query` select, page after
 * page along the audit API's `nextCursor`, as NDJSON (one record a line, as the API returns
 * it) on stdout, or into `--out`: a temporary file beside it, moved into place only once the
 * export is complete, so a failed export never leaves a file that looks whole (and one a
 * signal stops leaves no file at all).
 */
import { randomUUID } from 'node:crypto';
import { type FileHandle, link, open, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { isTimeBoundInRange, parseTimeBound } from '@fleet/audit/time';
import { unlessAborted } from '../abortable.ts';
import type { AuditClient } from '../audit-client.ts';
import { CliError } from '../errors.ts';
import type { CliIO } from '../types.ts';
import { formatTime } from './audit-stats.ts';

/** Records asked for per request: the audit API's maximum `limit`. */
export const EXPORT_PAGE_SIZE = 500;

/** `--since` of `audit export` when none is given. */
export const EXPORT_DEFAULT_SINCE = '24h';

/** Options for {@link exportAuditRecords}. */
export interface AuditExportOptions {
  client: AuditClient;
  io: CliIO;
  /** The filters, as {@link recordQuery} made them from the command line (checked already). */
  query: URLSearchParams;
  /** `--since` as given. Default {@link EXPORT_DEFAULT_SINCE}. */
  since?: string | undefined;
  /** `--until` as given. Default: the moment the export starts. */
  until?: string | undefined;
  /** The file to write (absolute), else stdout. */
  out?: string | undefined;
  /** Replace an existing `out`. Default false. */
  force?: boolean | undefined;
  /** The moment `since`/`until` durations count back from. Default: now. */
  now?: Date;
  /**
   * Aborted, with the signal's name (`SIGINT`, `SIGTERM`) as its reason, when the user stops
   * the export: it stops waiting for the page it asked for, removes its temporary file and
   * throws. Once every page has arrived, the move into place is let finish. Default: none.
   */
  signal?: AbortSignal | undefined;
}

/** Where the lines go: stdout, or a temporary file that becomes `out` on {@link commit}. */
interface ExportSink {
  /** `stdout`, or the file's path, as messages name it. */
  readonly where: string;
  write(text: string): Promise<void>;
  commit(): Promise<void>;
  discard(): Promise<void>;
}

/**
 * A time bound fixed once for every page: a duration (`24h`) would otherwise count back from
 * each request's own "now" and shift the window while the export runs. A bound out of the
 * store's range is passed on as given, for the audit API to refuse.
 */
function fixedBound(text: string, now: Date): string {
  const date = parseTimeBound(text, now);
  return date && isTimeBoundInRange(date) ? date.toISOString() : text;
}

/** What is at `out` now: nothing, a directory or something else (a file). */
async function outKind(out: string): Promise<'none' | 'directory' | 'file'> {
  return stat(out).then(
    (stats) => (stats.isDirectory() ? 'directory' : 'file'),
    (error: unknown) => {
      if ((error as { code?: unknown }).code === 'ENOENT') return 'none';
      throw outUnwritable(out, error);
    },
  );
}

/**
 * The error for an `out` the file system does not let the export write (checked before any
 * request, where it can be: the temporary file is made before the first page is asked for).
 */
function outUnwritable(out: string, error: unknown): CliError {
  const code = (error as { code?: unknown }).code;
  const reason = typeof code === 'string' ? code : undefined;
  const directory = dirname(out);
  const why =
    reason === 'ENOENT'
      ? `its directory ${directory} does not exist`
      : reason === 'ENOTDIR'
        ? `${directory} is not a directory`
        : reason === 'EACCES' || reason === 'EPERM' || reason === 'EROFS'
          ? `${directory} is not writable`
          : reason === 'EISDIR'
            ? 'it is a directory'
            : `the file system refused it (${error instanceof Error ? error.message : String(error)})`;
  return new CliError('OUT_UNWRITABLE', `cannot write --out ${out}: ${why}; pick another --out`, {
    cause: error,
    ...(reason === undefined ? {} : { details: { reason } }),
  });
}

/** `out` when it names a directory: a file is what the export writes, `--force` or not. */
function outIsDirectory(out: string): CliError {
  return new CliError(
    'OUT_UNWRITABLE',
    `cannot write --out ${out}: it is a directory; name a file, e.g. ${join(out, 'audit.ndjson')}`,
  );
}

function outExists(out: string): CliError {
  return new CliError(
    'TARGET_EXISTS',
    `${out} exists already: pass --force to replace it, or pick another --out`,
  );
}

function stdoutSink(io: CliIO): ExportSink {
  return {
    where: 'stdout',
    write: async (text) => {
      io.stdout(text);
      // A slow reader of the pipe: wait for it rather than hold the next pages in memory.
      await io.stdoutDrained?.();
    },
    commit: async () => undefined,
    discard: async () => undefined,
  };
}

/** A temporary file beside `out` (same file system, so the move is atomic). */
async function fileSink(out: string, force: boolean): Promise<ExportSink> {
  const temporary = join(dirname(out), `.${basename(out)}.${randomUUID().slice(0, 8)}.partial`);
  let handle: FileHandle;
  try {
    handle = await open(temporary, 'wx', 0o600);
  } catch (error) {
    throw outUnwritable(out, error);
  }
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close();
  };
  return {
    where: out,
    write: async (text) => {
      await handle.writeFile(text);
    },
    async commit() {
      await handle.sync();
      await close();
      if (force) {
        await rename(temporary, out);
        return;
      }
      // link() refuses an existing target: a file that appeared during the export survives.
      try {
        await link(temporary, out);
      } catch (error) {
        await rm(temporary, { force: true });
        if ((error as { code?: unknown }).code === 'EEXIST') throw outExists(out);
        throw error;
      }
      await rm(temporary, { force: true });
    },
    async discard() {
      await close().catch(() => undefined);
      await rm(temporary, { force: true });
    },
  };
}

/** `1 record`, `1,200 records`. */
function recordCount(count: number): string {
  return `${count.toLocaleString('en-US')} record${count === 1 ? '' : 's'}`;
}

/** What an export that stopped early (after `written` records) left in `sink`. */
function leftIn(sink: ExportSink, written: number, stop: string): string {
  return sink.where === 'stdout'
    ? `${recordCount(written)} written to stdout before the ${stop}`
    : `${recordCount(written)} fetched, nothing written to ${sink.where}`;
}

/**
 * The error of an export that stopped after `written` records: the failure's code (so its
 * exit code) and facts, its message saying that the output is incomplete.
 */
function incomplete(error: CliError, written: number, sink: ExportSink): CliError {
  const what = leftIn(sink, written, 'failure');
  return new CliError(error.code, `${error.message} (the export is incomplete: ${what})`, {
    ...(error.status === undefined ? {} : { status: error.status }),
    ...(error.details === undefined ? {} : { details: error.details }),
    cause: error,
  });
}

/** The error of an export that `signal` (`SIGINT`, `SIGTERM`) stopped: exit 130, 143. */
function interrupted(signal: unknown, written: number, sink: ExportSink): CliError {
  const name = String(signal);
  return new CliError(
    name === 'SIGTERM' ? 'TERMINATED' : 'INTERRUPTED',
    `the export was interrupted by ${name} (${leftIn(sink, written, 'interrupt')})`,
  );
}

/**
 * Write every record that `query` selects between `since` and `until` (both fixed at the
 * start), newest first, one JSON line each. Progress goes to stderr when it is a terminal or
 * the records go to a file. Resolves with the number written.
 *
 * @throws {CliError} `TARGET_EXISTS` for an existing `out` without `force`, `OUT_UNWRITABLE`
 * for an `out` that is a directory or whose directory does not take the temporary file (both
 * before any request); the audit client's errors, after the first page with a message saying
 * how many records were written and that the output is incomplete (`out` is then left
 * untouched);
 * `INTERRUPTED` (SIGINT) or `TERMINATED` (SIGTERM) once `signal` aborts, the temporary file
 * removed.
 */
export async function exportAuditRecords(options: AuditExportOptions): Promise<number> {
  const {
    client,
    io,
    since = EXPORT_DEFAULT_SINCE,
    until,
    out,
    force = false,
    now = new Date(),
    signal,
  } = options;
  if (out !== undefined) {
    const kind = await outKind(out);
    if (kind === 'directory') throw outIsDirectory(out);
    if (kind === 'file' && !force) throw outExists(out);
  }
  const query = new URLSearchParams(options.query);
  query.set('since', fixedBound(since, now));
  query.set('until', until === undefined ? now.toISOString() : fixedBound(until, now));
  query.set('limit', String(EXPORT_PAGE_SIZE));
  const window = `since ${formatTime(query.get('since') ?? since)} until ${formatTime(query.get('until') ?? '')}`;
  const progress = out !== undefined || io.stderrIsTTY === true;

  const sink = out === undefined ? stdoutSink(io) : await fileSink(out, force);
  let written = 0;
  let pages = 0;
  try {
    let cursor: string | undefined;
    do {
      if (cursor !== undefined) query.set('cursor', cursor);
      const page = await unlessAborted(client.records(query), signal, (reason) => reason);
      pages++;
      if (page.records.length > 0)
        await sink.write(page.records.map((record) => `${JSON.stringify(record)}\n`).join(''));
      written += page.records.length;
      if (progress && page.nextCursor)
        io.stderr(`exported ${written.toLocaleString('en-US')} records…\n`);
      // A cursor that does not move would page forever.
      if (page.nextCursor !== undefined && page.nextCursor === cursor)
        throw new CliError(
          'AUDIT_API_ERROR',
          `the audit API answered the same nextCursor twice: is ${client.baseUrl} the audit-logger?`,
        );
      cursor = page.nextCursor || undefined;
    } while (cursor !== undefined);
    signal?.throwIfAborted();
  } catch (error) {
    await sink.discard();
    if (signal?.aborted) throw interrupted(signal.reason, written, sink);
    if (error instanceof CliError && pages > 0) throw incomplete(error, written, sink);
    throw error;
  }
  try {
    await sink.commit();
  } catch (error) {
    await sink.discard();
    if (error instanceof CliError || out === undefined) throw error;
    // Moved or removed under the export (a directory made at `out` meanwhile, say).
    throw incomplete(outUnwritable(out, error), written, sink);
  }
  if (progress) io.stderr(`exported ${recordCount(written)} (${window}) to ${sink.where}\n`);
  return written;
}
