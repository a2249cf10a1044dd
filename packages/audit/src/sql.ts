/**
 * The one seam between the audit store's SQL and its two engines: PostgreSQL through a `pg`
 * pool, and PGlite (PostgreSQL compiled to WASM, in process). The store speaks only this
 * interface, so both engines run the same statements and the same migrations.
 */
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { makeDirectory } from './directory.ts';

/** Statements inside one transaction. */
export interface SqlTransaction {
  /** One statement with `$n` parameters; the result rows. */
  query<Row>(text: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Several statements without parameters (migrations). */
  exec(script: string): Promise<void>;
}

/** A connection (pool) to one database. */
export interface SqlEngine extends SqlTransaction {
  readonly kind: 'postgres' | 'pglite';
  /**
   * One statement of a read the audit API asks for. On PostgreSQL it runs on a pool of its
   * own whose statements the server cancels after the engine's `readTimeoutMs` (SQLSTATE
   * 57014), so a slow read (a lock, a huge scan) neither holds a connection indefinitely nor
   * takes one of those the worker's inserts use. PGlite has one connection and no timeout.
   */
  read<Row>(text: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Run `work` in a transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: SqlTransaction) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** A SQL identifier, double-quoted. @throws RangeError for anything but a plain name. */
export function quoteIdentifier(name: string): string {
  if (!IDENTIFIER.test(name))
    throw new RangeError(`"${name}" is not a plain SQL identifier (letters, digits, _)`);
  return `"${name}"`;
}

/** Options for {@link createPostgresEngine}. */
export interface PostgresEngineOptions {
  /** `postgres://` URL. */
  connectionString: string;
  /** Schema to work in (its `search_path`); default the server's. */
  schema?: string | undefined;
  /** Most pooled connections. Default 10. */
  max?: number;
  /** Reports idle-connection errors (the pool replaces the connection). */
  onError?: (error: Error) => void;
  /** Longest wait for a new connection. Default 10 000 ms. */
  connectTimeoutMs?: number;
  /** Longest wait for one query's answer. Default 60 000 ms. */
  queryTimeoutMs?: number;
  /**
   * `statement_timeout` of the statements of {@link SqlEngine.read}: PostgreSQL cancels one
   * that runs, or waits for a lock, longer. 0: none (the server's setting). Default 0. The
   * other statements (inserts, deletes, migrations) never get it.
   */
  readTimeoutMs?: number;
}

/** How much longer than its statement timeout a read waits for the server's answer. */
const READ_ANSWER_MARGIN_MS = 5_000;

/** PostgreSQL through a `pg` pool. */
export function createPostgresEngine(options: PostgresEngineOptions): SqlEngine {
  const {
    connectionString,
    schema,
    max = 10,
    onError,
    connectTimeoutMs = 10_000,
    queryTimeoutMs = 60_000,
    readTimeoutMs = 0,
  } = options;
  const shared = {
    connectionString,
    max,
    // A database that stops answering without refusing (a partition, a host gone without a
    // TCP reset) must fail queries, not hang them: the worker then holds its records and
    // probes until the store answers (see worker.ts), and pool checkouts are never stranded.
    connectionTimeoutMillis: connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    ...(schema === undefined ? {} : { options: `-c search_path=${quoteIdentifier(schema)}` }),
  };
  const pool = new pg.Pool({
    ...shared,
    application_name: 'fleet-audit',
    query_timeout: queryTimeoutMs,
  });
  // The audit API's reads: a pool of their own (connections open when first used), so slow
  // reads can take none of the connections inserts need, and a timeout set when each
  // connection starts, so the server bounds every statement (lock waits included) without a
  // round trip per read. A statement it cancels leaves its connection usable; pg discards the
  // connection of any failed pool query anyway.
  const readPool = new pg.Pool({
    ...shared,
    application_name: 'fleet-audit-read',
    ...(readTimeoutMs > 0 ? { statement_timeout: readTimeoutMs } : {}),
    query_timeout: Math.max(queryTimeoutMs, readTimeoutMs + READ_ANSWER_MARGIN_MS),
  });
  // Without a listener an idle client's error (server restart) would crash the process.
  pool.on('error', (error) => onError?.(error));
  readPool.on('error', (error) => onError?.(error));
  return {
    kind: 'postgres',
    async query<Row>(text: string, params: readonly unknown[] = []) {
      const result = await pool.query(text, params as unknown[]);
      return result.rows as Row[];
    },
    async read<Row>(text: string, params: readonly unknown[] = []) {
      const result = await readPool.query(text, params as unknown[]);
      return result.rows as Row[];
    },
    async exec(script) {
      await pool.query(script);
    },
    async transaction(work) {
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        const result = await work({
          query: async <Row>(text: string, params: readonly unknown[] = []) =>
            (await client.query(text, params as unknown[])).rows as Row[],
          exec: async (script) => {
            await client.query(script);
          },
        });
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          broken = rollbackError as Error;
        });
        throw error;
      } finally {
        // A connection whose rollback failed is discarded rather than reused.
        client.release(broken);
      }
    },
    async close() {
      await Promise.all([pool.end(), readPool.end()]);
    },
  };
}

/** PGlite with its data in `dataDir` (created if missing). First open takes seconds. */
export async function createPgliteEngine(dataDir: string): Promise<SqlEngine> {
  makeDirectory(dataDir);
  const db = await PGlite.create(dataDir);
  const query = async <Row>(text: string, params: readonly unknown[] = []) =>
    (await db.query<Row>(text, params as unknown[])).rows;
  return {
    kind: 'pglite',
    query,
    // One connection in this process, and PGlite ignores statement_timeout.
    read: query,
    async exec(script) {
      await db.exec(script);
    },
    transaction: (work) =>
      db.transaction((tx) =>
        work({
          query: async <Row>(text: string, params: readonly unknown[] = []) =>
            (await tx.query<Row>(text, params as unknown[])).rows,
          exec: async (script) => {
            await tx.exec(script);
          },
        }),
      ),
    close: () => db.close(),
  };
}

/**
 * The SQLSTATE of an error PostgreSQL (through `pg`, or PGlite) answered with, e.g. `22008`;
 * undefined for any other error (a connection failure, a timeout).
 */
export function sqlState(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && typeof severity === 'string'
    ? code
    : undefined;
}

/**
 * Whether PostgreSQL cancelled the statement (SQLSTATE 57014 `query_canceled`): its
 * `statement_timeout` ran out, or an operator cancelled it (`pg_cancel_backend`).
 */
export function isQueryCanceled(error: unknown): boolean {
  return sqlState(error) === '57014';
}

/**
 * Whether the database refused the data itself (SQLSTATE class 22, data exception: a value
 * out of range, a character it cannot hold): the same statement fails the same way again.
 */
export function isDataException(error: unknown): boolean {
  return sqlState(error)?.startsWith('22') === true;
}
