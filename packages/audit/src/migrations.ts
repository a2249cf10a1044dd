/**
 * The audit store's schema, as an ordered list of versioned migrations shared by PostgreSQL
 * and PGlite. Applied at start-up in one transaction under an advisory lock (so replicas
 * starting together apply each migration once), and recorded in `schema_migrations`.
 * Never edit a released migration: append a new one.
 */

/** One schema change. */
export interface Migration {
  /** Applied in ascending order; recorded in `schema_migrations`. */
  readonly version: number;
  readonly name: string;
  /** One or more SQL statements. */
  readonly sql: string;
}

/** Every migration, oldest first. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'audit_records',
    sql: `
CREATE TABLE audit_records (
  id             text PRIMARY KEY,
  ts             timestamptz NOT NULL,
  kind           text NOT NULL,
  trace_id       text,
  span_id        text,
  session_id     text,
  principal_type text,
  principal_id   text,
  event          text NOT NULL,
  phase          text NOT NULL,
  method         text NOT NULL,
  target         text,
  backend        text,
  decision       text NOT NULL,
  status         text NOT NULL,
  duration_ms    double precision NOT NULL,
  interceptors   text[] NOT NULL DEFAULT '{}',
  record         jsonb NOT NULL,
  stored_at      timestamptz NOT NULL DEFAULT now()
);
-- Listing pages walk (ts, id) backwards; every filter index ends in the same keys so a
-- filtered page is an index range scan too.
CREATE INDEX audit_records_time_idx ON audit_records (ts DESC, id DESC);
CREATE INDEX audit_records_trace_idx ON audit_records (trace_id, ts, id) WHERE trace_id IS NOT NULL;
CREATE INDEX audit_records_target_idx ON audit_records (target, ts DESC, id DESC) WHERE target IS NOT NULL;
CREATE INDEX audit_records_principal_idx ON audit_records (principal_id, ts DESC, id DESC) WHERE principal_id IS NOT NULL;
CREATE INDEX audit_records_decision_idx ON audit_records (decision, ts DESC, id DESC);
CREATE INDEX audit_records_event_idx ON audit_records (event, ts DESC, id DESC);
CREATE INDEX audit_records_interceptors_idx ON audit_records USING gin (interceptors);
`,
  },
  {
    version: 2,
    name: 'audit_records_admin_idx',
    // Admin records are few among millions of chain records: `kind=admin` pages walk their
    // own small index (the query inlines the validated kind, so the planner can use it).
    sql: `
CREATE INDEX audit_records_admin_idx ON audit_records (ts DESC, id DESC) WHERE kind = 'admin';
`,
  },
];

/** The table that records which migrations ran. */
export const SCHEMA_MIGRATIONS_DDL = `
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    integer PRIMARY KEY,
  name       text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)`;

/**
 * Check that migrations are strictly ascending with unique versions (a table test guards
 * {@link MIGRATIONS}; stores call it on what they are given).
 * @throws Error naming the first out-of-order version.
 */
export function checkMigrations(migrations: readonly Migration[]): void {
  let previous = 0;
  for (const migration of migrations) {
    if (!Number.isInteger(migration.version) || migration.version <= previous)
      throw new Error(
        `migration versions must be ascending integers > 0: ${migration.version} after ${previous}`,
      );
    previous = migration.version;
  }
}
