/**
 * The audit trail of tool pin changes: every approval and every pin forgotten on
 * `/policy/pins`, and every attempt refused for its token, becomes an `admin` audit record (who, what, when) through the real
 * audit producer and a real BullMQ queue on the local Redis (a queue and key prefix per test);
 * reads and requests that change nothing do not. An approval never waits for the audit queue,
 * and (AUDIT_WRITE_AHEAD) its record survives the process being killed before its batch goes.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import {
  ADMIN_API_NAME,
  type AdminChange,
  type AuditProducer,
  type AuditRecord,
  createAdminAuditor,
  createAuditProducer,
  parseAuditRecord,
} from '@fleet/audit';
import { journalHolder } from '@fleet/audit/lock';
import { waitFor } from '@fleet/audit/testing';
import { defer } from '@fleet/interceptor-kit/testing';
import { freePort, sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { startRedisServer } from '@fleet/test-fixtures/redis-server';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { FLEET_TOKEN_OPERATOR } from '../src/app.ts';
import {
  AUTH,
  listTools,
  PINNED,
  poisoned,
  policyFile,
  readFile,
  search,
  sharedRedis,
  startService,
  TOKEN,
} from './pin-service.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const BAD_TOKEN = `wrong-${randomUUID()}`;

/**
 * An audit queue of this test on the local Redis (its own name and BullMQ prefix) with one
 * journal: producers write to it (on `connection`), `records()` reads what reached it.
 * Producers, keys and journal are removed after the test.
 */
function auditQueue() {
  const queue = `pins-audit-${randomUUID()}`;
  const prefix = `test-pins-audit-${randomUUID()}`;
  const dir = mkdtempSync(join(tmpdir(), 'pins-audit-'));
  const journalPath = join(dir, 'journal.ndjson');
  const producers: AuditProducer[] = [];
  defer(async () => {
    for (const producer of producers) await producer.close();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    producer(connection = REDIS_URL): AuditProducer {
      const producer = createAuditProducer({
        connection,
        queue,
        prefix,
        journalPath,
        logger: quiet,
      });
      producers.push(producer);
      return producer;
    },
    records: () => queuedRecords(REDIS_URL, queue, prefix),
  };
}

/** The records in BullMQ queue `queue` on `url`, in order, as the worker would parse them. */
async function queuedRecords(url: string, queue: string, prefix?: string): Promise<AuditRecord[]> {
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const reader = new Queue(queue, { connection, ...(prefix === undefined ? {} : { prefix }) });
  try {
    const jobs = await reader.getJobs(['wait', 'active', 'completed', 'failed'], 0, -1, true);
    return jobs
      .sort((a, b) => Number(a.timestamp) - Number(b.timestamp))
      .map((job) => parseAuditRecord(job.data));
  } finally {
    await reader.close();
    connection.disconnect();
  }
}

/** A pinning service whose pin changes go to `producer`, with `read_file` drifted. */
async function serviceWithDrift(
  producer: AuditProducer,
  options: { token?: string | null; tool?: string } = {},
) {
  const auditor = createAdminAuditor(producer);
  const changes: AdminChange[] = [];
  const svc = await startService({
    policy: PINNED,
    ...sharedRedis(),
    token: options.token,
    onAdminChange: (change) => {
      changes.push(change);
      auditor.record(change);
    },
  });
  const tool = { ...readFile, name: options.tool ?? readFile.name };
  await svc.list(tool, search);
  await svc.list({ ...poisoned, name: tool.name }, search);
  return { svc, changes };
}

const row = (r: AuditRecord) => [r.kind, r.event, r.target, r.principal, r.decision, r.status];

describe('tool pin audit trail', () => {
  it('records who approved a drift and each attempt refused for its token, nothing else', async () => {
    const audit = auditQueue();
    const producer = audit.producer();
    const { svc, changes } = await serviceWithDrift(producer);

    const wrong = { authorization: `Bearer ${BAD_TOKEN}` };
    expect((await svc.approve('read_file', '', wrong)).status).toBe(401);
    expect((await svc.approve('read_file', '', {})).status).toBe(401);
    // Neither reads nor requests that change nothing for other reasons are recorded.
    expect((await svc.pins()).status).toBe(200);
    expect((await svc.pins({})).status).toBe(401);
    expect((await svc.approve('read_file', '?digest=nothex')).status).toBe(400);
    expect((await svc.approve('search')).status).toBe(404);
    expect((await svc.approve('read_file', `?digest=${'0'.repeat(64)}`)).status).toBe(409);
    expect((await svc.approve('read_file')).status).toBe(200);
    expect((await svc.approve('read_file')).status).toBe(404);

    const method = 'POST /policy/pins/{tool}/approve';
    const reason = 'a valid bearer token is required';
    const refused = {
      event: 'admin/pins/approve',
      method,
      target: 'read_file',
      outcome: 'refused',
    };
    expect(changes.map(({ durationMs: _, ...rest }) => rest)).toEqual([
      { ...refused, reason },
      { ...refused, reason },
      { ...refused, outcome: 'done', operator: FLEET_TOKEN_OPERATOR },
    ]);
    for (const change of changes) expect(change.durationMs).toBeGreaterThanOrEqual(0);

    await producer.flush();
    const records = await audit.records();
    expect(records.map(row)).toEqual([
      ['admin', 'admin/pins/approve', 'read_file', undefined, 'denied', 'validation_failed'],
      ['admin', 'admin/pins/approve', 'read_file', undefined, 'denied', 'validation_failed'],
      ['admin', 'admin/pins/approve', 'read_file', FLEET_TOKEN_OPERATOR, 'allowed', 'success'],
    ]);
    expect(records[0]).toMatchObject({
      phase: 'request',
      method,
      interceptors: [],
      abortReasons: [{ interceptor: ADMIN_API_NAME, reason, type: 'validation', phase: 'request' }],
    });
    expect(records[2]?.abortReasons).toEqual([]);
    // Neither the refused token nor the service's reaches the queue.
    const text = JSON.stringify(records);
    expect(text).not.toContain(BAD_TOKEN);
    expect(text).not.toContain(AUTH.authorization.slice('Bearer '.length));
  });

  it('records who forgot a pin and each attempt refused for its token, nothing else', async () => {
    const audit = auditQueue();
    const producer = audit.producer();
    const { svc, changes } = await serviceWithDrift(producer);

    const wrong = { authorization: `Bearer ${BAD_TOKEN}` };
    expect((await svc.forget('read_file', wrong)).status).toBe(401);
    expect((await svc.forget('read_file', {})).status).toBe(401);
    // Nothing there to forget: not recorded.
    expect((await svc.forget('never_seen')).status).toBe(404);
    expect((await svc.forget('read_file')).status).toBe(204);
    expect((await svc.forget('read_file')).status).toBe(404);

    const method = 'DELETE /policy/pins/{tool}';
    const reason = 'a valid bearer token is required';
    const refused = { event: 'admin/pins/forget', method, target: 'read_file', outcome: 'refused' };
    expect(changes.map(({ durationMs: _, ...rest }) => rest)).toEqual([
      { ...refused, reason },
      { ...refused, reason },
      { ...refused, outcome: 'done', operator: FLEET_TOKEN_OPERATOR },
    ]);

    await producer.flush();
    const records = await audit.records();
    expect(records.map(row)).toEqual([
      ['admin', 'admin/pins/forget', 'read_file', undefined, 'denied', 'validation_failed'],
      ['admin', 'admin/pins/forget', 'read_file', undefined, 'denied', 'validation_failed'],
      ['admin', 'admin/pins/forget', 'read_file', FLEET_TOKEN_OPERATOR, 'allowed', 'success'],
    ]);
    expect(records.map((r) => r.method)).toEqual([method, method, method]);
    expect(records[0]?.abortReasons).toEqual([
      { interceptor: ADMIN_API_NAME, reason, type: 'validation', phase: 'request' },
    ]);
    expect(records[2]?.abortReasons).toEqual([]);
    expect(JSON.stringify(records)).not.toContain(BAD_TOKEN);
  });

  it("records an open API's approvals as anonymous, under the decoded tool name", async () => {
    const audit = auditQueue();
    const producer = audit.producer();
    const { svc } = await serviceWithDrift(producer, { token: null, tool: 'fs/read' });
    expect((await svc.approve('fs/read', '', {})).status).toBe(200);
    await producer.flush();
    expect((await svc.forget('fs/read', {})).status).toBe(204);
    await producer.flush();
    expect((await audit.records()).map(row)).toEqual([
      ['admin', 'admin/pins/approve', 'fs/read', { type: 'anonymous' }, 'allowed', 'success'],
      ['admin', 'admin/pins/forget', 'fs/read', { type: 'anonymous' }, 'allowed', 'success'],
    ]);
  });

  it("answers an approval at once while the audit queue's Redis is down, and loses no record", async () => {
    const audit = auditQueue();
    // Nothing listens there: every connection attempt is refused.
    const down = audit.producer(`redis://127.0.0.1:${await freePort()}`);
    const { svc } = await serviceWithDrift(down);

    const started = performance.now();
    const approved = await svc.approve('read_file');
    const tookMs = performance.now() - started;
    expect(approved.status).toBe(200);
    expect(await approved.json()).toMatchObject({ tool: 'read_file' });
    // The producer's send timeout and reconnect backoff are seconds: the answer waited for neither.
    expect(tookMs).toBeLessThan(1_000);
    expect(down.metrics()).toMatchObject({ enqueued: 1, sent: 0, connected: false });

    // Closed while Redis is down, the producer journals the record; the next one on the same
    // journal (a restarted process) replays it once Redis answers.
    await down.close();
    expect(down.metrics().journalPending).toBe(1);
    const up = audit.producer();
    await up.flush();
    expect((await audit.records()).map(row)).toEqual([
      ['admin', 'admin/pins/approve', 'read_file', FLEET_TOKEN_OPERATOR, 'allowed', 'success'],
    ]);
  });

  it('approves and forgets when the audit listener throws', async () => {
    const svc = await startService({
      policy: PINNED,
      ...sharedRedis(),
      onAdminChange: () => {
        throw new Error('listener broke');
      },
    });
    await svc.list(readFile);
    await svc.list(poisoned);
    expect((await svc.approve('read_file', '', {})).status).toBe(401);
    expect((await svc.approve('read_file')).status).toBe(200);
    expect((await svc.forget('read_file', {})).status).toBe(401);
    expect((await svc.forget('read_file')).status).toBe(204);
  });
});

describe('the process', () => {
  it('audits approvals on AUDIT_QUEUE, bounds refusals, and gives each process started from one directory a journal', async () => {
    // Its own Redis: the process uses the default pin key names, which other tests share.
    await using redis = await startRedisServer();
    const cwd = mkdtempSync(join(tmpdir(), 'pins-audit-process-'));
    defer(async () => rmSync(cwd, { recursive: true, force: true }));
    const queue = `pins-audit-${randomUUID()}`;
    const policy = policyFile(PINNED);
    const start = () =>
      startServiceProcess({
        ...sourceCommand(MAIN),
        cwd,
        env: {
          PORT: '0',
          REDIS_URL: redis.url,
          POLICY_FILE: policy,
          FLEET_TOKEN: TOKEN,
          AUDIT_QUEUE: queue,
          AUDIT_JOURNAL: undefined,
          OTEL_TRACES_EXPORTER: 'none',
        },
        readyTimeoutMs: 60_000,
      });
    const [one, two] = await Promise.all([start(), start()]);
    try {
      const journals = ['policy-validator-audit.ndjson', 'policy-validator-audit-2.ndjson'];
      expect(journals.map((file) => journalHolder(join(cwd, '.fleet', file))).sort()).toEqual(
        [one.pid, two.pid].sort(),
      );
      await listTools(one.url, [readFile], AUTH);
      await listTools(one.url, [poisoned], AUTH);
      const approve = (authorization: string) =>
        fetch(`${one.url}/policy/pins/read_file/approve`, {
          method: 'POST',
          headers: { authorization },
        });
      for (let i = 0; i < 62; i++) expect((await approve(`Bearer ${BAD_TOKEN}`)).status).toBe(401);
      expect((await approve(AUTH.authorization)).status).toBe(200);
    } finally {
      // SIGTERM: each closes its producer, which delivers what it holds.
      expect((await one.stop()).code).toBe(0);
      expect((await two.stop()).code).toBe(0);
    }
    const records = await queuedRecords(redis.url, queue);
    // 60 refusals a minute are recorded (ADMIN_REFUSALS_PER_MINUTE); the approval always is.
    expect(records).toHaveLength(61);
    expect(records.filter((r) => r.decision === 'denied')).toHaveLength(60);
    expect(records.at(-1)).toMatchObject({
      kind: 'admin',
      event: 'admin/pins/approve',
      target: 'read_file',
      principal: FLEET_TOKEN_OPERATOR,
      decision: 'allowed',
    });
    const warned = one
      .stderr()
      .split('\n')
      .filter((line) => line.includes('refused admin API attempts beyond the bound'));
    expect(warned).toEqual([expect.stringContaining('"unrecorded":1')]);
    expect(one.stderr()).not.toContain(BAD_TOKEN);
  });

  it.each([
    { writeAhead: 'true', kept: 'every one' },
    { writeAhead: 'false', kept: 'none' },
  ])(
    'the next start of a SIGKILLed process delivers $kept of the records it held (AUDIT_WRITE_AHEAD=$writeAhead)',
    async ({ writeAhead }) => {
      await using redis = await startRedisServer();
      const cwd = mkdtempSync(join(tmpdir(), 'pins-audit-killed-'));
      defer(async () => rmSync(cwd, { recursive: true, force: true }));
      const queue = `pins-audit-${randomUUID()}`;
      const journal = join(cwd, 'audit.ndjson');
      const start = (redisUrl: string) =>
        startServiceProcess({
          ...sourceCommand(MAIN),
          cwd,
          env: {
            PORT: '0',
            REDIS_URL: redisUrl,
            FLEET_TOKEN: TOKEN,
            AUDIT_QUEUE: queue,
            AUDIT_JOURNAL: journal,
            AUDIT_WRITE_AHEAD: writeAhead,
            OTEL_TRACES_EXPORTER: 'none',
          },
          readyTimeoutMs: 60_000,
        });
      // Redis unreachable: the records of the refused attempts (audited without touching the
      // pin store) wait in memory, far below AUDIT_MAX_BUFFERED, when the process is killed.
      const killed = await start(`redis://127.0.0.1:${await freePort()}`);
      for (let i = 0; i < 3; i++) {
        const refused = await fetch(`${killed.url}/policy/pins/read_file/approve`, {
          method: 'POST',
          headers: { authorization: `Bearer ${BAD_TOKEN}` },
        });
        expect(refused.status).toBe(401);
      }
      expect((await killed.stop('SIGKILL')).signal).toBe('SIGKILL');

      const next = await start(redis.url);
      try {
        if (writeAhead === 'true') {
          await waitFor(
            async () => (await queuedRecords(redis.url, queue)).length === 3,
            'the recovered records in the queue',
          );
          const records = await queuedRecords(redis.url, queue);
          expect(records.map((r) => [r.event, r.decision])).toEqual(
            Array(3).fill(['admin/pins/approve', 'denied']),
          );
        } else {
          // Give a replay every chance to happen: nothing was there to replay.
          await new Promise((tick) => setTimeout(tick, 1500));
          expect(await queuedRecords(redis.url, queue)).toEqual([]);
        }
      } finally {
        expect((await next.stop()).code).toBe(0);
      }
    },
    120_000,
  );
});
