/**
 * Journal claims of `fleet stdio` sessions started at the same moment, as separate processes
 * (each its own pid, as sessions are): every one gets a journal of its own.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { raceProcesses } from '@fleet/test-fixtures/process-race';
import { describe, expect, it } from 'vitest';
import { defer } from './helpers.ts';

const CLAIM = fileURLToPath(new URL('../src/journal-claim.ts', import.meta.url));

/** Claims a journal in `dir`, holds it a while (the others claim while it is held), returns its path. */
const CLAIMER = `
import { claimJournal } from ${JSON.stringify(CLAIM)};
export default async function claimOne(dir: string): Promise<string> {
  const { path, release } = claimJournal(dir);
  await new Promise((r) => setTimeout(r, 1500));
  release();
  return path;
}
`;

describe('journal claims', () => {
  it('gives sessions started at the same moment a journal each', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fleet-claims-'));
    defer(() => rm(dir, { recursive: true, force: true }));
    for (let round = 0; round < 3; round++) {
      const journals = await raceProcesses<string>({ source: CLAIMER, count: 8, args: [dir] });
      expect(new Set(journals).size, journals.join('\n')).toBe(8);
      // Released: nothing claimed is left behind.
      for (const journal of journals) expect(existsSync(`${journal}.claim`)).toBe(false);
    }
  }, 120_000);
});
