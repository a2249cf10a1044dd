/**
 * Who holds an audit journal: its lock file `<journal>.lock` holds the owner's pid. Kept
 * apart from the journal (node:fs only) so that tools that pick a journal for a producer they
 * start, such as `fleet stdio`, read the same format without loading the producer's stack
 * (`@fleet/audit/lock`).
 */
import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';

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
  const holder = ownerOf(journalLockPath(path));
  return holder !== undefined && holder > 0 && processAlive(holder) ? holder : undefined;
}

/** The pid a pid file names; NaN when it names none, undefined when it is gone. */
function ownerOf(file: string): number | undefined {
  try {
    return Number.parseInt(readFileSync(file, 'utf8'), 10);
  } catch {
    return undefined;
  }
}

/**
 * Make `file` hold this process's pid unless a live process holds it: true when it does now
 * (created, or taken over from a process that is gone or from a previous life of this pid),
 * false when another live process holds it.
 *
 * The file appears with the pid already in it (written to a file of this process's own,
 * then hard-linked to the name, which fails if the name exists): created empty and written
 * after, a process that read it in between took it for a gone one's, removed it, and two
 * processes held one file. A stale file is moved aside before it is removed, and put back
 * if what was moved turns out to be another process's fresh one.
 * @throws the error of a failing write or link other than the name existing (EACCES, ...).
 */
export function claimPidFile(file: string): boolean {
  const mine = `${file}.${process.pid}.new`;
  writeFileSync(mine, `${process.pid}\n`);
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        linkSync(mine, file);
        return true;
      } catch (error) {
        if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
      }
      const owner = ownerOf(file);
      if (owner === undefined) continue; // released meanwhile
      if (owner > 0 && owner !== process.pid && processAlive(owner)) return false;
      const aside = `${file}.${process.pid}.stale`;
      try {
        renameSync(file, aside);
      } catch {
        continue; // another process moved it first
      }
      const moved = ownerOf(aside);
      if (moved !== owner && !Number.isNaN(moved ?? Number.NaN)) {
        // Another process replaced the stale file with its own between our read and the
        // move: give it back.
        try {
          linkSync(aside, file);
        } catch {
          // the name is taken again
        }
        rmSync(aside, { force: true });
        return false;
      }
      rmSync(aside, { force: true });
    }
    return false;
  } finally {
    rmSync(mine, { force: true });
  }
}
