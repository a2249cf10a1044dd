/**
 * `fleet` as a real process (`src/main.ts` under tsx, as `pnpm fleet` runs it): its output
 * through a real pipe, the hints it prints when a package script launched it, and an export
 * to a file stopped by a signal.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sourceCommand, stdioBackendCommand } from '@fleet/test-fixtures';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { describe, expect, it } from 'vitest';
import {
  defer,
  deleteRedisKeys,
  jsonServer,
  REPO_ROOT,
  redisCommand,
  runChild,
  tempWorkspace,
} from './helpers.ts';

const CLI = join(REPO_ROOT, 'packages/cli/src/main.ts');

/** An admin API whose `GET /admin/services` answers `body`; its base URL. */
async function adminApi(body: unknown): Promise<string> {
  const { url, close } = await jsonServer(() => ({ body }));
  defer(close);
  return url;
}

/**
 * `fleet argv` with its stdout into a shell pipe whose reader starts a second late (so what
 * the pipe's 64 KiB buffer does not hold must wait in the CLI); what the reader got, and the
 * CLI's exit code (on stderr).
 */
async function throughPipe(argv: readonly string[]): Promise<{ bytes: number; code: string }> {
  const { command, args } = sourceCommand(CLI, argv);
  const run = await runChild(
    'sh',
    ['-c', '("$0" "$@"; echo "exit $?" >&2) | (sleep 1; wc -c)', command, ...args],
    { cwd: REPO_ROOT },
  );
  return { bytes: Number(run.stdout.trim()), code: /exit (\d+)/.exec(run.stderr)?.[1] ?? '' };
}

describe('fleet output through a pipe', () => {
  it('writes all of a large --json answer before exiting', async () => {
    const services = Array.from({ length: 1500 }, (_, i) => ({
      id: `svc-${i}`,
      url: `http://127.0.0.1:9${String(i).padStart(3, '0')}/mcp`,
      source: 'runtime',
      status: 'healthy',
      interceptors: [{ name: `guard-${i}`, type: 'validation', hooks: [] }],
      overrides: { [`guard-${i}`]: { failOpen: true, timeoutMs: 250 } },
    }));
    const url = await adminApi({ services });
    const expected = Buffer.byteLength(`${JSON.stringify({ services }, null, 2)}\n`);
    expect(expected).toBeGreaterThan(4 * 65_536);
    const piped = await throughPipe(['--orchestrator', url, 'services', '--json']);
    expect(piped).toEqual({ bytes: expected, code: '0' });
  }, 30_000);
});

describe('fleet audit export --out, stopped by a signal', () => {
  it.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)(
    'on %s removes its temporary file, writes nothing and exits %i',
    async (signal, exitCode) => {
      // An audit API whose pages never end, each answered 200 ms late: the export is still
      // running when the signal arrives.
      let pages = 0;
      const api = await jsonServer(async () => {
        pages++;
        await new Promise((r) => setTimeout(r, 200));
        const records = [`r${pages}a`, `r${pages}b`].map((id) => ({ id, kind: 'chain' }));
        return { body: { records, nextCursor: `page-${pages}` } };
      });
      defer(api.close);
      const dir = await mkdtemp(join(tmpdir(), 'fleet-cli-export-'));
      defer(() => rm(dir, { recursive: true, force: true }));
      const file = join(dir, 'audit.ndjson');

      const { command, args } = sourceCommand(CLI, [
        'audit',
        'export',
        '--audit',
        api.url,
        '--out',
        file,
      ]);
      const child = spawn(command, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      defer(async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      });
      const exited = once(child, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
      let stderr = '';
      const progressed = new Promise<void>((resolve) => {
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
          stderr += chunk;
          // Two pages are in the temporary file.
          if (stderr.includes('exported 4 records…\n')) resolve();
        });
      });
      await Promise.race([
        progressed,
        exited.then(([code]) => {
          throw new Error(`fleet exited (code ${code}) before its second page:\n${stderr}`);
        }),
      ]);
      const partial = await readdir(dir);
      expect(partial).toEqual([expect.stringMatching(/^\.audit\.ndjson\.[0-9a-f]{8}\.partial$/)]);

      child.kill(signal);
      expect(await exited).toEqual([exitCode, null]);
      expect(await readdir(dir)).toEqual([]);
      // Progress lines, then one line saying what happened (the count depends on the timing).
      const said = stderr
        .split('\n')
        .filter((line) => !line.startsWith('exported '))
        .map((line) => line.replace(/\(\d+ records/, '(N records'));
      expect(said).toEqual([
        `error: the export was interrupted by ${signal} (N records fetched, nothing written to ${file})`,
        '',
      ]);
    },
    30_000,
  );
});

describe('the hints of fleet launched by a package script', () => {
  it('say `pnpm fleet …` when `pnpm fleet` ran it, where no `fleet` is on PATH', async () => {
    const root = await tempWorkspace();
    const run = await runChild(
      'pnpm',
      ['--silent', 'fleet', 'new', 'interceptor', 'word-guard', '--dir', join(root, 'services')],
      { cwd: REPO_ROOT },
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      '\n  pnpm fleet register http://127.0.0.1:8090/mcp\n  pnpm fleet chain\n',
    );
  }, 30_000);
});

/** The Redis keys of the BullMQ queue `queue` (empty until a job reaches it). */
async function queueKeys(queue: string): Promise<string[]> {
  const keys = await redisCommand(['KEYS', `bull:${queue}:*`]);
  return Array.isArray(keys) ? keys.map(String) : [];
}

describe('fleet stdio', () => {
  it("sends its session's audit records to the fleet's queue from fleet.json; AUDIT_QUEUE wins", async () => {
    // The state `fleet up` leaves: fleet.json naming the queue, fleet.yaml falling back to
    // fleet-audit when AUDIT_QUEUE is unset (as generated configs did before the queue was
    // recorded), with a stdio backend.
    const dir = await mkdtemp(join(tmpdir(), 'fleet-stdio-'));
    const id = randomUUID();
    const [fleetQueue, ownQueue] = [`cli-stdio-${id}`, `cli-stdio-own-${id}`];
    defer(async () => {
      await deleteRedisKeys([`bull:${fleetQueue}:*`, `bull:${ownQueue}:*`, `cli-stdio-${id}:*`]);
      await rm(dir, { recursive: true, force: true });
    });
    await writeFile(
      join(dir, 'fleet.json'),
      JSON.stringify({ urls: {}, fleetToken: 't', auditQueue: fleetQueue, pid: process.pid }),
    );
    const backend = stdioBackendCommand();
    await writeFile(
      join(dir, 'fleet.yaml'),
      [
        'backends:',
        `  - {id: fixture, command: ${JSON.stringify(backend.command)}, args: ${JSON.stringify(backend.args)}}`,
        `registry: {prefix: cli-stdio-${id}}`,
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the orchestrator expands it.
        'audit: {queue: "${AUDIT_QUEUE:-fleet-audit}"}',
        '',
      ].join('\n'),
    );
    const session = async (env: Record<string, string>) => {
      const cli = sourceCommand(CLI, ['stdio', '--state-dir', dir]);
      const client = new Client({ name: 'desktop', version: '1.0.0' });
      const transport = new StdioClientTransport({
        ...cli,
        cwd: dir,
        env: {
          LOG_LEVEL: 'warn',
          OTEL_TRACES_EXPORTER: 'none',
          OTEL_METRICS_EXPORTER: 'none',
          ...env,
        },
        stderr: 'pipe',
      });
      // Kept to say why, should the session end early.
      let stderr = '';
      transport.stderr?.on('data', (chunk) => {
        stderr += String(chunk);
      });
      try {
        await client.connect(transport);
        await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
      } catch (error) {
        await new Promise((r) => setTimeout(r, 200));
        throw new Error(`${(error as Error).message}; the session's stderr:\n${stderr}`);
      } finally {
        await client.close();
      }
    };
    const arrived = async (queue: string) => {
      const deadline = Date.now() + 10_000;
      while ((await queueKeys(queue)).length === 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      return (await queueKeys(queue)).length > 0;
    };

    // Two desktop clients starting their sessions at the same moment: each gets a journal of
    // its own, and its records go where it was told.
    await Promise.all([session({}), session({ AUDIT_QUEUE: ownQueue })]);
    expect(await arrived(fleetQueue)).toBe(true);
    expect(await arrived(ownQueue)).toBe(true);
    // Nothing left behind: no journal claim, no journal of a session that ended cleanly.
    expect((await readdir(dir)).sort()).toEqual(['fleet.json', 'fleet.yaml']);
  }, 60_000);
});
