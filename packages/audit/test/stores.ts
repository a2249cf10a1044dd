/**
 * Test stores: a PostgreSQL schema of its own per test file on the shared server (dropped
 * afterwards), and PGlite in a temporary directory. Open one per file (`beforeAll`): PGlite's
 * first open takes seconds.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import {
  type AuditRecord,
  type AuditStore,
  type AuditStoreOptions,
  openAuditStore,
} from '../src/index.ts';
import { captureLogger } from './helpers.ts';

/** The PostgreSQL every machine of this kind runs (trust auth, database `test`). */
export const SHARED_DATABASE_URL =
  process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A store under test, with the means to look behind it and to remove it. */
export interface TestStore {
  store: AuditStore;
  /** Rows in `audit_records`, counted directly. */
  count(): Promise<number>;
  /** The raw stored JSON of every row (to prove what never reached the database). */
  rawText(): Promise<string>;
  /** Remove every record. */
  clear(): Promise<void>;
  /** Close the store and drop what the helper created. */
  dispose(): Promise<void>;
}

/** A unique schema name for this process. */
export function uniqueSchema(): string {
  return `audit_test_${process.pid}_${randomBytes(4).toString('hex')}`;
}

/** A store in a fresh PostgreSQL schema (`schema` option: search_path of every connection). */
export async function openPostgresTestStore(
  options: Partial<AuditStoreOptions> = {},
): Promise<TestStore & { schema: string; url: string }> {
  const schema = uniqueSchema();
  const store = await openAuditStore({
    databaseUrl: SHARED_DATABASE_URL,
    schema,
    logger: captureLogger(),
    ...options,
  });
  const admin = new pg.Client({ connectionString: SHARED_DATABASE_URL });
  await admin.connect();
  const table = `"${schema}".audit_records`;
  return {
    store,
    schema,
    url: SHARED_DATABASE_URL,
    async count() {
      const result = await admin.query(`SELECT count(*)::int AS n FROM ${table}`);
      return (result.rows[0] as { n: number }).n;
    },
    async rawText() {
      const result = await admin.query(
        `SELECT coalesce(string_agg(record::text, '\n'), '') AS t FROM ${table}`,
      );
      return (result.rows[0] as { t: string }).t;
    },
    async clear() {
      await admin.query(`DELETE FROM ${table}`);
    },
    async dispose() {
      await store.close();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    },
  };
}

/** A store in PGlite under a fresh temporary directory. */
export async function openPgliteTestStore(
  options: Partial<AuditStoreOptions> = {},
): Promise<TestStore & { dir: string }> {
  const parent = await mkdtemp(join(tmpdir(), 'fleet-audit-pglite-'));
  const dir = join(parent, 'db');
  const store = await openAuditStore({ pgliteDir: dir, logger: captureLogger(), ...options });
  // PGlite serves one connection: look behind the store through its own queries.
  const all = async (): Promise<AuditRecord[]> => {
    const records: AuditRecord[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.query(
        {},
        cursor === undefined ? { limit: 500 } : { cursor, limit: 500 },
      );
      records.push(...page.records);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return records;
  };
  return {
    store,
    dir,
    count: async () => (await all()).length,
    rawText: async () => (await all()).map((record) => JSON.stringify(record)).join('\n'),
    clear: async () => {
      await store.deleteOlderThan(new Date('9999-12-31T00:00:00Z'));
    },
    async dispose() {
      await store.close();
      await rm(parent, { recursive: true, force: true });
    },
  };
}

/**
 * Record overrides for a denial: one abort reason with `reason` and one validator message with
 * `message` (the scrubbed free texts of a denial).
 */
export function deniedWith(
  reason: string,
  message: string = reason,
): Pick<AuditRecord, 'abortReasons' | 'interceptors'> {
  return {
    abortReasons: [{ interceptor: 'x', reason, type: 'validation', phase: 'request' }],
    interceptors: [
      {
        name: 'x',
        type: 'validation',
        mode: 'active',
        outcome: 'denied',
        durationMs: 1,
        messages: [{ severity: 'error', message }],
      },
    ],
  };
}

export { recordAt, spanId, T0, traceId } from '../src/testing.ts';
