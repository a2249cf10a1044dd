/**
 * `onShutdown` in a real child process: a shutdown that finishes exits 0, one that fails
 * exits 1, and one that never finishes is cut off at its deadline with exit code 1.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SHUTDOWN_DEADLINE_MS } from '../src/serve.ts';

const SERVE = new URL('../src/serve.ts', import.meta.url).href;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  /** From SIGTERM to exit. */
  ms: number;
}

/** Run `onShutdown(<shutdown>, <options>)` in a child, SIGTERM it once it is ready, await its exit. */
async function sigterm(shutdown: string, options = '{}'): Promise<Exit> {
  const code = `
    import { onShutdown } from ${JSON.stringify(SERVE)};
    const keepAlive = setInterval(() => undefined, 1000);
    globalThis.stop = onShutdown(${shutdown}, ${options});
    process.stdout.write('ready\\n');
  `;
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '--eval', code],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<Omit<Exit, 'stderr' | 'ms'>>((done) =>
    child.once('exit', (exitCode, signal) => done({ code: exitCode, signal })),
  );
  try {
    await new Promise<void>((ready, fail) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        if (line === 'ready') ready();
      });
      child.once('exit', () => fail(new Error(`the child exited before it was ready:\n${stderr}`)));
    });
    const sent = Date.now();
    child.kill('SIGTERM');
    const exit = await exited;
    return { ...exit, stderr, ms: Date.now() - sent };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

describe('onShutdown', () => {
  it('exits 0 once the shutdown finished', async () => {
    const exit = await sigterm('async () => { await new Promise((r) => setTimeout(r, 50)); }');
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.stderr).toContain('"msg":"shutting down"');
  });

  it('exits 1 when a stop asks for it while a signal’s shutdown runs (listen failed meanwhile)', async () => {
    const exit = await sigterm(
      "async () => { globalThis.stop('cannot listen', { exitCode: 1 }); await new Promise((r) => setTimeout(r, 50)); }",
    );
    expect(exit).toMatchObject({ code: 1, signal: null });
    // One shutdown: the stop during it starts nothing.
    expect(exit.stderr.match(/"msg":"shutting down"/g)).toHaveLength(1);
  });

  it('exits 1 when the shutdown throws', async () => {
    const exit = await sigterm('async () => { throw new Error("store gone"); }');
    expect(exit).toMatchObject({ code: 1, signal: null });
    expect(exit.stderr).toContain('"msg":"shutdown failed"');
  });

  it('exits 1 with an error line when the shutdown never finishes within the deadline', async () => {
    const exit = await sigterm('() => new Promise(() => undefined)', '{ deadlineMs: 500 }');
    expect(exit).toMatchObject({ code: 1, signal: null });
    expect(exit.ms).toBeGreaterThanOrEqual(450);
    expect(exit.ms).toBeLessThan(5000);
    const lines = exit.stderr
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.at(-1)).toMatchObject({ level: 'error', deadlineMs: 500 });
    expect(String(lines.at(-1)?.msg)).toMatch(/deadline/);
  });

  it('cuts off a shutdown stuck on a promise even when nothing else keeps the process alive', async () => {
    // The child's interval kept it alive; the shutdown clears it and waits on nothing: without
    // the deadline timer Node would just run out of work and exit 0.
    const exit = await sigterm(
      '() => { clearInterval(keepAlive); return new Promise(() => undefined); }',
      '{ deadlineMs: 300 }',
    );
    expect(exit).toMatchObject({ code: 1, signal: null });
  });

  it('has a default deadline inside the 30 s pod grace period', () => {
    expect(DEFAULT_SHUTDOWN_DEADLINE_MS).toBeLessThan(30_000);
  });
});
