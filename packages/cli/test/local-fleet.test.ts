/** The local fleet's start-up checks (the full start is covered by test/e2e). */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FLEET_SERVICES, nodeArgs } from '../src/fleet/local-fleet.ts';
import { CliError, checkRedis, runProgram, startLocalFleet } from '../src/index.ts';
import { fleet } from './helpers.ts';

describe('local fleet start-up checks', () => {
  it('finds the Redis the project needs', async () => {
    expect(await checkRedis('redis://127.0.0.1:6379')).toBeUndefined();
  });

  it('explains how to start Redis when none answers', async () => {
    const problem = await checkRedis('redis://127.0.0.1:9');
    expect(problem).toContain('not reachable at redis://127.0.0.1:9');
    const error = await startLocalFleet({
      env: { REDIS_URL: 'redis://127.0.0.1:9' },
      stateDir: mkdtempSync(join(tmpdir(), 'fleet-')),
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).message).toContain('redis-server --daemonize yes');
    expect((error as CliError).exitCode).toBe(1);
  });

  it('fleet up reports the missing Redis and exits 1', async () => {
    let stderr = '';
    const code = await runProgram(['up', '--state-dir', mkdtempSync(join(tmpdir(), 'fleet-'))], {
      stdout: () => undefined,
      stderr: (t) => {
        stderr += t;
      },
      env: { REDIS_URL: 'redis://127.0.0.1:9' },
      cwd: process.cwd(),
      fetch,
    });
    expect(code).toBe(1);
    expect(stderr).toContain('Redis is not reachable');
  });

  it('rejects a bad --port', async () => {
    const code = await runProgram(['up', '--port', 'eighty'], {
      stdout: () => undefined,
      stderr: () => undefined,
      env: {},
      cwd: process.cwd(),
      fetch,
    });
    expect(code).toBe(2);
  });
});

describe('fleet stdio without a running fleet', () => {
  const run = (stateDir: string) => fleet(['stdio', '--state-dir', stateDir]);

  it('says to start one with fleet up when the state directory has none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
    const { code, stdout, stderr } = await run(dir);
    expect(code).toBe(1);
    expect(stderr).toContain(`no fleet in ${dir}: start one with \`fleet up\``);
    // stdout is the MCP channel: nothing else may be written to it.
    expect(stdout).toBe('');
  });

  it('refuses the state of a fleet up that is gone', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    writeFileSync(
      join(dir, 'fleet.json'),
      JSON.stringify({ urls: {}, fleetToken: 't', pid: gone }),
    );
    writeFileSync(join(dir, 'fleet.yaml'), 'backends: []\n');
    const { code, stderr } = await run(dir);
    expect(code).toBe(1);
    expect(stderr).toContain(`is not running (its \`fleet up\`, pid ${gone}, is gone)`);
  });
});

describe('local fleet processes', () => {
  it('starts the request-path services with the memory reducer off, the others with defaults', () => {
    const flagged = FLEET_SERVICES.filter((service) =>
      nodeArgs(service).includes('--no-memory-reducer'),
    );
    expect([...flagged].sort()).toEqual(
      ['audit-logger', 'orchestrator', 'pii-redactor', 'policy-validator'].sort(),
    );
    for (const service of FLEET_SERVICES) {
      const args = nodeArgs(service);
      // Node flags come before the script (or tsx's loader), never after it.
      const script = args.findIndex((a) => /\.(ts|js)$/.test(a));
      expect(script, service).toBe(args.length - 1);
      expect(args.slice(0, script).every((a) => a.startsWith('-') || a.startsWith('file:'))).toBe(
        true,
      );
    }
  });
});
