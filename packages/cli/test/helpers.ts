/**
 * Test helpers: run `fleet` in process with captured output, a real orchestrator process on
 * a free port with its own Redis prefix (removed afterwards over a raw RESP connection), and
 * child processes with bounded run times.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServiceProcess, sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { defer } from '@fleet/test-fixtures/cleanup';
import { type CliIO, runProgram } from '../src/index.ts';

export { defer };

/** The repository root. */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

const ORCHESTRATOR_MAIN = join(REPO_ROOT, 'services/orchestrator/src/main.ts');

/** What one `fleet` run printed and how it ended. */
export interface FleetRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Run `fleet argv` in process; `env` replaces the environment (default: empty), `launcher` is
 * how the CLI was launched, as hints print it (default: the `fleet` bin).
 */
export async function fleet(
  argv: readonly string[],
  options: {
    env?: Record<string, string>;
    cwd?: string;
    launcher?: string;
    /** The IO's `stdoutDrained`, given a reader of what stdout holds at any moment. */
    stdoutDrained?: (stdout: () => string) => Promise<void>;
  } = {},
): Promise<FleetRun> {
  let stdout = '';
  let stderr = '';
  const io: CliIO = {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    env: options.env ?? {},
    cwd: options.cwd ?? REPO_ROOT,
    fetch: globalThis.fetch,
    ...(options.launcher === undefined ? {} : { launcher: options.launcher }),
    ...(options.stdoutDrained === undefined
      ? {}
      : { stdoutDrained: () => options.stdoutDrained?.(() => stdout) ?? Promise.resolve() }),
  };
  const code = await runProgram(argv, io);
  return { code, stdout, stderr };
}

/** How {@link jsonServer} answers one request. */
export interface JsonAnswer {
  /** Default 200. */
  status?: number;
  body: unknown;
}

/**
 * An HTTP server on 127.0.0.1 that answers every request with the JSON `answer` gives for it
 * (once it resolves, for a slow server); its base URL, and `close`.
 */
export async function jsonServer(
  answer: (request: IncomingMessage) => JsonAnswer | Promise<JsonAnswer>,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer(async (request, response) => {
    const { status = 200, body } = await answer(request);
    response.writeHead(status, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A directory that looks like the root of a fleet workspace to the scaffold; removed after the test. */
export async function tempWorkspace(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'fleet-scaffold-'));
  defer(() => rm(root, { recursive: true, force: true }));
  await writeFile(join(root, 'pnpm-workspace.yaml'), 'packages:\n  - services/*\n');
  await writeFile(join(root, 'tsconfig.build.base.json'), '{}\n');
  await writeFile(join(root, 'vitest.shared.ts'), '');
  return root;
}

/** A RESP reply: status and bulk strings, integers, arrays; errors reject. */
export type RespValue = string | number | null | RespValue[];

class Incomplete extends Error {}

/** Parse one RESP reply at `offset`; throws {@link Incomplete} until it has all arrived. */
function parseReply(text: string, offset: number): [RespValue, number] {
  const end = text.indexOf('\r\n', offset);
  if (end < 0) throw new Incomplete();
  const line = text.slice(offset + 1, end);
  const next = end + 2;
  switch (text[offset]) {
    case '+':
      return [line, next];
    case '-':
      throw new Error(`redis: ${line}`);
    case ':':
      return [Number(line), next];
    case '$': {
      const length = Number(line);
      if (length < 0) return [null, next];
      if (Buffer.byteLength(text.slice(next)) < length + 2) throw new Incomplete();
      const bytes = Buffer.from(text.slice(next));
      const value = bytes.subarray(0, length).toString('utf8');
      return [value, next + value.length + 2];
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return [null, next];
      const items: RespValue[] = [];
      let position = next;
      for (let i = 0; i < count; i++) {
        const [item, after] = parseReply(text, position);
        items.push(item);
        position = after;
      }
      return [items, position];
    }
    default:
      throw new Error(`redis: unexpected reply ${JSON.stringify(text.slice(offset, end))}`);
  }
}

/**
 * Send one command to Redis (REDIS_URL, default 127.0.0.1:6379) over RESP, in database `db`
 * (default 0, selected first); resolve its reply.
 */
export function redisCommand(
  args: readonly string[],
  timeoutMs = 2_000,
  db = 0,
): Promise<RespValue> {
  const url = new URL(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port || 6379), url.hostname);
    let reply = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`redis ${args[0]}: no reply within ${timeoutMs} ms`));
    }, timeoutMs);
    const settle = (outcome: () => void) => {
      clearTimeout(timer);
      socket.end();
      outcome();
    };
    socket.setEncoding('utf8');
    socket.on('error', (error) => settle(() => reject(error)));
    socket.on('data', (chunk: string) => {
      reply += chunk;
      try {
        let [value, next] = parseReply(reply, 0);
        if (db !== 0) [value, next] = parseReply(reply, next);
        settle(() => resolve(value));
      } catch (error) {
        if (!(error instanceof Incomplete)) settle(() => reject(error));
      }
    });
    const frame = (words: readonly string[]) =>
      `*${words.length}\r\n${words.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
    socket.write(`${db === 0 ? '' : frame(['SELECT', String(db)])}${frame(args)}`);
  });
}

/** Delete every Redis key matching one of `patterns` (test prefixes only: KEYS is O(n)). */
export async function deleteRedisKeys(patterns: readonly string[]): Promise<number> {
  let deleted = 0;
  for (const pattern of patterns) {
    const keys = await redisCommand(['KEYS', pattern]);
    if (Array.isArray(keys) && keys.length > 0) {
      const count = await redisCommand(['DEL', ...keys.map(String)]);
      deleted += typeof count === 'number' ? count : 0;
    }
  }
  return deleted;
}

/**
 * A real audit-logger process, run from source in `dir` on loopback (its journal there),
 * serving the audit API on the audit queue `queue`; `env` says where its store is and adds
 * to its settings.
 */
export function startAuditLogger(
  dir: string,
  queue: string,
  env: Record<string, string>,
): Promise<ServiceProcess> {
  return startServiceProcess({
    ...sourceCommand(join(REPO_ROOT, 'services/audit-logger/src/main.ts')),
    cwd: dir,
    env: {
      PORT: '0',
      HOST: '127.0.0.1',
      AUDIT_QUEUE: queue,
      AUDIT_JOURNAL: join(dir, 'journal.ndjson'),
      LOG_LEVEL: 'warn',
      OTEL_TRACES_EXPORTER: 'none',
      OTEL_METRICS_EXPORTER: 'none',
      ...env,
    },
    readyTimeoutMs: 60_000,
  });
}

/** A real orchestrator process for the admin commands. */
export interface TestOrchestrator {
  url: string;
  adminToken: string;
  prefix: string;
  process: ServiceProcess;
  /** Stop the process, delete its Redis keys and its temp dir. */
  close(): Promise<void>;
}

/**
 * Start `services/orchestrator/src/main.ts` from source on a free port, with an admin token,
 * a unique registry prefix and audit queue, and the audit journal in a temp dir; `extraConfig`
 * (YAML) is appended to its config file.
 */
export async function startOrchestrator(extraConfig = ''): Promise<TestOrchestrator> {
  const dir = await mkdtemp(join(tmpdir(), 'fleet-cli-'));
  const prefix = `cli-test-${randomUUID()}`;
  const adminToken = `admin-${randomUUID()}`;
  const configPath = join(dir, 'fleet.yaml');
  await writeFile(
    configPath,
    `registry: {prefix: ${prefix}}\naudit: {queue: ${prefix}-audit}\n${extraConfig}`,
  );
  const command = sourceCommand(ORCHESTRATOR_MAIN);
  let started: ServiceProcess;
  try {
    started = await startServiceProcess({
      ...command,
      cwd: dir,
      env: {
        PORT: '0',
        HOST: '127.0.0.1',
        FLEET_CONFIG: configPath,
        FLEET_ADMIN_TOKEN: adminToken,
        AUDIT_JOURNAL: join(dir, 'audit.ndjson'),
        LOG_LEVEL: 'warn',
        OTEL_TRACES_EXPORTER: 'none',
        OTEL_METRICS_EXPORTER: 'none',
      },
      readyTimeoutMs: 30_000,
    });
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: started.url,
    adminToken,
    prefix,
    process: started,
    async close() {
      await started.stop('SIGTERM', 5_000);
      // The registry hash (`<prefix>:registry:services`) and the audit queue's BullMQ keys.
      await deleteRedisKeys([`${prefix}:*`, `bull:${prefix}-audit:*`]).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** How a child process ended and what it printed. */
export interface ChildRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Run `command args` in `cwd`, killed after `timeoutMs`; never rejects on a non-zero exit. */
export function runChild(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args], {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 50_000,
      killSignal: 'SIGKILL',
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}
