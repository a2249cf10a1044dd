/** The local fleet's start-up checks (the full start is covered by test/e2e). */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sourceCommand } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';
import { describeFleet } from '../src/commands/up.ts';
import { FLEET_SERVICES, nodeArgs, stateDirFleetId } from '../src/fleet/local-fleet.ts';
import { fleetCommandLine } from '../src/hints.ts';
import { CliError, checkRedis, runProgram, startLocalFleet } from '../src/index.ts';
import { defer, fleet, jsonServer, REPO_ROOT, runChild } from './helpers.ts';

/** A live process standing in for a running `fleet up`; killed after the test. */
function liveProcess(): number {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120000)'], {
    stdio: 'ignore',
  });
  defer(async () => {
    child.kill('SIGKILL');
  });
  return child.pid as number;
}

/** A state directory whose fleet.json belongs to a live `fleet up` (pid), with `urls`. */
function liveStateDir(urls: Record<string, string>): { dir: string; pid: number; json: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
  const pid = liveProcess();
  const json = JSON.stringify({ urls, fleetToken: 't', pid });
  writeFileSync(join(dir, 'fleet.json'), json);
  return { dir, pid, json };
}

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

  it('fleet up reports the missing Redis and exits 1, before any word of starting', async () => {
    let stderr = '';
    let stdout = '';
    const code = await runProgram(['up', '--state-dir', mkdtempSync(join(tmpdir(), 'fleet-'))], {
      stdout: (t) => {
        stdout += t;
      },
      stderr: (t) => {
        stderr += t;
      },
      env: { REDIS_URL: 'redis://127.0.0.1:9' },
      cwd: process.cwd(),
      fetch,
    });
    expect(code).toBe(1);
    expect(stderr).toContain('Redis is not reachable');
    expect(stdout).toBe('');
  });

  it.each(['eighty', '', ' ', '-1', '65536', '8080.5'])(
    'rejects --port %j (exit 2)',
    async (port) => {
      const run = await fleet(['up', '--port', port]);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain('--port must be 0..65535');
    },
  );

  it('names a --config that does not exist before starting anything (exit 1)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
    const run = await fleet(['up', '--config', 'nope.yaml', '--state-dir', dir], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `error: the config ${join(dir, 'nope.yaml')} does not exist: pass an orchestrator config file as --config, or leave --config out for the generated one\n`,
    );
    expect(run.stdout).toBe('');
  });

  it.each([
    ['is a file', (file: string) => file, (file: string) => `${file} is not a directory`],
    [
      'would be under a file',
      (file: string) => join(file, 'state'),
      (file: string) => `${join(file, 'state')} cannot be created: ${file} is not a directory`,
    ],
  ])('names a --state-dir that %s before starting anything (exit 1)', async (_, dirOf, problem) => {
    const file = join(mkdtempSync(join(tmpdir(), 'fleet-')), 'a-file');
    writeFileSync(file, '');
    const run = await fleet(['up', '--port', '0', '--state-dir', dirOf(file)]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `error: the state directory ${problem(file)}: pass another --state-dir\n`,
    );
    expect(run.stdout).toBe('');
  });

  it('names a port in use before starting anything (exit 1)', async () => {
    const server = createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    defer(() => new Promise((resolve) => server.close(resolve)));
    const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
    const run = await fleet(['up', '--port', String(port), '--state-dir', dir]);
    expect(run.code).toBe(1);
    // Worded as the services' own start-up refusal, naming --port where they name PORT.
    expect(run.stderr).toBe(
      `error: --port: cannot listen on 127.0.0.1:${port}: the port is in use (EADDRINUSE); pass another --port, or --port 0 for a free one\n`,
    );
    // The refusal comes before any word of starting.
    expect(run.stdout).toBe('');
  });
});

/**
 * `fleet argv` as a real process, killed after 20 s: a CLI stuck in a synchronous call (Node
 * 20's recursive mkdir under /proc never returns) cannot be run in process.
 */
function fleetProcess(argv: readonly string[]) {
  const { command, args } = sourceCommand(join(REPO_ROOT, 'packages/cli/src/main.ts'), argv);
  return runChild(command, args, {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '' },
    timeoutMs: 20_000,
  });
}

describe('a --state-dir that cannot be created (under /proc)', () => {
  // As root access(2) allows it; mkdir says ENOENT (or, for others, EACCES).
  const refusal = (tail: string) =>
    new RegExp(
      `^error: the state directory /proc/fleet-x cannot be created \\(E[A-Z]+: [^)]*, mkdir '/proc/fleet-x'\\): ${tail}\n$`,
    );

  it.each([
    ['fleet up', ['up', '--port', '0']],
    ['fleet demo starting a fleet of its own', ['demo', '--orchestrator', 'http://127.0.0.1:1']],
  ])(
    '%s names it and the cause at once (exit 1)',
    async (_, argv) => {
      const run = await fleetProcess([...argv, '--state-dir', '/proc/fleet-x']);
      expect(run.signal).toBeNull();
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(refusal('pass another --state-dir'));
      expect(run.stdout).toBe('');
    },
    30_000,
  );

  it('fleet stdio names it and the cause before starting a session (exit 1)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
    const config = join(dir, 'fleet.yaml');
    writeFileSync(config, 'backends: []\n');
    const run = await fleetProcess(['stdio', '--state-dir', '/proc/fleet-x', '--config', config]);
    expect(run.signal).toBeNull();
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      refusal(
        "the session's audit journal goes there; pass another --state-dir, or set AUDIT_JOURNAL",
      ),
    );
    expect(run.stdout).toBe('');
  }, 30_000);
});

describe('a second fleet on the state directory of a running one', () => {
  it('fleet up refuses, naming the state directory and pid, and leaves fleet.json alone', async () => {
    const { dir, pid, json } = liveStateDir({ orchestrator: 'http://127.0.0.1:1' });
    const run = await fleet(['up', '--port', '0', '--state-dir', dir]);
    expect(run.stdout).toBe('');
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `error: a fleet is already running from ${dir} (fleet up, pid ${pid}, orchestrator http://127.0.0.1:1): use it, stop it, or pass another --state-dir\n`,
    );
    expect(readFileSync(join(dir, 'fleet.json'), 'utf8')).toBe(json);
  });

  it('fleet demo uses the fleet of fleet.json, and does not start one over it', async () => {
    const orchestrator = `http://127.0.0.1:${await freePort()}`;
    const { dir, pid, json } = liveStateDir({ orchestrator });
    const run = await fleet(['demo', '--state-dir', dir]);
    // The refusal comes before any word of starting a fleet.
    expect(run.stdout).toBe('');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`a fleet is already running from ${dir} (fleet up, pid ${pid}`);
    expect(readFileSync(join(dir, 'fleet.json'), 'utf8')).toBe(json);
  });
});

describe('fleet demo', () => {
  it('says when the audit API it was given cannot be reached, before the tour (exit 1)', async () => {
    const audit = `http://127.0.0.1:${await freePort()}`;
    const run = await fleet(['demo', '--audit', audit, '--orchestrator', 'http://127.0.0.1:1']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.split('\n')[0]).toBe(
      `error: cannot reach the audit API at ${audit}: is the fleet running? (fleet up, or pass --audit)`,
    );
  });

  it('checks what a fleet of its own needs before saying it starts one, as fleet up does', async () => {
    const run = await fleet(
      [
        'demo',
        '--orchestrator',
        'http://127.0.0.1:1',
        '--state-dir',
        mkdtempSync(join(tmpdir(), 'fleet-')),
      ],
      { env: { REDIS_URL: 'redis://127.0.0.1:9' } },
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('Redis is not reachable at redis://127.0.0.1:9');
    expect(run.stdout).toBe('');
  });

  it('says what to do when what answers at --orchestrator opens no MCP session', async () => {
    // Healthy, with an audit API, but not an orchestrator: no /mcp.
    const { url, close } = await jsonServer((request) =>
      request.url === '/mcp' ? { status: 404, body: { error: 'not found' } } : { body: {} },
    );
    defer(close);
    const run = await fleet(['demo', '--orchestrator', url, '--audit', url], {
      launcher: 'pnpm fleet',
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.split('\n')[0]).toBe(
      `error: no MCP session opens at ${url}/mcp: is ${url} the orchestrator? (pass its base URL as --orchestrator, or leave it out to start a fleet for the demo)`,
    );
    expect(run.stderr).toMatch(/^ {2}reason: /m);
  });
});

describe('the endpoints fleet up prints', () => {
  const fleetUrls = {
    mcpUrl: 'http://127.0.0.1:4000/mcp',
    adminUrl: 'http://127.0.0.1:4001/admin',
    viewerUrl: 'http://127.0.0.1:4001/',
    stateDir: '/tmp/s',
  };

  it('give the hints as the CLI was launched, with the state directory when it is not the default', () => {
    const text = describeFleet(fleetUrls, (words) =>
      fleetCommandLine('pnpm fleet', words, '/tmp/my fleet'),
    );
    expect(text).toContain("  pnpm fleet demo --state-dir '/tmp/my fleet'");
    expect(text).toContain("  pnpm fleet chain --event tools/call --state-dir '/tmp/my fleet'");
    expect(text).toContain("  pnpm fleet audit query --since 10m --state-dir '/tmp/my fleet'");
    expect(text).not.toMatch(/^ {2}fleet /m);
  });

  it('leave it out for the default, which the commands read anyway', () => {
    const text = describeFleet(fleetUrls, (words) => fleetCommandLine('fleet', words));
    expect(text).not.toContain('--state-dir');
    expect(text).toMatch(/^ {2}fleet demo +# a guided tour against this fleet$/m);
  });
});

describe('fleet stdio without a running fleet', () => {
  const run = (stateDir: string) => fleet(['stdio', '--state-dir', stateDir]);

  it('says to start one with fleet up when the state directory has none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
    const { code, stdout, stderr } = await run(dir);
    expect(code).toBe(1);
    expect(stderr).toContain(`no fleet in ${dir}: start one with \`fleet up --state-dir ${dir}\``);
    // stdout is the MCP channel: nothing else may be written to it.
    expect(stdout).toBe('');
  });

  it('says so as the CLI was launched, with the state directory it was given', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'fleet-'));
    const named = await fleet(['stdio', '--state-dir', 'my fleet'], {
      cwd,
      launcher: 'pnpm fleet',
    });
    expect(named.stderr).toBe(
      `error: no fleet in ${join(cwd, 'my fleet')}: start one with \`pnpm fleet up --state-dir 'my fleet'\` (or pass --config)\n`,
    );
    const plain = await fleet(['stdio'], { cwd, launcher: 'pnpm fleet' });
    expect(plain.stderr).toContain('start one with `pnpm fleet up` (or pass --config)');
  });

  it("runs the config fleet.json names (fleet up's --config), and says when it is gone", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
    const config = join(dir, 'elsewhere', 'mine.yaml');
    writeFileSync(
      join(dir, 'fleet.json'),
      JSON.stringify({ urls: {}, fleetToken: 't', configPath: config, pid: process.pid }),
    );
    // A generated config beside it is not the one that fleet runs.
    writeFileSync(join(dir, 'fleet.yaml'), 'backends: []\n');
    const { code, stdout, stderr } = await fleet(['stdio', '--state-dir', dir], {
      launcher: 'pnpm fleet',
    });
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toBe(
      `error: the fleet in ${dir} has no orchestrator config at ${config}: restart it with \`pnpm fleet up --state-dir ${dir}\`, or pass --config\n`,
    );
  });

  it('shows in its help the absolute command line a desktop client needs', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'fleet dir '));
    const { code, stdout } = await fleet(['stdio', '--help'], { cwd });
    expect(code).toBe(0);
    expect(stdout).toContain(
      ` ${join(REPO_ROOT, 'packages/cli/dist/main.js')} stdio --state-dir '${join(cwd, '.fleet')}'\n`,
    );
  });

  it('names a --config that does not exist', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-'));
    const { code, stderr } = await fleet(['stdio', '--config', 'nope.yaml'], { cwd: dir });
    expect(code).toBe(1);
    expect(stderr).toBe(
      `error: the config ${join(dir, 'nope.yaml')} does not exist: pass an orchestrator config file as --config\n`,
    );
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

describe('the fleet id of a state directory', () => {
  const dir = (): string => {
    const made = mkdtempSync(join(tmpdir(), 'fleet-id-'));
    defer(() => rm(made, { recursive: true, force: true }));
    return made;
  };

  it('is made once and kept, so the next fleet up from the directory finds its Redis keys', () => {
    const state = dir();
    const id = stateDirFleetId(state);
    expect(id).toMatch(/^[0-9a-f]{8}$/);
    expect(readFileSync(join(state, 'fleet-id'), 'utf8')).toBe(`${id}\n`);
    expect(stateDirFleetId(state)).toBe(id);
  });

  it('differs between directories, and a damaged one is replaced', () => {
    const [one, two] = [dir(), dir()] as [string, string];
    expect(stateDirFleetId(one)).not.toBe(stateDirFleetId(two));
    writeFileSync(join(one, 'fleet-id'), 'not an id\n');
    const replaced = stateDirFleetId(one);
    expect(replaced).toMatch(/^[0-9a-f]{8}$/);
    expect(stateDirFleetId(one)).toBe(replaced);
  });
});
