/**
 * `fleet up` as a real process told to stop by signals, the way a terminal or a process
 * manager does it: during start-up, and twice in a row. Either way it exits and no service
 * it started keeps running.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exitOf, killGroup, type ProcessExit, sourceCommand } from '@fleet/test-fixtures';
import { afterEach, describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('../../../packages/cli/src/main.ts', import.meta.url));

interface UpProcess {
  child: ChildProcess;
  exited: Promise<ProcessExit>;
  stateDir: string;
  stdout(): string;
  stderr(): string;
  /** Resolves once stdout matches `pattern` (rejects if the process exits first). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
}

const started: UpProcess[] = [];
afterEach(async () => {
  // A safety net only: every assertion about stopping is made before this runs.
  for (const up of started.splice(0)) {
    killGroup(up.child, 'SIGKILL');
    await up.exited;
    rmSync(up.stateDir, { recursive: true, force: true });
  }
});

function startUp(): UpProcess {
  const stateDir = mkdtempSync(join(tmpdir(), 'fleet-up-'));
  const { command, args } = sourceCommand(CLI, ['up', '--port', '0', '--state-dir', stateDir]);
  // Its own process group, so that signals reach `fleet up` alone (not its services, as a
  // terminal's Ctrl-C would) and the safety net can reap the group.
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    env: { ...process.env, NO_COLOR: '1' },
  });
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  const exited = exitOf(child);
  const up: UpProcess = {
    child,
    exited,
    stateDir,
    stdout: () => out,
    stderr: () => err,
    async waitFor(pattern, timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      let gone = false;
      void exited.then(() => {
        gone = true;
      });
      for (;;) {
        const match = pattern.exec(out);
        if (match) return match;
        if (gone || Date.now() > deadline)
          throw new Error(`no ${pattern} in fleet up's output:\n${out}\n${err}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
  started.push(up);
  return up;
}

/** The pid of the child of `parent` whose command line contains `marker`. */
function childPid(parent: number, marker: string): number {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces, so read after its closing paren.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== parent) continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no child of ${parent} runs ${marker}`);
}

/** The distinct service URLs `fleet up` wrote to its state directory. */
function endpointsOf(up: UpProcess): string[] {
  const { urls } = JSON.parse(readFileSync(join(up.stateDir, 'fleet.json'), 'utf8')) as {
    urls: Record<string, string>;
  };
  const endpoints = [...new Set(Object.values(urls))];
  expect(endpoints.length).toBeGreaterThanOrEqual(5);
  return endpoints;
}

/** True when something accepts HTTP at `url`. */
async function answers(url: string): Promise<boolean> {
  try {
    const res = await fetch(new URL('/healthz', url), { signal: AbortSignal.timeout(1000) });
    await res.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

/** Wait until nothing answers at any of `urls`; return those still answering after 15 s. */
async function untilGone(urls: readonly string[]): Promise<string[]> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const alive: string[] = [];
    for (const url of urls) if (await answers(url)) alive.push(url);
    if (alive.length === 0 || Date.now() > deadline) return alive;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('fleet up and signals', () => {
  it('stops the services it has started when told to stop while starting', async () => {
    const up = startUp();
    // The demo backend is ready; the interceptor services are on their way.
    const first = await up.waitFor(/✓ demo-backend\s+(http:\/\/127\.0\.0\.1:\d+)/);
    const url = first[1] as string;
    expect(await answers(url)).toBe(true);
    up.child.kill('SIGTERM');
    const exit = await up.exited;
    // 128 + the signal's number, as for the same signal once the fleet is up.
    expect(exit.code).toBe(143);
    expect(up.stderr()).toContain('SIGTERM while the fleet was starting');
    expect(up.stdout()).not.toContain('The fleet is up');
    expect(await untilGone([url])).toEqual([]);
  }, 180_000);

  it('takes the same signal twice in a row for one interrupt and stops cleanly', async () => {
    const up = startUp();
    await up.waitFor(/The fleet is up/);
    const endpoints = endpointsOf(up);
    // As a terminal's Ctrl-C reaches it and a wrapper (tsx under `pnpm start`) passes it on.
    up.child.kill('SIGINT');
    up.child.kill('SIGINT');
    const exit = await up.exited;
    expect(exit.code).toBe(0);
    expect(up.stdout()).toContain('Stopped.');
    expect(up.stderr()).not.toContain('again');
    expect(await untilGone(endpoints)).toEqual([]);
  }, 180_000);

  it('exits at once on a second signal while stopping, and still stops every service', async () => {
    const up = startUp();
    await up.waitFor(/The fleet is up/);
    const endpoints = endpointsOf(up);
    for (const url of endpoints) expect(await answers(url), url).toBe(true);
    // A service slow to stop (the orchestrator, stopped first, is frozen): `fleet up` waits.
    const orchestrator = childPid(up.child.pid as number, 'services/orchestrator/');
    process.kill(orchestrator, 'SIGSTOP');
    up.child.kill('SIGTERM');
    await up.waitFor(/SIGTERM: stopping the fleet/);
    // Half a second or more later, a second signal is the user asking again.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(up.child.exitCode).toBeNull();
    up.child.kill('SIGTERM');
    const exit = await up.exited;
    expect(exit.code).toBe(143);
    expect(up.stderr()).toContain('SIGTERM again: exiting without waiting for the services');
    expect(up.stdout()).not.toContain('Stopped.');
    // Its services were told to stop on the way out, not left running (the orchestrator
    // handles its SIGTERM once it runs again).
    process.kill(orchestrator, 'SIGCONT');
    expect(await untilGone(endpoints)).toEqual([]);
  }, 180_000);
});
