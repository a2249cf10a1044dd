/**
 * What `fleet audit trace` and `fleet audit query` say when the audit API cut its answer, against
 * a real audit-logger process (API only, AUDIT_WORKER=false) on a PostgreSQL schema of this
 * file's own. The records are written straight into that schema through the audit store, not
 * through the queue: one trace past the API's MAX_TRACE_CHARS (1,000 records of 37 KB, about
 * 450 in an answer) is built once for every test here, and one trace of three small records.
 */

import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openAuditStore } from '@fleet/audit';
import { largeRecordAt, recordAt, T0, traceId } from '@fleet/audit/testing';
import type { ServiceProcess } from '@fleet/test-fixtures';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteRedisKeys, fleet, REPO_ROOT, startAuditLogger } from './helpers.ts';

const DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `cli_audit_truncated_${process.pid}_${randomUUID().slice(0, 8)}`;
const queue = `cli-audit-truncated-${randomUUID()}`;
const big = traceId();
const normal = traceId();
const BIG_RECORDS = 1_000;

/** Run one statement on the test database (pg is the audit package's dependency). */
async function runSql(sql: string): Promise<void> {
  const pg = createRequire(join(REPO_ROOT, 'packages/audit/package.json'))('pg') as {
    Client: new (options: {
      connectionString: string;
    }) => {
      connect(): Promise<unknown>;
      query(sql: string): Promise<unknown>;
      end(): Promise<void>;
    };
  };
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

let auditLogger: ServiceProcess | undefined;
let dir: string | undefined;

beforeAll(async () => {
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const store = await openAuditStore({ databaseUrl: DATABASE_URL, schema, logger: quiet });
  try {
    for (let b = 0; b < BIG_RECORDS / 500; b++)
      await store.insertBatch(
        Array.from({ length: 500 }, (_, i) => largeRecordAt(b * 500 + i, { traceId: big })),
      );
    await store.insertBatch(
      Array.from({ length: 3 }, (_, i) => recordAt(i * 10, { traceId: normal })),
    );
  } finally {
    await store.close();
  }
  dir = await mkdtemp(join(tmpdir(), 'fleet-cli-truncated-'));
  auditLogger = await startAuditLogger(dir, queue, {
    DATABASE_URL,
    AUDIT_DB_SCHEMA: schema,
    AUDIT_WORKER: 'false',
  });
}, 90_000);

afterAll(async () => {
  await auditLogger?.stop('SIGTERM', 5_000);
  await deleteRedisKeys([`bull:${queue}:*`]).catch(() => undefined);
  await runSql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `fleet audit ...` pointed at the test audit-logger. */
const audit = (argv: readonly string[]) =>
  fleet(['audit', ...argv, '--audit', auditLogger?.url ?? '', '--state-dir', dir ?? '']);

/** The lines of a trace waterfall that are records (not interceptors, not notes). */
const recordLines = (stdout: string) =>
  stdout.split('\n').filter((line) => /^\d{4}-\d\d-\d\dT/.test(line));

const TRACE_NOTICE =
  /^\(the first (\d+) records: the trace has more than one answer holds; all of them: fleet audit export --trace ([0-9a-f]{32}) --since (\S+)\)$/;

describe('fleet audit trace', () => {
  it('says the trace was cut, and how many records it shows, when the API answers truncated', async () => {
    const run = await audit(['trace', big]);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    const lines = run.stdout.trimEnd().split('\n');
    const notice = TRACE_NOTICE.exec(lines.at(-1) ?? '');
    expect(notice).not.toBeNull();
    const shown = recordLines(run.stdout).length;
    expect(shown).toBeGreaterThan(300);
    expect(shown).toBeLessThan(BIG_RECORDS);
    expect(Number(notice?.[1])).toBe(shown);
    // The command it names gives every record of the trace.
    expect(notice?.[2]).toBe(big);
    const exported = await audit(['export', '--trace', big, '--since', notice?.[3] ?? '']);
    expect(exported.code).toBe(0);
    expect(exported.stdout.trimEnd().split('\n')).toHaveLength(BIG_RECORDS);
    // --json is the API's answer, flag included.
    const json = await audit(['trace', big, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ traceId: big, truncated: true });
  }, 20_000);

  it('says nothing of the kind for a whole trace', async () => {
    const run = await audit(['trace', normal]);
    expect(run.code).toBe(0);
    expect(recordLines(run.stdout)).toHaveLength(3);
    expect(run.stdout).not.toContain('(the first');
    expect(run.stdout).not.toContain('more than one answer holds');
    const json = await audit(['trace', normal, '--json']);
    expect(JSON.parse(json.stdout)).not.toHaveProperty('truncated');
  });
});

describe('fleet audit query', () => {
  const since = ['--since', new Date(T0 - 60_000).toISOString()];

  it('says a page cut at the API size bound holds fewer records than --limit, not to raise it', async () => {
    const run = await audit(['query', '--trace', big, '--limit', '500', ...since]);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines.at(-1)).toBe(
      '(more: the audit API cut this answer at its size bound; narrow the filters, or fleet audit export for every record)',
    );
    // The header, then the records of one page: far fewer than the 500 asked for.
    expect(lines.length - 2).toBeGreaterThan(50);
    expect(lines.length - 2).toBeLessThan(500);
  }, 20_000);

  it('still says to raise --limit when the limit is what ended the page', async () => {
    const run = await audit(['query', '--trace', normal, '--limit', '2', ...since]);
    expect(run.code).toBe(0);
    expect(run.stdout.trimEnd().split('\n').at(-1)).toBe('(more: add --limit or narrow --since)');
    const all = await audit(['query', '--trace', normal, '--limit', '3', ...since]);
    expect(all.stdout).not.toContain('(more:');
  });
});
