/**
 * Test helpers: unique BullMQ prefixes on the shared Redis, private `redis-server`
 * processes that tests may kill (`startRedisServer`, from the shared fixtures), temporary
 * directories, a capturing logger. Everything a helper creates is removed after the current
 * test.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defer } from '@fleet/test-fixtures/cleanup';
import { deleteKeys } from '@fleet/test-fixtures/teardown';
import { type Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { AUDIT_QUEUE, type AuditLogger, type AuditRecord, type LogFields } from '../src/index.ts';

export { freePort, startRedisServer } from '@fleet/test-fixtures/redis-server';
export { waitFor } from '../src/testing.ts';
export { makeRecords } from './records.ts';
export { defer };

/** The Redis every machine of this kind runs. */
export const SHARED_REDIS_URL = 'redis://127.0.0.1:6379';

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
