/**
 * Test helpers: cleanup after each test, unique BullMQ prefixes on the shared Redis, a
 * PostgreSQL schema per test file, the service on 127.0.0.1:0, and a stock MCP SDK client.
 */
import { randomBytes } from 'node:crypto';
import type { RequestListener } from 'node:http';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { type AuditStore, type AuditStoreOptions, openAuditStore } from '@fleet/audit';
import { listen } from '@fleet/interceptor-kit';
import { deleteKeys } from '@fleet/test-fixtures';
import { defer } from '@fleet/test-fixtures/cleanup';
import { Redis } from 'ioredis';
import type { z } from 'zod';

export { defer };

/** The Redis and PostgreSQL every machine of this kind runs. */
export const REDIS_URL = 'redis://127.0.0.1:6379';
export const DATABASE_URL =
  process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A random suffix for names. */
export function randomName(prefix: string): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

/** A BullMQ prefix no other test uses; its keys are deleted after the test. */
export function uniquePrefix(): string {
  const prefix = randomName('test-audit-logger');
  defer(async () => {
    const client = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    await deleteKeys(client, `${prefix}:*`).finally(() => client.disconnect());
  });
  return prefix;
}

/** A store in a fresh PostgreSQL schema; `drop()` removes the schema. */
export async function openSchemaStore(options: Partial<AuditStoreOptions> = {}): Promise<{
  store: AuditStore;
  schema: string;
  drop(): Promise<void>;
}> {
  const schema = randomName('audit_logger_test');
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const store = await openAuditStore({
    databaseUrl: DATABASE_URL,
    schema,
    logger: quiet,
    ...options,
  });
  return {
    store,
    schema,
    async drop() {
      await store.close();
      await runSql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
  };
}

/** Run SQL statements on the test database ({@link DATABASE_URL}). */
export async function runSql(sql: string): Promise<void> {
  const client = await connectPg();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The rows of one statement on the test database ({@link DATABASE_URL}). */
export async function sqlRows<Row>(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
  const client = await connectPg();
  try {
    return (await client.query(sql, params)).rows as Row[];
  } finally {
    await client.end();
  }
}

/** A table lock held by a transaction of another connection, until `release()`. */
export interface HeldLock {
  /** Roll the holding transaction back and close its connection. Idempotent. */
  release(): Promise<void>;
}

/**
 * Hold an `ACCESS EXCLUSIVE` lock on `schema`.audit_records from a connection of its own (as
 * a migration or a `VACUUM FULL` would): every statement on the table waits for it. Released
 * after the test at the latest.
 */
export async function holdRecordsTableLock(schema: string): Promise<HeldLock> {
  const client = await connectPg();
  await client.query('BEGIN');
  await client.query(`LOCK TABLE "${schema}".audit_records IN ACCESS EXCLUSIVE MODE`);
  let released: Promise<void> | undefined;
  const release = () => {
    released ??= client
      .query('ROLLBACK')
      .then(() => undefined)
      .finally(() => client.end());
    return released;
  };
  defer(release);
  return { release };
}

async function connectPg(): Promise<PgClient> {
  // pg is the audit package's dependency, not this service's: load it from there.
  const pg = workspaceRequire('packages/audit')('pg') as PgModule;
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  return client;
}

interface PgClient {
  connect(): Promise<unknown>;
  query(sql: string, params?: readonly unknown[]): Promise<{ rows: unknown[] }>;
  end(): Promise<void>;
}

interface PgModule {
  Client: new (options: { connectionString: string }) => PgClient;
}

/** `require` as seen from a workspace package (for its dependencies). */
function workspaceRequire(packageDir: string): NodeJS.Require {
  return createRequire(new URL(`../../../${packageDir}/package.json`, import.meta.url));
}

/** Listen on 127.0.0.1:0 without printing the start-up line; closed after the test. */
export async function serve(listener: RequestListener): Promise<string> {
  const listening = await serveUntilClosed(listener);
  defer(() => listening.close());
  return listening.url;
}

/** Listen on 127.0.0.1:0 until `close()` (for a whole test file). */
export async function serveUntilClosed(
  listener: RequestListener,
): Promise<{ url: string; close(): Promise<void> }> {
  const listening = await listen(listener, { service: 'test', port: 0, announce: false });
  return { url: listening.url, close: () => listening.close(100) };
}

export { largeRecordAt, recordAt, spanId, T0, traceId, waitFor } from '@fleet/audit/testing';

// ---------------------------------------------------------------------------------------------
// A stock MCP SDK client. The SDK is a dependency of @fleet/interceptor-kit, not of this
// service: load it from there (its ESM build) and describe the little used here.

/** The part of the SDK's `Client` the tests use. */
export interface SdkClient {
  connect(transport: unknown): Promise<void>;
  request<T extends z.ZodType>(
    request: { method: string; params?: Record<string, unknown> },
    resultSchema: T,
  ): Promise<z.infer<T>>;
  getServerCapabilities(): Record<string, unknown> | undefined;
  close(): Promise<void>;
}

interface SdkModules {
  Client: new (
    info: { name: string; version: string },
    options?: { capabilities?: Record<string, unknown> },
  ) => SdkClient;
  StreamableHTTPClientTransport: new (
    url: URL,
    options?: { requestInit?: { headers?: Record<string, string> } },
  ) => unknown;
}

let sdk: Promise<SdkModules> | undefined;

function loadSdk(): Promise<SdkModules> {
  sdk ??= (async () => {
    const kit = workspaceRequire('packages/interceptor-kit');
    const cjs = kit.resolve('@modelcontextprotocol/sdk/client/index.js');
    const root = cjs.slice(0, cjs.lastIndexOf('/dist/cjs/'));
    const esm = (path: string) => pathToFileURL(`${root}/dist/esm/${path}`).href;
    const client = (await import(esm('client/index.js'))) as Pick<SdkModules, 'Client'>;
    const transport = (await import(esm('client/streamableHttp.js'))) as Pick<
      SdkModules,
      'StreamableHTTPClientTransport'
    >;
    return {
      Client: client.Client,
      StreamableHTTPClientTransport: transport.StreamableHTTPClientTransport,
    };
  })();
  return sdk;
}

/** Connect a stock MCP SDK client to `mcpUrl`; closed after the test. */
export async function connectMcpClient(mcpUrl: string, token?: string): Promise<SdkClient> {
  const { Client, StreamableHTTPClientTransport } = await loadSdk();
  const client = new Client({ name: 'audit-logger-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(
    new URL(mcpUrl),
    token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : {},
  );
  await client.connect(transport);
  defer(() => client.close());
  return client;
}
