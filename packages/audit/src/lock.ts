/**
 * Who holds an audit journal: its lock file `<journal>.lock` holds the owner's pid. Kept
 * apart from the journal (node:fs only) so that tools that pick a journal for a producer they
 * start, such as `fleet stdio`, read the same format without loading the producer's stack
 * (`@fleet/audit/lock`).
 */
import { readFileSync } from 'node:fs';

/** The lock file of the journal at `path`. */
export function journalLockPath(path: string): string {
  return `${path}.lock`;
}

/** True while the process `pid` exists (EPERM: it exists but belongs to someone else). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: unknown }).code === 'EPERM';
  }
}

/**
 * The live process holding the journal at `path`, or undefined when nobody does: no lock
 * file, an unreadable one, or one whose process is gone (a stale lock).
 */
export function journalHolder(path: string): number | undefined {
  let holder: number;
  try {
    holder = Number.parseInt(readFileSync(journalLockPath(path), 'utf8'), 10);
  } catch {
    return undefined;
  }
  return holder > 0 && processAlive(holder) ? holder : undefined;
}
