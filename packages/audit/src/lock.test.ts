/**
 * Journal locks taken by producers that start at the same moment, as separate processes
 * (each its own pid): exactly one holds the journal, the others are told it is in use.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceCommand } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';
import { defer } from '../test/helpers.ts';
import { claimPidFile } from './lock.ts';

const JOURNAL = fileURLToPath(new URL('./journal.ts', import.meta.url));

const JOURNALS = 12;

/**
 * Waits for `go`, then tries to lock each of the journals `<base>-0` .. `<base>-11` in turn
 * (holding those it gets), prints the indexes it holds as JSON, holds them a while.
 */
const LOCKER = `
import { existsSync } from 'node:fs';
import { lockJournal } from ${JSON.stringify(JOURNAL)};
const [base, go] = process.argv.slice(2);
process.stdout.write('ready\\n');
while (!existsSync(go)) await new Promise((r) => setImmediate(r));
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
process.stdout.write(JSON.stringify(held) + '\\n');
await new Promise((r) => setTimeout(r, 1000));
for (const release of releases) release();
`;

function locker(script: string, base: string, go: string) {
  const { command, args } = sourceCommand(script, [base, go]);
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk) => {
    out += String(chunk);
  });
  const ready = new Promise<void>((resolve) => {
    const check = () => (out.includes('ready\n') ? resolve() : child.stdout.once('data', check));
    check();
  });
  const held = new Promise<number[]>((resolve, reject) => {
    child.once('exit', (code) =>
      code === 0
        ? resolve(JSON.parse(out.split('\n')[1] ?? '[]') as number[])
        : reject(new Error(`exit ${code}: ${out}`)),
    );
  });
  return { ready, held };
}

describe('journal locks across processes', () => {
  it('lets exactly one of the producers that start together hold each journal', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fleet-locks-'));
    defer(() => rm(dir, { recursive: true, force: true }));
    // .mts: an ES module wherever it lies (top-level await), as tsx runs it.
    const script = join(dir, 'locker.mts');
    await writeFile(script, LOCKER);
    for (let round = 0; round < 3; round++) {
      const base = join(dir, `journal-${round}`);
      const go = join(dir, `go-${round}`);
      const lockers = Array.from({ length: 8 }, () => locker(script, base, go));
      await Promise.all(lockers.map((l) => l.ready));
      await writeFile(go, '');
      const held = await Promise.all(lockers.map((l) => l.held));
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
