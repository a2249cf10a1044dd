/**
 * Journal locks taken by producers that start at the same moment, as separate processes
 * (each its own pid): exactly one holds the journal, the others are told it is in use.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { raceProcesses } from '@fleet/test-fixtures/process-race';
import { describe, expect, it } from 'vitest';
import { defer } from '../test/helpers.ts';
import { claimPidFile } from './lock.ts';

const JOURNAL = fileURLToPath(new URL('./journal.ts', import.meta.url));

const JOURNALS = 12;

/**
 * Tries to lock each of the journals `<base>-0` .. `<base>-11` in turn, holds those it gets a
 * while (the others try while they are held), gives them back, returns their indexes.
 */
const LOCKER = `
import { lockJournal } from ${JSON.stringify(JOURNAL)};
export default async function lockAll(base: string): Promise<number[]> {
  const held = [];
  const releases = [];
  for (let i = 0; i < ${JOURNALS}; i++) {
    try {
      releases.push(lockJournal(base + '-' + i));
      held.push(i);
    } catch (error) {
      if (error.code !== 'JOURNAL_IN_USE') throw error;
    }
  }
  await new Promise((r) => setTimeout(r, 1000));
  for (const release of releases) release();
  return held;
}
`;

describe('journal locks across processes', () => {
  it('lets exactly one of the producers that start together hold each journal', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fleet-locks-'));
    defer(() => rm(dir, { recursive: true, force: true }));
    for (let round = 0; round < 3; round++) {
      const base = join(dir, `journal-${round}`);
      const held = await raceProcesses<number[]>({ source: LOCKER, count: 8, args: [base] });
      // Every journal held by exactly one of them.
      expect(
        held.flat().sort((a, b) => a - b),
        JSON.stringify(held),
      ).toEqual(Array.from({ length: JOURNALS }, (_, i) => i));
      for (let i = 0; i < JOURNALS; i++) expect(existsSync(`${base}-${i}.lock`)).toBe(false);
    }
  }, 120_000);
});

describe('claimPidFile', () => {
  it('takes over a file of a process that is gone, or of none, and keeps a live one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fleet-pidfile-'));
    defer(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'x.lock');
    // A pid no process has (beyond the kernel's pid_max).
    await writeFile(file, '4194305\n');
    expect(claimPidFile(file)).toBe(true);
    await writeFile(file, 'garbage');
    expect(claimPidFile(file)).toBe(true);
    // Our own pid: a previous life of this pid, stale.
    expect(claimPidFile(file)).toBe(true);
    // pid 1 is alive: held.
    await writeFile(file, '1\n');
    expect(claimPidFile(file)).toBe(false);
    expect(() => claimPidFile(join(dir, 'missing-dir', 'x.lock'))).toThrow(/ENOENT/);
  });
});
