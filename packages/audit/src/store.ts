/**
 * The audit store: PostgreSQL (via `pg`) when a database URL is given, else PGlite embedded
 * under `.fleet/audit-pglite`. Both run the same SQL below and the same migrations
 * (`migrations.ts`); the engines differ only behind `sql.ts`.
 *
 * Table `audit_records` keeps the filterable fields as columns (indexed for trace id, time,
 * target, principal, decision, event, and interceptor names through a GIN index on a text[]
 * column) and the whole record as JSONB. A batch is inserted by one statement that expands
 * a JSON array server-side, `ON CONFLICT (id) DO NOTHING`, so a record delivered twice is
 * stored once. Characters PostgreSQL cannot hold (NUL, lone surrogates) are replaced by U+FFFD
 * first (`storable.ts`), so they fail no batch.
 */
import { resolve } from 'node:path';
import { AuditJournalInUseError, assertJournalFree, lockJournal } from './journal.ts';
import { type AuditLogger, createStderrLogger, errorFields, safeLogger } from './logger.ts';
import {
  checkMigrations,
  MIGRATIONS,
  type Migration,
  SCHEMA_MIGRATIONS_DDL,
} from './migrations.ts';
import {
  type AuditCursor,
  type AuditPage,
  type AuditPageRequest,
  AuditQueryError,
  type AuditRecordFilters,
  DEFAULT_QUERY_LIMIT,
  decodeCursor,
  encodeCursor,
  MAX_QUERY_LIMIT,
  timeBoundIssues,
} from './query.ts';
import { type AuditDecision, type AuditKind, AuditKindSchema, type AuditRecord } from './record.ts';
import {
  createPgliteEngine,
  createPostgresEngine,
  isQueryCanceled,
  quoteIdentifier,
  type SqlEngine,
} from './sql.ts';
import { storableJson } from './storable.ts';

/** Where PGlite keeps its data when no directory is given (relative to the cwd). */
export const DEFAULT_PGLITE_DIR = '.fleet/audit-pglite';
/** Most records `trace()` returns. */
export const MAX_TRACE_RECORDS = 5000;
/**
 * Most characters of records (as JSON) `trace()` returns. Records are bounded one by one
 * (`AUDIT_RECORD_LIMITS`), not a trace: whoever sends the requests (or invokes the
 * audit-logger interceptor) chooses the trace id, so 5,000 records of 37 KB each (claims, ids
 * and previews within their bounds) made one GET of a trace answer 187 MB in 2.5 s with
 * +600 MB of the audit-logger's memory. Real traces' records take 1 to 2 KB.
 */
export const MAX_TRACE_CHARS = 16 * 1024 * 1024;
/**
 * Default statement timeout (ms) of the reads `query()`, `trace()` and `stats()` make on
 * PostgreSQL: long enough for a search over a large table, short enough that a read blocked
 * by a lock answers before a client or proxy gives up on it.
 */
export const DEFAULT_READ_TIMEOUT_MS = 10_000;
/** Records `trace()` reads per statement. */
const TRACE_PAGE = 250;
/**
 * Most characters of records (as JSON) one page of `query()` holds, unless the store is opened
 * with another `maxPageChars`: a page of `limit` 500 whose records are as large as the record
 * bounds allow (37 KB with claims, ids and a preview at their bounds) was one answer of 19 MB.
 * 500 real records (1 to 2 KB each) fit with room to spare, so real pages are cut by `limit`.
 */
export const MAX_PAGE_CHARS = 4 * 1024 * 1024;
/** Records `query()` reads per statement. */
const QUERY_PAGE = 250;

/** The records of one trace, oldest first; `truncated` when more are stored than it holds. */
export interface AuditTrace {
  records: AuditRecord[];
  truncated?: true;
}
/** Tools listed in `stats().byTool` (the busiest). */
export const STATS_TOP_TOOLS = 50;
/** Events listed in `stats().byEvent` (the busiest; a client may make up any number). */
export const STATS_TOP_EVENTS = 50;

/** p50/p95/p99 of a set of durations (ms); `null` when the set is empty. */
export interface LatencySummary {
  count: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

/** Per-interceptor statistics. */
export interface InterceptorStats {
  interceptor: string;
  /** Records this interceptor took part in. */
  count: number;
  /** Counts by outcome (`allowed`, `denied`, `modified`, `failed`, ...). */
  outcomes: Record<string, number>;
  /** Its invocation durations. */
  latencyMs: LatencySummary;
}

/** What `stats()` reports for a time window. */
export interface AuditStats {
  /** Window start (ISO 8601, inclusive). */
  since: string;
  /** Window end (ISO 8601, exclusive). */
  until: string;
  total: number;
  byDecision: Record<AuditDecision, number>;
  byKind: Record<AuditKind, number>;
  /** The {@link STATS_TOP_TOOLS} busiest targets, busiest first. */
  byTool: Array<{ tool: string; count: number }>;
  /** The {@link STATS_TOP_EVENTS} busiest events (`tools/call`, ...), busiest first. */
  byEvent: Array<{ event: string; count: number }>;
  /** Every interceptor seen, busiest first. */
  byInterceptor: InterceptorStats[];
  /** Total durations of `chain` records: the chain's cost as the orchestrator measured it. */
  latencyMs: LatencySummary;
}

/** Where audit records are kept and searched. */
export interface AuditStore {
  /** Which engine serves this store. */
  readonly engine: 'postgres' | 'pglite';
  /**
   * Apply pending migrations (one transaction, under an advisory lock). Idempotent.
   * Returns the versions applied by this call.
   */
  migrate(): Promise<number[]>;
  /**
   * Insert parsed records in one statement; a record whose id is stored already (or that
   * appears twice in `records`) is skipped. NUL characters and lone UTF-16 surrogates, which
   * PostgreSQL cannot hold, are stored as U+FFFD. Returns how many rows were inserted.
   */
  insertBatch(records: readonly AuditRecord[]): Promise<number>;
  /**
   * One page of records matching `filters`, newest first (keyset pagination on time and id:
   * no duplicates or gaps while records are added): at most `limit` records and at most
   * `maxPageChars` characters of them as JSON, yet at least one record. `nextCursor` is set
   * whenever more match, also when the character budget cut the page before `limit`.
   * @throws AuditQueryError for a malformed cursor, a limit out of range, or a `since`/`until`
   * outside year 1..9999; AuditQueryTimeoutError past the read timeout.
   */
  query(filters?: AuditRecordFilters, page?: AuditPageRequest): Promise<AuditPage>;
  /**
   * Every record of one trace, oldest first: at most {@link MAX_TRACE_RECORDS} records and
   * {@link MAX_TRACE_CHARS} characters of them, `truncated` when there are more.
   * @throws AuditQueryTimeoutError when one of its statements runs past the read timeout.
   */
  trace(traceId: string): Promise<AuditTrace>;
  /**
   * Counts and latency percentiles of records in `[since, until)` (until: now).
   * @throws AuditQueryError for a `since`/`until` outside year 1..9999; AuditQueryTimeoutError
   * past the read timeout.
   */
  stats(since: Date, until?: Date): Promise<AuditStats>;
  /** Delete records older than `cutoff` (in chunks); returns how many. */
  deleteOlderThan(cutoff: Date): Promise<number>;
  /** True when the database answers. */
  ping(): Promise<boolean>;
  /** Close the pool (or PGlite) and release the PGlite lock. Idempotent. */
  close(): Promise<void>;
}

/** Options for {@link openAuditStore}. */
export interface AuditStoreOptions {
  /** A `postgres://` URL: use PostgreSQL. Unset or empty: PGlite. */
  databaseUrl?: string | undefined;
  /** PGlite's data directory (one process at a time). Default {@link DEFAULT_PGLITE_DIR}. */
  pgliteDir?: string;
  /** PostgreSQL schema to use, created if missing. Default: the connection's search_path. */
  schema?: string | undefined;
  /**
   * Most PostgreSQL connections of each of the store's two pools: one for inserts, deletes and
   * migrations, one for the reads of `query()`, `trace()` and `stats()` (each opens
   * connections when first used). Default 10.
   */
  poolSize?: number;
  /**
   * Statement timeout (ms) of each statement of `query()`, `trace()` and `stats()` on
   * PostgreSQL: one that runs, or waits for a lock, longer is cancelled by the server and the
   * call rejects with {@link AuditQueryTimeoutError}. `insertBatch()`, `deleteOlderThan()`
   * and migrations never get it (an audit record is not dropped for a slow database).
   * 0: none. Not applied by PGlite. Default {@link DEFAULT_READ_TIMEOUT_MS}.
   */
  readTimeoutMs?: number;
  /**
   * Most characters of records (as JSON) one page of `query()` holds; a record larger than
   * this still gets a page of its own. Default {@link MAX_PAGE_CHARS}.
   */
  maxPageChars?: number;
  /** Apply migrations when opening. Default true. */
  migrate?: boolean;
  /** Default {@link MIGRATIONS}. */
  migrations?: readonly Migration[];
  /** Default: JSON lines on stderr. */
  logger?: AuditLogger;
}

/** The store cannot be opened; `code` says why. */
export class AuditStoreError extends Error {
  override readonly name = 'AuditStoreError';
  readonly code: 'STORE_IN_USE';

  constructor(code: 'STORE_IN_USE', message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * A read of `query()`, `trace()` or `stats()` ran past the store's statement timeout and
 * PostgreSQL cancelled it (or an operator did: SQLSTATE 57014 either way); `cause` is the
 * database's error. The connection is fine: asking again (later, or narrower) may answer.
 */
export class AuditQueryTimeoutError extends Error {
  override readonly name = 'AuditQueryTimeoutError';
  readonly code = 'QUERY_TIMEOUT';

  constructor(
    /** The statement timeout that ran out (ms). */
    readonly timeoutMs: number,
    options?: { cause?: unknown },
  ) {
    super(`the audit query took longer than ${timeoutMs} ms and was stopped`, options);
  }
}

const MIGRATION_LOCK = `SELECT pg_advisory_xact_lock(hashtext('fleet-audit-migrations'))`;
const DELETE_CHUNK = 5000;

// One statement per batch: the records travel as one JSON array parameter and are expanded
// server-side. Interceptor names become a text[] for the GIN index.
const INSERT_SQL = `
WITH input AS (SELECT value AS r FROM jsonb_array_elements($1::jsonb)),
inserted AS (
  INSERT INTO audit_records (id, ts, kind, trace_id, span_id, session_id, principal_type,
    principal_id, event, phase, method, target, backend, decision, status, duration_ms,
    interceptors, record)
  SELECT r->>'id', (r->>'timestamp')::timestamptz, r->>'kind', r->>'traceId', r->>'spanId',
    r->>'sessionId', r#>>'{principal,type}', r#>>'{principal,id}', r->>'event', r->>'phase',
    r->>'method', r->>'target', r->>'backend', r->>'decision', r->>'status',
    (r->>'durationMs')::double precision,
    ARRAY(SELECT DISTINCT e->>'name' FROM jsonb_array_elements(r->'interceptors') AS e
          WHERE e->>'name' IS NOT NULL),
    r
  FROM input
  ON CONFLICT (id) DO NOTHING
  RETURNING 1
)
SELECT count(*)::int AS inserted FROM inserted`;

const DELETE_SQL = `
WITH doomed AS (SELECT id FROM audit_records WHERE ts < $1::timestamptz ORDER BY ts LIMIT ${DELETE_CHUNK}),
deleted AS (DELETE FROM audit_records a USING doomed d WHERE a.id = d.id RETURNING 1)
SELECT count(*)::int AS deleted FROM deleted`;

const PERCENTILES = (expression: string) =>
  `count(*)::int AS n,
   percentile_cont(0.5) WITHIN GROUP (ORDER BY ${expression}) AS p50,
   percentile_cont(0.95) WITHIN GROUP (ORDER BY ${expression}) AS p95,
   percentile_cont(0.99) WITHIN GROUP (ORDER BY ${expression}) AS p99`;

interface PercentileRow {
  n: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

function round(value: number | null): number | null {
  return value === null ? null : Math.round(value * 1000) / 1000;
}

function latency(row: PercentileRow | undefined): LatencySummary {
  return {
    count: row?.n ?? 0,
    p50: round(row?.p50 ?? null),
    p95: round(row?.p95 ?? null),
    p99: round(row?.p99 ?? null),
  };
}

/** WHERE clause and parameters of a filtered query. */
function whereClause(
  filters: AuditRecordFilters,
  params: unknown[],
): { sql: string; params: unknown[] } {
  const conditions: string[] = [];
  const add = (condition: (placeholder: string) => string, value: unknown) => {
    params.push(value);
    conditions.push(condition(`$${params.length}`));
  };
  if (filters.traceId !== undefined) add((p) => `trace_id = ${p}`, filters.traceId);
  if (filters.tool !== undefined) add((p) => `target = ${p}`, filters.tool);
  if (filters.event !== undefined) add((p) => `event = ${p}`, filters.event);
  // A principal without an id (anonymous callers, type-only service principals) is found
  // by its type: `principal=anonymous`.
  if (filters.principal !== undefined)
    add(
      (p) => `(principal_id = ${p} OR (principal_id IS NULL AND principal_type = ${p}))`,
      filters.principal,
    );
  if (filters.decision !== undefined) add((p) => `decision = ${p}`, filters.decision);
  // Inlined, not a parameter, so `kind = 'admin'` can use its partial index; only the
  // schema's own names get here.
  if (filters.kind !== undefined) {
    const kind = AuditKindSchema.parse(filters.kind);
    conditions.push(`kind = '${kind}'`);
  }
  if (filters.interceptor !== undefined)
    add((p) => `interceptors @> ARRAY[${p}::text]`, filters.interceptor);
  if (filters.since !== undefined)
    add((p) => `ts >= ${p}::timestamptz`, filters.since.toISOString());
  if (filters.until !== undefined)
    add((p) => `ts < ${p}::timestamptz`, filters.until.toISOString());
  return { sql: conditions.length > 0 ? conditions.join(' AND ') : 'TRUE', params };
}

/**
 * The results of `promises` once every one has settled, or the first one's rejection: a caller
 * answered about a failure has no statement of its own still running (each holds a pooled
 * connection until it ends).
 */
async function settledAll<T extends readonly unknown[]>(
  promises: { [K in keyof T]: Promise<T[K]> },
): Promise<T> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

// The database would fail on these (503 at the API), or toISOString() throw.
function refuseOutOfRange(bounds: { since?: Date | undefined; until?: Date | undefined }): void {
  const issues = timeBoundIssues(bounds);
  if (issues.length > 0) throw new AuditQueryError(issues);
}

function createSqlAuditStore(
  engine: SqlEngine,
  options: {
    schema: string | undefined;
    migrations: readonly Migration[];
    logger: AuditLogger;
    readTimeoutMs: number;
    maxPageChars: number;
    onClose: () => void;
  },
): AuditStore {
  const { schema, migrations, logger, readTimeoutMs, maxPageChars, onClose } = options;
  let closing: Promise<void> | undefined;

  /** One statement of `query()`, `trace()` or `stats()`, bounded by the read timeout. */
  async function read<Row>(text: string, params: readonly unknown[]): Promise<Row[]> {
    try {
      return await engine.read<Row>(text, params);
    } catch (error) {
      if (isQueryCanceled(error)) throw new AuditQueryTimeoutError(readTimeoutMs, { cause: error });
      throw error;
    }
  }

  return {
    engine: engine.kind,

    migrate() {
      return engine.transaction(async (tx) => {
        await tx.query(MIGRATION_LOCK);
        if (schema !== undefined)
          await tx.exec(`CREATE SCHEMA IF NOT EXISTS ${quoteIdentifier(schema)}`);
        await tx.exec(SCHEMA_MIGRATIONS_DDL);
        const rows = await tx.query<{ version: number }>('SELECT version FROM schema_migrations');
        const done = new Set(rows.map((row) => Number(row.version)));
        const known = new Set(migrations.map((m) => m.version));
        const unknown = [...done].filter((version) => !known.has(version));
        if (unknown.length > 0)
          logger.warn('the audit database has migrations this version does not know', {
            versions: unknown.sort((a, b) => a - b),
          });
        const applied: number[] = [];
        for (const migration of migrations) {
          if (done.has(migration.version)) continue;
          await tx.exec(migration.sql);
          await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [
            migration.version,
            migration.name,
          ]);
          applied.push(migration.version);
        }
        if (applied.length > 0)
          logger.info('audit store migrated', { engine: engine.kind, versions: applied });
        return applied;
      });
    },

    async insertBatch(records) {
      if (records.length === 0) return 0;
      const seen = new Set<string>();
      const unique = records.filter((record) => !seen.has(record.id) && seen.add(record.id));
      const [row] = await engine.query<{ inserted: number }>(INSERT_SQL, [storableJson(unique)]);
      return row?.inserted ?? 0;
    },

    async query(filters = {}, page = {}) {
      refuseOutOfRange(filters);
      const limit = page.limit ?? DEFAULT_QUERY_LIMIT;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_QUERY_LIMIT)
        throw new AuditQueryError([
          { parameter: 'limit', message: `must be an integer from 1 to ${MAX_QUERY_LIMIT}` },
        ]);
      let after: AuditCursor | undefined;
      if (page.cursor !== undefined) {
        after = decodeCursor(page.cursor);
        if (after === undefined)
          throw new AuditQueryError([
            { parameter: 'cursor', message: 'is not a cursor this store returned' },
          ]);
      }
      // Read in parts (keyset on time and id, as the pages themselves), so no more than one
      // part past the character budget is ever held; one more row than wanted says whether
      // more match. The page's cursor is the last record it holds, wherever it was cut.
      const records: AuditRecord[] = [];
      const more = (): AuditPage => {
        const last = records.at(-1) as AuditRecord;
        return { records, nextCursor: encodeCursor({ timestamp: last.timestamp, id: last.id }) };
      };
      let chars = 0;
      for (;;) {
        const where = whereClause(filters, []);
        let sql = where.sql;
        if (after !== undefined) {
          where.params.push(after.timestamp, after.id);
          const n = where.params.length;
          sql += ` AND (ts, id) < ($${n - 1}::timestamptz, $${n})`;
        }
        const want = Math.min(QUERY_PAGE, limit - records.length);
        where.params.push(want + 1);
        const rows = await read<{ record: AuditRecord }>(
          `SELECT record FROM audit_records WHERE ${sql} ORDER BY ts DESC, id DESC LIMIT $${where.params.length}`,
          where.params,
        );
        for (const { record } of rows.slice(0, want)) {
          chars += JSON.stringify(record).length;
          // At least one record a page, however large: the cursor always moves on.
          if (chars > maxPageChars && records.length > 0) return more();
          records.push(record);
        }
        if (rows.length <= want) return { records };
        if (records.length >= limit) return more();
        after = records.at(-1);
      }
    },

    async trace(traceId) {
      // Read in pages (keyset on time and id), so no more than one page past the budget is
      // ever held; one more row than wanted says whether there are more.
      const records: AuditRecord[] = [];
      let chars = 0;
      for (;;) {
        const last = records.at(-1);
        const params: unknown[] = last ? [traceId, last.timestamp, last.id] : [traceId];
        const after = last ? ' AND (ts, id) > ($2::timestamptz, $3)' : '';
        const want = Math.min(TRACE_PAGE, MAX_TRACE_RECORDS - records.length);
        const rows = await read<{ record: AuditRecord }>(
          `SELECT record FROM audit_records WHERE trace_id = $1${after} ORDER BY ts, id LIMIT ${want + 1}`,
          params,
        );
        for (const { record } of rows.slice(0, want)) {
          chars += JSON.stringify(record).length;
          if (chars > MAX_TRACE_CHARS) return { records, truncated: true };
          records.push(record);
        }
        if (rows.length <= want) return { records };
        if (records.length >= MAX_TRACE_RECORDS) return { records, truncated: true };
      }
    },

    async stats(since, until = new Date()) {
      refuseOutOfRange({ since, until });
      const window = 'ts >= $1::timestamptz AND ts < $2::timestamptz';
      const params = [since.toISOString(), until.toISOString()];
      /** The `limit` most frequent values of `column` in the window, busiest first. */
      // An admin record's target is a service id, not a tool: not among the busiest tools.
      const top = (column: 'target' | 'event', limit: number) =>
        read<{ value: string; n: number }>(
          `SELECT ${column} AS value, count(*)::int AS n FROM audit_records
           WHERE ${window} AND ${column} IS NOT NULL${column === 'target' ? ` AND kind <> 'admin'` : ''}
           GROUP BY ${column} ORDER BY n DESC, ${column} LIMIT ${limit}`,
          params,
        );
      const [groups, tools, events, interceptorLatency, interceptorOutcomes, chainLatency] =
        await settledAll([
          read<{ kind: AuditKind; decision: AuditDecision; n: number }>(
            `SELECT kind, decision, count(*)::int AS n FROM audit_records WHERE ${window}
             GROUP BY kind, decision`,
            params,
          ),
          top('target', STATS_TOP_TOOLS),
          top('event', STATS_TOP_EVENTS),
          read<PercentileRow & { name: string }>(
            `SELECT e->>'name' AS name, ${PERCENTILES(`(e->>'durationMs')::double precision`)}
             FROM audit_records, jsonb_array_elements(record->'interceptors') AS e
             WHERE ${window} GROUP BY 1 ORDER BY n DESC, name`,
            params,
          ),
          read<{ name: string; outcome: string; n: number }>(
            `SELECT e->>'name' AS name, e->>'outcome' AS outcome, count(*)::int AS n
             FROM audit_records, jsonb_array_elements(record->'interceptors') AS e
             WHERE ${window} GROUP BY 1, 2`,
            params,
          ),
          read<PercentileRow>(
            `SELECT ${PERCENTILES('duration_ms')} FROM audit_records
             WHERE ${window} AND kind = 'chain'`,
            params,
          ),
        ]);
      const byDecision: Record<AuditDecision, number> = { allowed: 0, denied: 0, error: 0 };
      const byKind: Record<AuditKind, number> = { chain: 0, invocation: 0, admin: 0 };
      let total = 0;
      for (const row of groups) {
        byDecision[row.decision] = (byDecision[row.decision] ?? 0) + row.n;
        byKind[row.kind] = (byKind[row.kind] ?? 0) + row.n;
        total += row.n;
      }
      const outcomes = new Map<string, Record<string, number>>();
      for (const row of interceptorOutcomes) {
        const entry = outcomes.get(row.name) ?? {};
        entry[row.outcome] = row.n;
        outcomes.set(row.name, entry);
      }
      return {
        since: since.toISOString(),
        until: until.toISOString(),
        total,
        byDecision,
        byKind,
        byTool: tools.map((row) => ({ tool: row.value, count: row.n })),
        byEvent: events.map((row) => ({ event: row.value, count: row.n })),
        byInterceptor: interceptorLatency.map((row) => ({
          interceptor: row.name,
          count: row.n,
          outcomes: outcomes.get(row.name) ?? {},
          latencyMs: latency(row),
        })),
        latencyMs: latency(chainLatency[0]),
      };
    },

    async deleteOlderThan(cutoff) {
      let total = 0;
      for (;;) {
        const [row] = await engine.query<{ deleted: number }>(DELETE_SQL, [cutoff.toISOString()]);
        const deleted = row?.deleted ?? 0;
        total += deleted;
        if (deleted < DELETE_CHUNK) return total;
      }
    },

    async ping() {
      try {
        await engine.query('SELECT 1');
        return true;
      } catch {
        return false;
      }
    },

    close() {
      closing ??= engine.close().finally(onClose);
      return closing;
    },
  };
}

/**
 * Run `lock` (take or check) on the PGlite directory's lock file, turning a holder's
 * {@link AuditJournalInUseError} into the store's `STORE_IN_USE` error.
 */
function lockPglite<T>(dir: string, lock: (path: string) => T): T {
  try {
    return lock(dir);
  } catch (error) {
    if (error instanceof AuditJournalInUseError)
      throw new AuditStoreError(
        'STORE_IN_USE',
        `the PGlite audit store ${dir} is in use by process ${error.pid ?? '?'}; PGlite serves one process (set DATABASE_URL to share a store)`,
        { cause: error },
      );
    throw error;
  }
}

/**
 * Throw as {@link openAuditStore} would when another live process holds the PGlite directory,
 * without opening or locking anything (nothing to check with `databaseUrl`): a service checks
 * before slower start-up steps to fail fast.
 * @throws AuditStoreError `STORE_IN_USE`.
 */
export function assertAuditStoreFree(
  options: Pick<AuditStoreOptions, 'databaseUrl' | 'pgliteDir'> = {},
): void {
  const { databaseUrl, pgliteDir = DEFAULT_PGLITE_DIR } = options;
  if (!databaseUrl) lockPglite(resolve(pgliteDir), assertJournalFree);
}

/**
 * Open the store: PostgreSQL when `databaseUrl` is set, else PGlite in `pgliteDir` (locked
 * to this process); then apply pending migrations unless `migrate: false`.
 * @throws AuditStoreError `STORE_IN_USE` when another live process holds the PGlite dir.
 */
export async function openAuditStore(options: AuditStoreOptions = {}): Promise<AuditStore> {
  const {
    databaseUrl,
    pgliteDir = DEFAULT_PGLITE_DIR,
    schema,
    poolSize = 10,
    readTimeoutMs = DEFAULT_READ_TIMEOUT_MS,
    maxPageChars = MAX_PAGE_CHARS,
    migrate = true,
    migrations = MIGRATIONS,
  } = options;
  checkMigrations(migrations);
  if (schema !== undefined) quoteIdentifier(schema);
  const logger = safeLogger(options.logger ?? createStderrLogger());
  let engine: SqlEngine;
  let unlock = (): void => undefined;
  if (databaseUrl) {
    engine = createPostgresEngine({
      connectionString: databaseUrl,
      schema,
      max: poolSize,
      readTimeoutMs,
      onError: (error) =>
        logger.warn('audit database connection error', { error: errorFields(error) }),
    });
  } else {
    const dir = resolve(pgliteDir);
    unlock = lockPglite(dir, lockJournal);
    try {
      engine = await createPgliteEngine(dir);
    } catch (error) {
      unlock();
      throw error;
    }
  }
  const store = createSqlAuditStore(engine, {
    schema,
    migrations,
    logger,
    readTimeoutMs,
    maxPageChars,
    onClose: unlock,
  });
  if (migrate) {
    try {
      await store.migrate();
    } catch (error) {
      await store.close().catch(() => undefined);
      throw error;
    }
  }
  return store;
}
