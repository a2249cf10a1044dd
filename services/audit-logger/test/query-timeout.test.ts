/**
 * The audit API's reads against a records table another connection holds locked (ACCESS
 * EXCLUSIVE, as a migration or a VACUUM FULL would): PostgreSQL stops each read at the store's
 * statement timeout, the API answers 503 QUERY_TIMEOUT in its own words (never the
 * database's), no statement is left waiting on the lock, and the next request is answered
 * once the lock is gone. The worker's inserts have no such timeout: they wait the lock out.
 * Real PostgreSQL, the service over HTTP.
 */
import { AuditQueryTimeoutError, type AuditStore } from '@fleet/audit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuditLoggerApp } from '../src/app.ts';
import { parseAuditLoggerEnv } from '../src/config.ts';
import { silentLogger } from '../src/logger.ts';
import { openStore } from '../src/store-side.ts';
import {
  DATABASE_URL,
  defer,
  holdRecordsTableLock,
  openSchemaStore,
  recordAt,
  runSql,
  serveUntilClosed,
  sqlRows,
  T0,
  traceId,
} from './helpers.ts';

const TIMEOUT_MS = 300;
const trace = traceId();

let store: AuditStore;
let schema: string;
let drop: () => Promise<void>;
let server: { url: string; close(): Promise<void> };
beforeAll(async () => {
  ({ store, schema, drop } = await openSchemaStore({ readTimeoutMs: TIMEOUT_MS }));
  await store.insertBatch([recordAt(0, { traceId: trace })]);
  server = await serveUntilClosed(
    createAuditLoggerApp({ sink: { enqueue: () => undefined }, store }).listener,
  );
});
afterAll(async () => {
  await server?.close();
  await drop?.();
});

async function get(path: string) {
  const started = performance.now();
  // Without a statement timeout the request would wait for the lock: fail it well before.
  const res = await fetch(`${server.url}${path}`, { signal: AbortSignal.timeout(10_000) });
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies, asserted field by field
  const body = (await res.json()) as any;
  return { status: res.status, body, ms: performance.now() - started };
}

/** Statements waiting for a lock on this test's records table. */
async function waitingOnTable(): Promise<number> {
  const [row] = await sqlRows<{ n: number }>(
    'SELECT count(*)::int AS n FROM pg_locks WHERE relation = $1::regclass AND NOT granted',
    [`"${schema}".audit_records`],
  );
  return row?.n ?? -1;
}

const window = `since=${new Date(T0 - 60_000).toISOString()}&until=${new Date(T0 + 60_000).toISOString()}`;

describe('audit API reads past the statement timeout', () => {
  it.each([
    '/api/audit/records',
    `/api/audit/records?traceId=${trace}`,
    `/api/audit/traces/${trace}`,
    `/api/audit/stats?${window}`,
  ])(
    'GET %s answers 503 QUERY_TIMEOUT while the table is locked, and 200 once it is free',
    async (path) => {
      const lock = await holdRecordsTableLock(schema);
      const stopped = await get(path);
      expect(stopped.status).toBe(503);
      expect(stopped.body).toEqual({
        error: {
          code: 'QUERY_TIMEOUT',
          message: `the audit query took longer than ${TIMEOUT_MS} ms and was stopped: narrow it (a shorter since/until window, more filters) or try again later`,
        },
      });
      expect(stopped.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
      // PostgreSQL cancelled the statements (not only the answer gave up on them): none still
      // waits for the lock holding a pooled connection.
      expect(await waitingOnTable()).toBe(0);
      await lock.release();
      const again = await get(path);
      expect(again.status).toBe(200);
    },
  );

  it('keeps the pool usable after more timeouts than it has connections', async () => {
    const lock = await holdRecordsTableLock(schema);
    // 12 requests at once, the store's pool holds 10 connections: every one is stopped.
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => get(`/api/audit/records?traceId=${trace}`)),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(503));
    await lock.release();
    const again = await Promise.all(
      Array.from({ length: 12 }, () => get(`/api/audit/records?traceId=${trace}`)),
    );
    expect(again.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(again[0]?.body.records).toHaveLength(1);
  });

  it('leaves inserts (the worker) without it: an insert waits out the lock and is stored', async () => {
    const lock = await holdRecordsTableLock(schema);
    const record = recordAt(5_000, { traceId: trace });
    let settled = false;
    const inserted = store.insertBatch([record]).finally(() => {
      settled = true;
    });
    expect((await get(`/api/audit/traces/${trace}`)).status).toBe(503);
    await new Promise((wait) => setTimeout(wait, 3 * TIMEOUT_MS));
    expect(settled).toBe(false);
    await lock.release();
    await expect(inserted).resolves.toBe(1);
    const { body } = await get(`/api/audit/traces/${trace}`);
    expect(body.records.map((r: { id: string }) => r.id)).toContain(record.id);
  });
});

describe('AUDIT_QUERY_TIMEOUT_MS', () => {
  it('is the timeout of the store the service opens', async () => {
    const config = parseAuditLoggerEnv({
      DATABASE_URL,
      AUDIT_DB_SCHEMA: `${schema}_env`,
      AUDIT_QUERY_TIMEOUT_MS: '250',
    });
    const opened = await openStore(config, silentLogger);
    defer(() => runSql(`DROP SCHEMA IF EXISTS "${schema}_env" CASCADE`));
    defer(() => opened.close());
    await holdRecordsTableLock(`${schema}_env`);
    const error = await opened.query().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuditQueryTimeoutError);
    expect((error as AuditQueryTimeoutError).code).toBe('QUERY_TIMEOUT');
    expect((error as AuditQueryTimeoutError).timeoutMs).toBe(250);
  });
});
