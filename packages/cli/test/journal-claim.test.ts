/**
 * Journal claims of `fleet stdio` sessions started at the same moment, as separate processes
 * (each its own pid, as sessions are): every one gets a journal of its own.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceCommand } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';
import { defer } from './helpers.ts';

const CLAIM = fileURLToPath(new URL('../src/journal-claim.ts', import.meta.url));

/** A process that waits for `go`, claims a journal in `dir`, prints it, holds it a while. */
const CLAIMER = `
import { existsSync } from 'node:fs';
import { claimJournal } from ${JSON.stringify(CLAIM)};
const [dir, go] = process.argv.slice(2);
process.stdout.write('ready\\n');
while (!existsSync(go)) await new Promise((r) => setImmediate(r));
const { path, release } = claimJournal(dir);
process.stdout.write(path + '\\n');
await new Promise((r) => setTimeout(r, 1500));
release();
`;

function claimer(script: string, dir: string, go: string) {
  const { command, args } = sourceCommand(script, [dir, go]);
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk) => {
    out += String(chunk);
  });
  const ready = new Promise<void>((resolve) => {
    const check = () => (out.includes('ready\n') ? resolve() : child.stdout.once('data', check));
    check();
  });
  const claimed = new Promise<string>((resolve, reject) => {
    child.once('exit', (code) =>
      code === 0 ? resolve(out.split('\n')[1] ?? '') : reject(new Error(`exit ${code}: ${out}`)),
    );
  });
  return { ready, claimed };
}

describe('journal claims', () => {
  it('gives sessions started at the same moment a journal each', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fleet-claims-'));
    defer(() => rm(dir, { recursive: true, force: true }));
    // .mts: an ES module wherever it lies (top-level await), as tsx runs it.
    const script = join(dir, 'claimer.mts');
    await writeFile(script, CLAIMER);
    for (let round = 0; round < 3; round++) {
      const go = join(dir, `go-${round}`);
      const claimers = Array.from({ length: 8 }, () => claimer(script, dir, go));
      await Promise.all(claimers.map((c) => c.ready));
      await writeFile(go, '');
      const journals = await Promise.all(claimers.map((c) => c.claimed));
      expect(new Set(journals).size, journals.join('\n')).toBe(8);
      // Released: nothing claimed is left behind.
      for (const journal of journals) expect(existsSync(`${journal}.claim`)).toBe(false);
    }
  }, 120_000);
});
