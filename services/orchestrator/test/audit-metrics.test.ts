/**
 * The audit producer on the orchestrator's /metrics, with the orchestrator as a real process
 * (`main.ts`) in front of a real backend: what real calls enqueue is what reaches the queue
 * in real Redis, and with Redis unreachable the records wait in memory, then in the journal,
 * and the metrics say how many.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { metricSample } from '@fleet/audit/testing';
import {
  deleteKeys,
  exitOf,
  freePort,
  type ServiceProcess,
  sourceCommand,
  startHttpBackend,
  startServiceProcess,
} from '@fleet/test-fixtures';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, textOf, waitFor } from './harness.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const REDIS_URL = 'redis://127.0.0.1:6379';

/** One series of `/metrics` text; NaN when it is missing (so no comparison holds). */
const value = (text: string, metric: string, labels: Record<string, string> = {}): number =>
  metricSample(text, metric, labels) ?? Number.NaN;

const records = (outcome: string, more: Record<string, string> = {}) =>
  ['fleet_audit_producer_records_total', { fleet_audit_outcome: outcome, ...more }] as const;

async function scrape(service: ServiceProcess): Promise<string> {
  const response = await fetch(`${service.url}/metrics`);
  expect(response.status).toBe(200);
  return response.text();
}

/** An orchestrator process in front of a fixture backend, with its audit queue and journal. */
async function startOrchestrator(
  redisUrl: string,
  env: Record<string, string> = {},
): Promise<{
  orchestrator: ServiceProcess;
  queue: string;
  journal: string;
  /** Another orchestrator on the same config, queue and journal (after this one is gone). */
  again(redisUrl: string, env?: Record<string, string>): Promise<ServiceProcess>;
}> {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const dir = mkdtempSync(join(tmpdir(), 'fleet-orch-audit-'));
  defer(async () => rmSync(dir, { recursive: true, force: true }));
  const id = randomUUID();
  const queue = `audit-metrics-${id}`;
  // Runs after the orchestrator stopped: its queue's and registry's keys (both named by `id`).
  defer(async () => {
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    await deleteKeys(redis, `*${id}*`);
    redis.disconnect();
  });
  const configPath = join(dir, 'fleet.yaml');
  writeFileSync(
    configPath,
    `backends:\n  - {id: fx, url: "${backend.url}"}\nregistry: {prefix: audit-metrics-${id}}\naudit: {queue: ${queue}}\n`,
  );
  const journal = join(dir, 'audit.ndjson');
  const start = async (redisUrl: string, env: Record<string, string> = {}) => {
    const started = await startServiceProcess({
      ...sourceCommand(MAIN),
      cwd: dir,
      env: {
        PORT: '0',
        FLEET_CONFIG: configPath,
        REDIS_URL: redisUrl,
        AUDIT_JOURNAL: journal,
        LOG_LEVEL: 'error',
        OTEL_TRACES_EXPORTER: 'none',
        ...env,
      },
      readyTimeoutMs: 30_000,
    });
    defer(() => started.stop());
    return started;
  };
  return { orchestrator: await start(redisUrl, env), queue, journal, again: start };
}

/** The records in an audit queue's batch jobs. */
async function queuedRecords(queue: string): Promise<Array<{ target?: string }>> {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  const jobs = new Queue(queue, { connection });
  try {
    const all = await jobs.getJobs(['waiting', 'prioritized', 'delayed']);
    return all.flatMap((job) => (job.data as { records: Array<{ target?: string }> }).records);
  } finally {
    await jobs.close();
    connection.disconnect();
  }
}

describe('audit producer metrics of the orchestrator', () => {
  it('counts the records of real calls as enqueued and sent, as many as reached the queue', async () => {
    const { orchestrator, queue } = await startOrchestrator(REDIS_URL);
    const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    const jobs = new Queue(queue, { connection });
    defer(async () => {
      await jobs.close();
      connection.disconnect();
    });

    const client = await connectClient(`${orchestrator.url}/mcp`);
    const calls = 4;
    for (let i = 0; i < calls; i++)
      expect(textOf(await client.callTool({ name: 'echo', arguments: { text: `a${i}` } }))).toBe(
        `[fx] a${i}`,
      );

    // The records in Redis: batch jobs of {records}.
    const queued = async () => {
      const all = await jobs.getJobs(['waiting', 'prioritized', 'delayed']);
      return all.flatMap((job) => (job.data as { records: Array<{ target?: string }> }).records);
    };
    // One record per chain phase of each call: request and response.
    await waitFor(
      async () => (await queued()).filter((r) => r.target === 'echo').length === 2 * calls,
      10_000,
      'the records of the calls in the queue',
    );
    const inQueue = (await queued()).length;
    let text = '';
    await waitFor(
      async () => {
        text = await scrape(orchestrator);
        return value(text, ...records('sent')) === inQueue;
      },
      10_000,
      'the sent count to reach what is in the queue',
    );
    expect(value(text, ...records('enqueued'))).toBe(inQueue);
    expect(value(text, ...records('journaled'))).toBe(0);
    for (const reason of ['journal_write', 'journal_read'])
      expect(value(text, ...records('dropped', { fleet_audit_reason: reason }))).toBe(0);
    for (const reason of ['invalid_id', 'unserialisable'])
      expect(value(text, ...records('rejected', { fleet_audit_reason: reason }))).toBe(0);
    const batches = await jobs.getJobCountByTypes('waiting', 'prioritized', 'delayed');
    expect(value(text, 'fleet_audit_producer_batches_total', { fleet_audit_outcome: 'sent' })).toBe(
      batches,
    );
    expect(
      value(text, 'fleet_audit_producer_batches_total', { fleet_audit_outcome: 'failed' }),
    ).toBe(0);
    expect(value(text, 'fleet_audit_producer_pending', { state: 'memory' })).toBe(0);
    expect(value(text, 'fleet_audit_producer_pending', { state: 'journal' })).toBe(0);
    expect(value(text, 'fleet_audit_producer_connected')).toBe(1);
  }, 60_000);

  it('journals records while Redis is unreachable, and says so on /metrics', async () => {
    // The producer holds AUDIT_MAX_BUFFERED records in memory before the oldest spill to the
    // journal: two records a call, 100 calls fill it, the rest spill. Sixteen sessions side
    // by side (the SDK client keeps a listener per call made on its session).
    const maxBuffered = 200;
    const { orchestrator, journal } = await startOrchestrator(
      `redis://127.0.0.1:${await freePort()}`,
      { AUDIT_MAX_BUFFERED: String(maxBuffered) },
    );
    const calls = 160;
    let next = 0;
    const caller = async () => {
      const client = await connectClient(`${orchestrator.url}/mcp`);
      while (next < calls) {
        next++;
        await client.callTool({ name: 'echo', arguments: { text: 'x' } });
      }
    };
    await Promise.all(Array.from({ length: 16 }, caller));

    let text = '';
    await waitFor(
      async () => {
        text = await scrape(orchestrator);
        return value(text, ...records('journaled')) > 0;
      },
      10_000,
      'records to be journaled',
    );
    const enqueued = value(text, ...records('enqueued'));
    const journaled = value(text, ...records('journaled'));
    const memory = value(text, 'fleet_audit_producer_pending', { state: 'memory' });
    expect(enqueued).toBeGreaterThanOrEqual(2 * calls);
    expect(memory).toBeLessThanOrEqual(maxBuffered);
    expect(journaled).toBeGreaterThanOrEqual(2 * calls - maxBuffered);
    expect(journaled + memory).toBe(enqueued);
    expect(value(text, 'fleet_audit_producer_pending', { state: 'journal' })).toBe(journaled);
    expect(value(text, ...records('sent'))).toBe(0);
    expect(value(text, ...records('dropped', { fleet_audit_reason: 'journal_write' }))).toBe(0);
    expect(value(text, 'fleet_audit_producer_connected')).toBe(0);
    // The journal holds them, one line each.
    const lines = readFileSync(journal, 'utf8').split('\n').filter(Boolean);
    expect(lines).toHaveLength(journaled);
  }, 120_000);

  it.each([
    { writeAhead: 'true', kept: 'every one' },
    { writeAhead: 'false', kept: 'none' },
  ])(
    'the next start of a SIGKILLed orchestrator delivers $kept of the records it held (AUDIT_WRITE_AHEAD=$writeAhead)',
    async ({ writeAhead }) => {
      // Redis unreachable: the records of the calls wait in memory (far below
      // AUDIT_MAX_BUFFERED, so none spills to the journal) when the process is killed.
      const { orchestrator, queue, journal, again } = await startOrchestrator(
        `redis://127.0.0.1:${await freePort()}`,
        { AUDIT_WRITE_AHEAD: writeAhead },
      );
      const client = await connectClient(`${orchestrator.url}/mcp`);
      const calls = 5;
      for (let i = 0; i < calls; i++)
        expect(textOf(await client.callTool({ name: 'echo', arguments: { text: `k${i}` } }))).toBe(
          `[fx] k${i}`,
        );
      expect(value(await scrape(orchestrator), ...records('journaled'))).toBe(0);
      orchestrator.child.kill('SIGKILL');
      await orchestrator.exited;
      expect(readFileSync(journal, { encoding: 'utf8', flag: 'a+' })).toBe('');

      // The next orchestrator on the same journal, with Redis up.
      const next = await again(REDIS_URL);
      if (writeAhead === 'true') {
        await waitFor(
          async () => (await queuedRecords(queue)).filter((r) => r.target === 'echo').length > 0,
          15_000,
          'the recovered records in the queue',
        );
        const text = await scrape(next);
        expect(value(text, ...records('recovered'))).toBe(2 * calls);
        await waitFor(
          async () => value(await scrape(next), ...records('replayed')) === 2 * calls,
          10_000,
          'every recovered record to be replayed',
        );
        expect((await queuedRecords(queue)).filter((r) => r.target === 'echo')).toHaveLength(
          2 * calls,
        );
      } else {
        // Give a replay every chance to happen: nothing was there to replay.
        await new Promise((r) => setTimeout(r, 1500));
        expect(value(await scrape(next), ...records('recovered'))).toBe(0);
        expect(await queuedRecords(queue)).toEqual([]);
      }
    },
    60_000,
  );

  it.each([
    ['AUDIT_WRITE_AHEAD', 'maybe', 'must be one of true, 1, yes, on, false, 0, no, off'],
    ['AUDIT_WRITE_AHEAD', '2', 'must be one of true, 1, yes, on, false, 0, no, off'],
    ['AUDIT_MAX_BUFFERED', '1e3', 'must be an integer >= 0 (digits only)'],
    ['AUDIT_MAX_BUFFERED', ' ', 'must be an integer >= 0 (digits only)'],
    ['AUDIT_MAX_BUFFERED', '-1', 'must be an integer >= 0 (digits only)'],
  ])(
    'refuses %s=%j at start-up, naming it',
    async (name, value, problem) => {
      const { command, args } = sourceCommand(MAIN);
      const child = spawn(command, args, {
        env: { ...process.env, PORT: '0', [name]: value },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString('utf8');
      });
      const exit = await exitOf(child);
      expect(exit.code).toBe(1);
      expect(stderr).toContain(`${name} ${problem}, got "${value}"`);
    },
    30_000,
  );
});
