/**
 * The audit journal of a `fleet stdio` session: one per live session, so several desktop
 * clients (also started at the same moment) never share one.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { claimPidFile, journalHolder } from '@fleet/audit/lock';

/** Most concurrent stdio sessions that get a journal of their own. */
const MAX_JOURNALS = 16;

/**
 * Claim `file` for this process (see `claimPidFile`): false when a live process holds it, or
 * it cannot be written.
 */
function claim(file: string): boolean {
  try {
    return claimPidFile(file);
  } catch {
    return false;
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
