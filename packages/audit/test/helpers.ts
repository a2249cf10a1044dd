/**
 * Test helpers: unique BullMQ prefixes on the shared Redis, private `redis-server`
 * processes that tests may kill, temporary directories, a capturing logger. Everything a
 * helper creates is removed after the current test.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { defer } from '@fleet/test-fixtures/cleanup';
import { deleteKeys } from '@fleet/test-fixtures/teardown';
import { type Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import {
  AUDIT_QUEUE,
  type AuditLogger,
  type AuditRecord,
  createAuditRecord,
  type LogFields,
} from '../src/index.ts';

export { defer };

/** The Redis every machine of this kind runs. */
export const SHARED_REDIS_URL = 'redis://127.0.0.1:6379';

const run = promisify(execFile);

let prefixes = 0;

/** A BullMQ prefix no other test uses; its keys are deleted after the test. */
export function uniquePrefix(url = SHARED_REDIS_URL): string {
  const prefix = `test-audit-${process.pid}-${Date.now().toString(36)}-${prefixes++}`;
  defer(() => deleteKeysAt(url, `${prefix}:*`));
  return prefix;
}

/** Delete the keys matching `pattern` on the Redis at `url`, on a connection of its own. */
async function deleteKeysAt(url: string, pattern: string): Promise<void> {
  const client = new Redis(url, { maxRetriesPerRequest: 1, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await deleteKeys(client, pattern);
  } finally {
    client.disconnect();
  }
}

/** A fresh temporary directory, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fleet-audit-'));
  defer(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A TCP port that was free a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
  const address = server.address();
  await new Promise((closed) => server.close(closed));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Whether something accepts TCP connections on the port. */
function listening(port: number): Promise<boolean> {
  return new Promise((answer) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      answer(true);
    });
    socket.once('error', () => answer(false));
  });
}

import { waitFor } from '../src/testing.ts';

export { waitFor };

/** A private Redis this test may kill and restart (same port, same data directory). */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** Start (again) and wait until it accepts connections. */
  start(): Promise<void>;
  /** SIGKILL it by pid and wait until the port refuses connections. */
  kill(): Promise<void>;
  /** Write a snapshot (SAVE) that the next start loads: Redis here runs without persistence. */
  save(): Promise<void>;
}

/** Options for {@link startRedisServer}. */
export interface RedisServerOptions {
  /**
   * Log every write to an append-only file, fsynced before the reply, so whatever Redis
   * acknowledged survives SIGKILL. Default false: no persistence at all.
   */
  durable?: boolean;
}

/** Start a private `redis-server` on a free port; it is killed after the test. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const port = await freePort();
  const dir = await tempDir();
  const pidFile = join(dir, 'redis.pid');
  const url = `redis://127.0.0.1:${port}`;
  let running = false;

  const pid = async (): Promise<number> => Number((await readFile(pidFile, 'utf8')).trim());

  const server: RedisServer = {
    port,
    url,
    async start() {
      await rm(pidFile, { force: true });
      const persistence = options.durable
        ? ['--appendonly', 'yes', '--appendfsync', 'always']
        : ['--appendonly', 'no'];
      // biome-ignore format: the flags read as one command line
      await run('redis-server', [
        '--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence,
        '--daemonize', 'yes', '--pidfile', pidFile, '--dir', dir, '--dbfilename', 'dump.rdb',
        '--logfile', join(dir, 'redis.log'),
      ]);
      running = true;
      await waitFor(() => listening(port), `redis-server on port ${port}`, 5000);
      await waitFor(
        () => readFile(pidFile, 'utf8').then(Boolean, () => false),
        'the redis pid file',
        5000,
      );
    },
    async kill() {
      if (!running) return;
      running = false;
      process.kill(await pid(), 'SIGKILL');
      await waitFor(async () => !(await listening(port)), 'redis-server to die', 5000);
    },
    async save() {
      const client = new Redis(url, { maxRetriesPerRequest: 1 });
      try {
        await client.save();
      } finally {
        client.disconnect();
      }
    },
  };
  defer(() => server.kill());
  await server.start();
  return server;
}

/** The waiting jobs of a queue, oldest first. */
export async function readJobs(
  url: string,
  prefix: string,
  queueName = AUDIT_QUEUE,
): Promise<Job<AuditRecord>[]> {
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const queue = new Queue<AuditRecord>(queueName, { connection, prefix });
  try {
    return await queue.getJobs(['wait'], 0, -1, true);
  } finally {
    await queue.close();
    connection.disconnect();
  }
}

/** `count` distinct, ordered records (targets `tool-<start>`, `tool-<start+1>`, ...). */
export function makeRecords(count: number, start = 0): AuditRecord[] {
  return Array.from({ length: count }, (_, i) =>
    createAuditRecord({
      kind: 'chain',
      event: 'tools/call',
      phase: 'request',
      method: 'tools/call',
      target: `tool-${start + i}`,
      decision: 'allowed',
      status: 'success',
      durationMs: 1,
    }),
  );
}

/** One captured log line. */
export interface LogEntry {
  level: 'info' | 'warn' | 'error';
  message: string;
  fields: LogFields | undefined;
}

/** A logger that keeps what it is told. */
export function captureLogger(): AuditLogger & { entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  return {
    entries,
    info: (message, fields) => entries.push({ level: 'info', message, fields }),
    warn: (message, fields) => entries.push({ level: 'warn', message, fields }),
    error: (message, fields) => entries.push({ level: 'error', message, fields }),
  };
}

/** The record ids in an NDJSON journal file, in file order. */
export async function journalIds(path: string): Promise<string[]> {
  const text = await readFile(path, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => (JSON.parse(line) as AuditRecord).id);
}
