/**
 * Test scripts in child processes (`worker-child.ts`, `producer-child.ts`) that a test can
 * SIGKILL at a point they report on stdout as JSON lines.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { defer } from '@fleet/test-fixtures/cleanup';

/** A child process running a test script, and the JSON lines it printed. */
export interface Child {
  process: ChildProcess;
  exited: Promise<void>;
  line(
    match: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
}

/**
 * Run `script` (a test script beside this file, under tsx, resolving workspace packages to
 * their source) with `env` added; it is SIGKILLed after the test if still running.
 */
export function spawnChild(script: string, env: Record<string, string>): Child {
  const path = fileURLToPath(new URL(script, import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fleet/source', path], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  defer(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines: Array<Record<string, unknown>> = [];
  const waiters = new Set<() => void>();
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (text) => {
    try {
      lines.push(JSON.parse(text) as Record<string, unknown>);
    } catch {
      return;
    }
    for (const wake of waiters) wake();
  });
  return {
    process: child,
    exited,
    line: (match, timeoutMs = 20_000) =>
      new Promise((found, fail) => {
        const check = () => {
          const hit = lines.find(match);
          if (!hit) return;
          waiters.delete(check);
          clearTimeout(timer);
          found(hit);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          fail(new Error(`${script} did not print the expected line; stderr:\n${stderr}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
  };
}
