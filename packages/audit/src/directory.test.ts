import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { tempDir } from '../test/helpers.ts';
import { journalDirectoryProblem, makeDirectory } from './directory.ts';

// Levels "another process" creates just before this one's mkdir of them (which then says EEXIST).
const raced = vi.hoisted(() => new Set<string>());
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const mkdirSync = ((path: string, options?: unknown) => {
    if (raced.delete(String(path))) fs.mkdirSync(path);
    return fs.mkdirSync(path, options as undefined);
  }) as typeof fs.mkdirSync;
  return { ...fs, default: { ...fs, mkdirSync }, mkdirSync };
});

const MODULE = pathToFileURL(fileURLToPath(new URL('./directory.ts', import.meta.url))).href;

/**
 * `makeDirectory(dir)` in a child process, killed after 10 s: where `mkdir -p` spins for ever
 * (under /proc) a call in this process could never be stopped by a test timeout.
 */
function makeDirectoryInChild(dir: string) {
  const script = `import { makeDirectory } from ${JSON.stringify(MODULE)};
try {
  console.log(JSON.stringify({ created: makeDirectory(${JSON.stringify(dir)}) }));
} catch (error) {
  console.log(JSON.stringify({ code: error.code, message: error.message }));
}`;
  const started = Date.now();
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    {
      encoding: 'utf8',
      timeout: 10_000,
    },
  );
  return {
    ms: Date.now() - started,
    signal: run.signal,
    stderr: run.stderr,
    result: run.stdout ? (JSON.parse(run.stdout) as Record<string, unknown>) : undefined,
  };
}

function isDirectory(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

describe('makeDirectory', () => {
  it('creates the missing levels, outermost first, and returns them', async () => {
    const base = await tempDir();
    const dir = join(base, 'a', 'b', 'c');
    expect(makeDirectory(dir)).toEqual([join(base, 'a'), join(base, 'a/b'), dir]);
    expect(isDirectory(dir)).toBe(true);
  });

  it('leaves an existing directory as it is and returns no levels', async () => {
    const dir = join(await tempDir(), 'a', 'b');
    makeDirectory(dir);
    await writeFile(join(dir, 'kept'), 'x');
    expect(makeDirectory(dir)).toEqual([]);
    expect(makeDirectory(join(dir, '..'))).toEqual([]);
    expect(await readdir(dir)).toEqual(['kept']);
  });

  it('resolves a relative path against the cwd and returns absolute levels', async () => {
    const base = await tempDir();
    expect(makeDirectory(relative(process.cwd(), join(base, 'x', 'y')))).toEqual([
      join(base, 'x'),
      join(base, 'x/y'),
    ]);
  });

  it('takes a level another process creates meanwhile as it is, and goes on', async () => {
    const base = await tempDir();
    raced.add(join(base, 'a'));
    expect(makeDirectory(join(base, 'a', 'b'))).toEqual([join(base, 'a/b')]);
    expect(isDirectory(join(base, 'a/b'))).toBe(true);
  });

  it('fails with ENOTDIR where a level is a file, creating nothing', async () => {
    const base = await tempDir();
    await writeFile(join(base, 'file'), '');
    expect(() => makeDirectory(join(base, 'file', 'x', 'y'))).toThrow(
      expect.objectContaining({ code: 'ENOTDIR', syscall: 'mkdir', path: join(base, 'file/x') }),
    );
    expect(await readdir(base)).toEqual(['file']);
  });

  it('fails with EEXIST where the directory itself is a file', async () => {
    const file = join(await tempDir(), 'file');
    await writeFile(file, '');
    expect(() => makeDirectory(file)).toThrow(
      expect.objectContaining({ code: 'EEXIST', path: file }),
    );
  });

  it('removes the levels it created when a deeper one fails', async () => {
    const base = await tempDir();
    await mkdir(join(base, 'kept'));
    // One path component longer than NAME_MAX (255): mkdir says ENAMETOOLONG.
    const dir = join(base, 'kept', 'new', 'n'.repeat(300));
    expect(() => makeDirectory(dir)).toThrow(expect.objectContaining({ code: 'ENAMETOOLONG' }));
    expect(await readdir(join(base, 'kept'))).toEqual([]);
  });

  it('fails at once under /proc, where mkdir -p never returns, naming the level', () => {
    const { ms, signal, stderr, result } = makeDirectoryInChild('/proc/nope/x');
    expect(signal, `the child was killed (it hung); stderr: ${stderr}`).toBeNull();
    // As root mkdir says ENOENT, for others EACCES.
    expect(result).toMatchObject({
      code: expect.stringMatching(/^(ENOENT|EACCES)$/),
      message: expect.stringContaining("mkdir '/proc/nope'"),
    });
    expect(ms).toBeLessThan(8_000);
  }, 15_000);
});

describe('journalDirectoryProblem', () => {
  it('names AUDIT_JOURNAL, the directory, the mkdir error and what to do', () => {
    expect(
      journalDirectoryProblem(
        '/proc/nope',
        new Error("ENOENT: no such file or directory, mkdir '/proc/nope'"),
      ),
    ).toBe(
      "AUDIT_JOURNAL: cannot create /proc/nope, the audit journal's directory (ENOENT: no such file or directory, mkdir '/proc/nope'): set AUDIT_JOURNAL to a file in a directory this process can create",
    );
  });
});
