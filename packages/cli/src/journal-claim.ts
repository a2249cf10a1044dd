/**
 * The audit journal of a `fleet stdio` session: one per live session, so several desktop
 * clients (also started at the same moment) never share one.
 */
import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { journalHolder, processAlive } from '@fleet/audit/lock';

/** Most concurrent stdio sessions that get a journal of their own. */
const MAX_JOURNALS = 16;

/** The pid a claim file names; NaN when it names none, undefined when it is gone. */
function ownerOf(file: string): number | undefined {
  try {
    return Number.parseInt(readFileSync(file, 'utf8'), 10);
  } catch {
    return undefined;
  }
}

/**
 * Claim `file` for this process: create it holding this pid, or take it over from a process
 * that is gone. False when a live process holds it (or it cannot be written).
 *
 * The claim appears with its pid in it (written to a file of this process's own, then
 * hard-linked to the name, which fails if the name exists): created empty and written
 * after, another session that read it in between took it for a gone one's and removed it,
 * and two sessions shared a journal. A stale claim is moved aside before it is removed, and
 * put back if what was moved turns out to be another session's fresh one.
 */
function claim(file: string): boolean {
  const mine = `${file}.${process.pid}.new`;
  try {
    writeFileSync(mine, String(process.pid));
  } catch {
    return false;
  }
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        linkSync(mine, file);
        return true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return false;
      }
      const owner = ownerOf(file);
      if (owner === undefined) continue; // released meanwhile
      if (owner > 0 && processAlive(owner)) return false;
      const aside = `${file}.${process.pid}.stale`;
      try {
        renameSync(file, aside);
      } catch {
        continue; // another session moved it first
      }
      const moved = ownerOf(aside);
      if (moved !== owner && !Number.isNaN(moved ?? Number.NaN)) {
        // Another session replaced the stale claim with its own between our read and the
        // move: give it back.
        try {
          linkSync(aside, file);
        } catch {
          // the name is taken again: that session will find out its claim moved
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

/**
 * The audit journal for a new session: one per live session, the first that no live
 * orchestrator holds and no other `fleet stdio` has claimed. The claim (`<journal>.claim`,
 * holding this pid, removed by `release`) covers the seconds before the orchestrator locks
 * the journal itself, so sessions started at the same moment take different journals. A
 * journal a gone session left is taken over, and the new session replays what it holds.
 */
export function claimJournal(stateDir: string): { path: string; release: () => void } {
  const path = (n: number) =>
    join(stateDir, n === 1 ? 'stdio-journal.ndjson' : `stdio-journal-${n}.ndjson`);
  for (let n = 1; n <= MAX_JOURNALS; n++) {
    const claimFile = `${path(n)}.claim`;
    if (journalHolder(path(n)) === undefined && claim(claimFile))
      return { path: path(n), release: () => rmSync(claimFile, { force: true }) };
  }
  // All taken: the orchestrator will say the journal is in use.
  return { path: path(1), release: () => undefined };
}
