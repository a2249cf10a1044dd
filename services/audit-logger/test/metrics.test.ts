/**
 * The store side of the audit pipeline on /metrics: the audit-worker as a real process against
 * real PostgreSQL (a schema of its own, with a trigger that refuses one record as a data
 * exception) and real Redis (a prefix of its own). What the test puts in the queue is what the
 * worker's counters and the queue's length by state say.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  AUDIT_JOB_NAME,
  AUDIT_JOB_OPTIONS,
  AUDIT_QUEUE,
  type AuditRecord,
  createAuditRecord,
} from '@fleet/audit';
import { metricSample } from '@fleet/audit/testing';
import { type ServiceProcess, sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  DATABASE_URL,
  defer,
  openSchemaStore,
  REDIS_URL,
  runSql,
  uniquePrefix,
  waitFor,
} from './helpers.ts';

const WORKER = fileURLToPath(new URL('../src/worker.ts', import.meta.url));

function record(target: string): AuditRecord {
  return createAuditRecord({
    kind: 'chain',
    event: 'tools/call',
    phase: 'request',
    method: 'tools/call',
    target,
    decision: 'allowed',
    status: 'success',
    durationMs: 1,
  });
}

/** The /metrics text of `service`. */
async function scrape(service: ServiceProcess): Promise<string> {
  return (await fetch(`${service.url}/metrics`)).text();
}

describe('audit-worker metrics', () => {
  it("shows the records stored and refused, its jobs, and the queue's length by state", async () => {
    const { schema, drop } = await openSchemaStore();
    defer(drop);
    // PostgreSQL refuses the record with target `unstorable` by its data (SQLSTATE 22023),
    // as it would a value the record schema did not foresee.
    await runSql(`
      CREATE FUNCTION "${schema}".refuse_unstorable() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.target = 'unstorable' THEN
          RAISE EXCEPTION 'refused by the test' USING ERRCODE = '22023';
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_unstorable BEFORE INSERT ON "${schema}".audit_records
        FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse_unstorable();
    `);
    const prefix = uniquePrefix();
    const dir = await mkdtemp(join(tmpdir(), 'audit-worker-metrics-'));
    defer(() => rm(dir, { recursive: true, force: true }));
    const worker = await startServiceProcess({
      ...sourceCommand(WORKER),
      cwd: dir,
      env: {
        LOG_LEVEL: 'error',
        OTEL_TRACES_EXPORTER: 'none',
        PORT: '0',
        DATABASE_URL,
        AUDIT_DB_SCHEMA: schema,
        AUDIT_PREFIX: prefix,
      },
      readyTimeoutMs: 40_000,
    });
    defer(() => worker.stop('SIGKILL'));
    await waitFor(async () => (await fetch(`${worker.url}/readyz`)).status === 200, 'readiness');

    const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    const queue = new Queue(AUDIT_QUEUE, {
      connection,
      prefix,
      defaultJobOptions: AUDIT_JOB_OPTIONS,
    });
    defer(async () => {
      await queue.close();
      connection.disconnect();
    });
    const add = (data: unknown, jobId: string, delay = 0) =>
      queue.add(AUDIT_JOB_NAME, data, { jobId, ...(delay ? { delay } : {}) });

    // Stored: five records. Failed jobs: one record the store refuses, one malformed record.
    const stored = Array.from({ length: 5 }, (_, i) => record(`tool-${i}`));
    for (const r of stored) await add(r, r.id);
    const unstorable = record('unstorable');
    await add(unstorable, unstorable.id);
    await add({ kind: 'not a record' }, 'malformed');
    // Delayed: three jobs due in an hour.
    for (const r of Array.from({ length: 3 }, () => record('later'))) await add(r, r.id, 3_600_000);

    const series = (text: string, metric: string, labels: Record<string, string> = {}) =>
      metricSample(text, metric, labels);
    const records = (text: string, outcome: string) =>
      series(text, 'fleet_audit_worker_records_total', { fleet_audit_outcome: outcome });
    const jobs = (text: string, outcome: string) =>
      series(text, 'fleet_audit_worker_jobs_total', { fleet_audit_outcome: outcome });
    const length = (text: string, state: string) =>
      series(text, 'fleet_audit_queue_jobs', { fleet_audit_job_state: state });

    let text = '';
    await waitFor(
      async () => {
        text = await scrape(worker);
        return jobs(text, 'completed') === 5 && length(text, 'failed') === 2;
      },
      'the worker to settle the jobs and the queue length to follow',
      20_000,
    );
    expect(records(text, 'processed')).toBe(5);
    expect(records(text, 'inserted')).toBe(5);
    expect(records(text, 'refused')).toBe(1);
    expect(records(text, 'malformed')).toBe(1);
    expect(jobs(text, 'failed')).toBe(2);
    expect(jobs(text, 'retried')).toBe(0);
    const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed');
    expect(counts).toEqual({ waiting: 0, active: 0, delayed: 3, failed: 2 });
    for (const [state, count] of Object.entries(counts)) expect(length(text, state)).toBe(count);
    expect(series(text, 'fleet_audit_worker_store_unavailable')).toBe(0);

    // A paused queue keeps what arrives waiting; the gauge shows it once its reading expires.
    await queue.pause();
    for (const r of Array.from({ length: 4 }, () => record('paused'))) await add(r, r.id);
    await waitFor(
      async () => length(await scrape(worker), 'waiting') === 4,
      'the waiting jobs on /metrics',
      15_000,
    );
    expect(await worker.stop('SIGTERM', 15_000)).toEqual({ code: 0, signal: null });
  }, 90_000);
});
