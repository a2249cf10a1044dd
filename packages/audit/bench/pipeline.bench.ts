/**
 * End-to-end benchmark of the audit pipeline: producer `enqueue` → BullMQ (Redis) → worker →
 * rows in PostgreSQL, for both queue shapes: one job per record (the default) and one job per
 * producer batch (`batchJobs: true`), and the latter with the write-ahead log on
 * (`writeAhead: true`), as the orchestrator runs its producer.
 *
 * - caller cost: what `enqueue` costs the request that calls it (µs, median and p99);
 * - sustained throughput: records/s from the first `enqueue` of a burst (offered as fast as
 *   the caller can) to the last row committed;
 * - lag at a steady offered load (default 5,000 records/s): record timestamp → row committed
 *   (`stored_at`), p50/p99.
 *
 * Needs Redis on 127.0.0.1:6379 and PostgreSQL on 127.0.0.1:5432 (database `test`), or
 * REDIS_URL / DATABASE_URL. The worker runs in its own process, as `audit-worker` does.
 * Everything it creates (schema, Redis keys, journals) is removed.
 *
 *   pnpm bench    # BENCH_RECORDS=100000 BENCH_RATE=5000 BENCH_SECONDS=10 BENCH_MODES=record,batch,wal
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { deleteKeys } from '@fleet/test-fixtures/teardown';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  type AuditProducer,
  type AuditRecord,
  createAuditProducer,
  createAuditRecord,
  createAuditWorker,
  openAuditStore,
} from '../src/index.ts';

const env = process.env;
const REDIS_URL = env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const BURST = Number(env.BENCH_RECORDS ?? 100_000);
const RATE = Number(env.BENCH_RATE ?? 5000);
const SECONDS = Number(env.BENCH_SECONDS ?? 10);
const MODES = (env.BENCH_MODES ?? 'record,batch,wal').split(',') as Mode[];

type Mode = 'record' | 'batch' | 'wal';
const MODE_LABEL: Record<Mode, string> = {
  record: 'job per record',
  batch: 'batch jobs',
  wal: 'batch jobs + write-ahead',
};
// Worker tuning per queue shape (BENCH_BATCH_SIZE, BENCH_CONCURRENCY); unset: the defaults.
const tuning = {
  ...(env.BENCH_BATCH_SIZE ? { batchSize: Number(env.BENCH_BATCH_SIZE) } : {}),
  ...(env.BENCH_CONCURRENCY ? { concurrency: Number(env.BENCH_CONCURRENCY) } : {}),
};
const WORKER_TUNING: Record<Mode, { batchSize?: number; concurrency?: number }> = {
  record: tuning,
  batch: tuning,
  wal: tuning,
};

const runId = `${process.pid}_${randomBytes(3).toString('hex')}`;
const schema = `audit_bench_${runId}`;
const quiet = { info: () => undefined, warn: () => undefined, error: console.error };
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const tick = () => new Promise((done) => setImmediate(done));

function input(i: number) {
  return {
    kind: 'chain' as const,
    event: 'tools/call',
    phase: 'request' as const,
    method: 'tools/call',
    target: `tool-${i % 50}`,
    traceId: randomBytes(16).toString('hex'),
    spanId: randomBytes(8).toString('hex'),
    principal: { type: 'user' as const, id: `user-${i % 200}` },
    decision: 'allowed' as const,
    status: 'success' as const,
    interceptors: [
      {
        name: 'pii-guard',
        type: 'validation' as const,
        mode: 'active' as const,
        outcome: 'allowed',
        durationMs: 0.4,
      },
      {
        name: 'pii-redactor',
        type: 'mutation' as const,
        mode: 'active' as const,
        outcome: 'unchanged',
        durationMs: 0.7,
      },
    ],
    durationMs: 1.3,
  };
}

function percentile(sorted: readonly number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] as number;
}

interface ModeResult {
  throughput: number;
  offeredMs: number;
  storedMs: number;
  lagP50: number;
  lagP99: number;
  steadyRows: number;
}

/** The database side: row counts and lag percentiles. */
function database(admin: pg.Client) {
  const table = `"${schema}".audit_records`;
  const count = async (): Promise<number> =>
    (await admin.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n;
  return {
    count,
    async waitForRows(n: number, timeoutMs: number): Promise<number> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const rows = await count();
        if (rows >= n) return Date.now();
        if (Date.now() > deadline)
          throw new Error(`only ${rows} of ${n} rows after ${timeoutMs} ms`);
        await sleep(5);
      }
    },
    async lag(from: Date): Promise<{ p50: number; p99: number; n: number }> {
      const row = (
        await admin.query(
          `SELECT count(*)::int AS n,
             percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM stored_at - ts) * 1000) AS p50,
             percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM stored_at - ts) * 1000) AS p99
           FROM ${table} WHERE ts >= $1`,
          [from.toISOString()],
        )
      ).rows[0];
      return { p50: Number(row.p50), p99: Number(row.p99), n: row.n };
    },
  };
}

async function startWorkerProcess(prefix: string, mode: Mode): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--conditions=@fleet/source', fileURLToPath(import.meta.url), '--worker'],
    {
      env: {
        ...env,
        BENCH_PREFIX: prefix,
        BENCH_SCHEMA: schema,
        BENCH_MODE: mode,
        DATABASE_URL,
        REDIS_URL,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((done, fail) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', () => done());
    child.once('exit', (code) => fail(new Error(`worker exited with ${code}`)));
  });
  return child;
}

async function stopWorkerProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await exited;
}

/** The caller's cost of enqueue (records made beforehand: only enqueue is timed). */
async function callerCost(producer: AuditProducer) {
  const prepared = Array.from({ length: 20_000 }, (_, i) => createAuditRecord(input(i)));
  const costs: number[] = [];
  for (let i = 0; i < prepared.length; i++) {
    const t0 = process.hrtime.bigint();
    producer.enqueue(prepared[i] as AuditRecord);
    costs.push(Number(process.hrtime.bigint() - t0) / 1000);
    // Let the pump send between requests, as it would between real requests.
    if (i % 100 === 99) await tick();
  }
  // Inputs made beforehand too: building one (two randomBytes calls) costs far more than
  // createAuditRecord itself, and timing both had reported ~15 µs for a ~0.5 µs function.
  const inputs = Array.from({ length: 20_000 }, (_, i) => input(i));
  const createCosts: number[] = [];
  for (const one of inputs) {
    const t0 = process.hrtime.bigint();
    createAuditRecord(one);
    createCosts.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  costs.sort((a, b) => a - b);
  createCosts.sort((a, b) => a - b);
  return {
    median: percentile(costs, 0.5),
    p99: percentile(costs, 0.99),
    createMedian: percentile(createCosts, 0.5),
    records: prepared.length,
  };
}

async function runMode(
  mode: Mode,
  db: ReturnType<typeof database>,
  journalDir: string,
  measureCaller: boolean,
): Promise<{ result: ModeResult; caller?: Awaited<ReturnType<typeof callerCost>> }> {
  const prefix = `bench-audit-${runId}-${mode}`;
  const worker = await startWorkerProcess(prefix, mode);
  const producer = createAuditProducer({
    connection: REDIS_URL,
    prefix,
    journalPath: join(journalDir, `${mode}.ndjson`),
    logger: quiet,
    maxBuffered: 200_000,
    batchJobs: mode !== 'record',
    writeAhead: mode === 'wal',
  });
  try {
    // Warm up: connections, JIT, the first batches.
    let expected = await db.count();
    for (let i = 0; i < 2000; i++) producer.enqueue(createAuditRecord(input(i)));
    expected += 2000;
    await producer.flush();
    await db.waitForRows(expected, 30_000);

    let caller: Awaited<ReturnType<typeof callerCost>> | undefined;
    if (measureCaller) {
      caller = await callerCost(producer);
      expected += caller.records;
      await producer.flush();
      await db.waitForRows(expected, 60_000);
    }

    // Sustained throughput: a burst offered as fast as the caller can.
    const burstStart = Date.now();
    for (let i = 0; i < BURST; i++) {
      producer.enqueue(createAuditRecord(input(i)));
      if (i % 1000 === 999) await tick();
    }
    const offeredMs = Date.now() - burstStart;
    expected += BURST;
    const burstEnd = await db.waitForRows(expected, 180_000);

    // Lag at a steady offered load: RATE records/s for SECONDS, in 10 ms ticks.
    await sleep(500);
    const steadyFrom = new Date();
    const total = RATE * SECONDS;
    let sent = 0;
    const started = performance.now();
    while (sent < total) {
      const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * RATE));
      while (sent < due) producer.enqueue(createAuditRecord(input(sent++)));
      await sleep(10);
    }
    expected += total;
    await db.waitForRows(expected, 120_000);
    const lag = await db.lag(steadyFrom);
    const result: ModeResult = {
      throughput: BURST / ((burstEnd - burstStart) / 1000),
      offeredMs,
      storedMs: burstEnd - burstStart,
      lagP50: lag.p50,
      lagP99: lag.p99,
      steadyRows: lag.n,
    };
    return caller ? { result, caller } : { result };
  } finally {
    await producer.close();
    await stopWorkerProcess(worker);
    const redis = new Redis(REDIS_URL);
    await deleteKeys(redis, `${prefix}:*`).finally(() => redis.disconnect());
  }
}

async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  const journalDir = await mkdtemp(join(tmpdir(), 'fleet-audit-bench-'));
  const store = await openAuditStore({ databaseUrl: DATABASE_URL, schema, logger: quiet });
  await store.close();
  const db = database(admin);
  try {
    const results = new Map<Mode, ModeResult>();
    const callers = new Map<Mode, Awaited<ReturnType<typeof callerCost>>>();
    for (const mode of MODES) {
      // enqueue is the same code in both queue shapes, but not with the write-ahead log.
      const run = await runMode(mode, db, journalDir, mode === MODES[0] || mode === 'wal');
      results.set(mode, run.result);
      if (run.caller) callers.set(mode, run.caller);
    }
    const caller = callers.get(MODES[0] as Mode);
    const callerOf = (m: Mode) => (m === 'wal' ? callers.get('wal') : caller);

    const fmt = (n: number, digits = 0) =>
      n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
    const verdict = (ok: boolean) => (ok ? 'yes' : 'NO');
    const perMode = (pick: (r: ModeResult) => string) =>
      MODES.map((m) => pick(results.get(m) as ModeResult));
    const table: string[][] = [
      ['metric', ...MODES.map((m) => MODE_LABEL[m]), 'target'],
      [
        'sustained throughput (records/s)',
        ...perMode((r) => `${fmt(r.throughput)} ${verdict(r.throughput >= 10_000)}`),
        '≥ 10,000',
      ],
      [
        `  burst of ${fmt(BURST)}: offered / stored (ms)`,
        ...perMode((r) => `${fmt(r.offeredMs)} / ${fmt(r.storedMs)}`),
        '',
      ],
      [`lag p50 at ${fmt(RATE)} records/s (ms)`, ...perMode((r) => fmt(r.lagP50, 1)), ''],
      [
        `lag p99 at ${fmt(RATE)} records/s (ms)`,
        ...perMode((r) => `${fmt(r.lagP99, 1)} ${verdict(r.lagP99 <= 1000)}`),
        '≤ 1,000',
      ],
      ['  rows in the steady window', ...perMode((r) => fmt(r.steadyRows)), fmt(RATE * SECONDS)],
      [
        'worker tuning',
        ...MODES.map((m) =>
          JSON.stringify(WORKER_TUNING[m]) === '{}' ? 'defaults' : JSON.stringify(WORKER_TUNING[m]),
        ),
        '',
      ],
    ];
    if (caller)
      table.push(
        [
          'enqueue caller cost, median (µs)',
          ...MODES.map((m) => {
            const c = callerOf(m);
            return c ? `${fmt(c.median, 2)} ${verdict(c.median <= 20)}` : '';
          }),
          '≤ 20',
        ],
        [
          'enqueue caller cost, p99 (µs)',
          ...MODES.map((m) => {
            const c = callerOf(m);
            return c ? fmt(c.p99, 2) : '';
          }),
          '',
        ],
        ['createAuditRecord, median (µs)', ...MODES.map(() => fmt(caller.createMedian, 2)), ''],
      );
    const widths = (table[0] ?? []).map((_, c) =>
      Math.max(...table.map((row) => (row[c] ?? '').length)),
    );
    const line = (row: string[]) =>
      row
        .map((cell, c) => cell.padEnd(widths[c] ?? 0))
        .join('  ')
        .trimEnd();
    console.log('\naudit pipeline: enqueue → Redis (BullMQ) → worker process → PostgreSQL\n');
    console.log(line(table[0] ?? []));
    console.log(line(widths.map((w) => '-'.repeat(w))));
    for (const row of table.slice(1)) console.log(line(row));
    console.log(
      '\n(enqueue is the same code in both queue shapes: measured once, in the first; and again with the write-ahead log.)',
    );
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    await rm(journalDir, { recursive: true, force: true });
  }
}

/** The worker process: consume until SIGTERM. */
async function workerProcess(): Promise<void> {
  const store = await openAuditStore({
    databaseUrl: env.DATABASE_URL,
    schema: env.BENCH_SCHEMA,
    migrate: false,
    logger: quiet,
  });
  const worker = createAuditWorker({
    store,
    connection: env.REDIS_URL,
    prefix: env.BENCH_PREFIX as string,
    logger: quiet,
    ...WORKER_TUNING[(env.BENCH_MODE as Mode) ?? 'record'],
  });
  await worker.waitUntilReady();
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => {
    void worker
      .close()
      .then(() => store.close())
      .then(() => process.exit(0));
  });
}

if (process.argv.includes('--worker')) await workerProcess();
else await main();
