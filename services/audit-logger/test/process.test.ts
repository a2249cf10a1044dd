/**
 * Both entry points as real processes: `main.ts` (audit-logger, default PGlite under
 * `.fleet/` of its cwd, worker in process) and `worker.ts` (audit-worker against PostgreSQL):
 * start-up line, health, metrics, records end to end, graceful SIGTERM (also one sent right
 * after the start-up line).
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createAuditProducer, createAuditRecord } from '@fleet/audit';
import { metricSample } from '@fleet/audit/testing';
import {
  freePort,
  occupiedPort,
  type ServiceProcess,
  type ServiceProcessOptions,
  sourceCommand,
  startServiceProcess,
} from '@fleet/test-fixtures';
import { startPostgresServer } from '@fleet/test-fixtures/postgres-server';
import { startRedisServer } from '@fleet/test-fixtures/redis-server';
import {
  type StartRefusal,
  startExpectingRefusal,
  startRefusalCases,
} from '@fleet/test-fixtures/start-refusal';
import { afterAll, describe, expect, it } from 'vitest';
import {
  DATABASE_URL,
  defer,
  openSchemaStore,
  REDIS_URL,
  traceId,
  uniquePrefix,
  waitFor,
} from './helpers.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const WORKER = fileURLToPath(new URL('../src/worker.ts', import.meta.url));
const quietEnv = { LOG_LEVEL: 'warn', OTEL_TRACES_EXPORTER: 'none' };

// A port another server holds, for the PORT-in-use cases.
const held = await occupiedPort();
afterAll(() => held.close());

/**
 * Start `script` on PGlite under a new directory with `env`, expecting it to exit 1 with `line`
 * (beside JSON log lines: the drain that closes the worker, the producer and the store), and
 * to leave its PGlite directory and journal unlocked for the next start.
 */
async function expectListenFailure(
  script: string,
  env: Record<string, string>,
  line: string,
): Promise<void> {
  const cwd = await tempDir();
  const { lines } = await failedStart(
    cwd,
    { ...quietEnv, DATABASE_URL: '', AUDIT_PREFIX: uniquePrefix(), ...env },
    script,
  );
  expect(lines).toEqual([line]);
  expect(existsSync(join(cwd, '.fleet/audit-pglite.lock'))).toBe(false);
  expect(existsSync(join(cwd, '.fleet/audit-logger-audit.ndjson.lock'))).toBe(false);
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'audit-logger-proc-'));
  defer(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** How to start main.ts (or `script`) in `cwd` with `env`. */
function mainProcess(
  cwd: string,
  env: Record<string, string>,
  script: string,
): ServiceProcessOptions {
  return { ...sourceCommand(script), cwd, env, readyTimeoutMs: 40_000 };
}

/** Start main.ts (or `script`) in `cwd` with `env`; stopped (SIGKILL) after the test. */
async function startMain(
  cwd: string,
  env: Record<string, string>,
  script = MAIN,
): Promise<ServiceProcess> {
  const service = await startServiceProcess(mainProcess(cwd, env, script));
  defer(() => service.stop('SIGKILL'));
  return service;
}

/** Start main.ts (or `script`) in `cwd` with `env`, expecting it to exit 1 before it is ready. */
async function failedStart(
  cwd: string,
  env: Record<string, string>,
  script = MAIN,
): Promise<StartRefusal> {
  const refusal = await startExpectingRefusal(mainProcess(cwd, env, script));
  expect(refusal.how).toContain('exited before its start-up line (code 1');
  expect(refusal.stderr).not.toMatch(/^\s+at /m);
  return refusal;
}

/** {@link failedStart}'s stderr lines, JSON log lines included. */
async function failedStartLines(
  cwd: string,
  env: Record<string, string>,
  script = MAIN,
): Promise<string[]> {
  return (await failedStart(cwd, env, script)).stderr.split('\n');
}

/**
 * Start `script` a few times (on PostgreSQL) and send each a SIGTERM as soon as its start-up
 * line appears: each must drain and exit 0. The line says the process is ready; the SIGTERM
 * handler used to come after it, and such a SIGTERM could end the process by the signal.
 */
async function expectDrainOnSigtermAtStartupLine(script: string): Promise<void> {
  const { schema, drop } = await openSchemaStore();
  defer(drop);
  const cwd = await tempDir();
  const prefix = uniquePrefix();
  for (let run = 0; run < 4; run++) {
    const service = await startMain(
      cwd,
      { ...quietEnv, PORT: '0', DATABASE_URL, AUDIT_DB_SCHEMA: schema, AUDIT_PREFIX: prefix },
      script,
    );
    expect(await service.stop(), `run ${run}:\n${service.stderr()}`).toEqual({
      code: 0,
      signal: null,
    });
  }
}

/** One `interceptor/invoke` of the `audit-logger` interceptor (a `prompts/get` request by ada). */
async function invokeAuditLogger(url: string, trace: string): Promise<void> {
  const invoke = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'interceptor/invoke',
      params: {
        name: 'audit-logger',
        event: 'prompts/get',
        phase: 'request',
        payload: { name: 'greeting', arguments: { name: 'Ada' } },
        context: { traceId: trace, principal: { type: 'user', id: 'ada' } },
      },
    }),
  });
  expect(await invoke.json()).toMatchObject({ result: { valid: true } });
}

describe('audit-logger process', () => {
  it('serves the interceptor, stores its records in PGlite under .fleet/, and drains on SIGTERM', async () => {
    const cwd = await tempDir();
    const prefix = uniquePrefix();
    const service = await startMain(cwd, {
      ...quietEnv,
      PORT: '0',
      AUDIT_PREFIX: prefix,
      AUDIT_READ_TOKEN: 'r',
      DATABASE_URL: '',
    });
    expect(service.service).toBe('audit-logger');
    expect(service.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(existsSync(join(cwd, '.fleet/audit-pglite'))).toBe(true);
    expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${service.url}/readyz`)).status).toBe(200);

    const trace = traceId();
    await invokeAuditLogger(service.url, trace);
    const auth = { authorization: 'Bearer r' };
    await waitFor(
      async () => {
        const response = await fetch(`${service.url}/api/audit/traces/${trace}`, { headers: auth });
        return ((await response.json()) as { records: unknown[] }).records.length === 1;
      },
      'the record through Redis and the in-process worker',
      15_000,
    );
    const page = (await (
      await fetch(`${service.url}/api/audit/records?principal=ada`, { headers: auth })
    ).json()) as { records: Array<{ target?: string; event: string }> };
    expect(page.records).toMatchObject([{ target: 'greeting', event: 'prompts/get' }]);

    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    expect(metrics).toMatch(
      /fleet_audit_producer_records_total\{[^}]*fleet_audit_outcome="enqueued"[^}]*\} 1/,
    );
    expect(metrics).toMatch(
      /fleet_audit_worker_records_total\{[^}]*fleet_audit_outcome="inserted"[^}]*\} 1/,
    );
    expect(metrics).toMatch(/fleet_audit_worker_store_unavailable(\{[^}]*\})? 0/);
    expect(metrics).toContain('fleet_interceptor_duration');
    expect((await fetch(`${service.url}/`)).headers.get('content-type')).toMatch(/text\/html/);

    const exit = await service.stop('SIGTERM', 15_000);
    expect(exit).toEqual({ code: 0, signal: null });
    // The PGlite directory is released for the next start.
    expect(existsSync(join(cwd, '.fleet/audit-pglite.lock'))).toBe(false);
  }, 90_000);

  it('a second one on the same PGlite directory or journal exits 1 with one clear line', async () => {
    const cwd = await tempDir();
    const env = { ...quietEnv, PORT: '0', AUDIT_PREFIX: uniquePrefix(), DATABASE_URL: '' };
    const first = await startMain(cwd, env);
    const { schema, drop } = await openSchemaStore();
    defer(drop);
    const cases = [
      // Same PGlite directory (the default under the same cwd).
      [env, join(cwd, '.fleet/audit-pglite'), /AUDIT_PGLITE_DIR|DATABASE_URL/],
      // Own store (PostgreSQL), but the same default journal.
      [
        { ...env, DATABASE_URL: DATABASE_URL, AUDIT_DB_SCHEMA: schema },
        join(cwd, '.fleet/audit-logger-audit.ndjson'),
        /AUDIT_JOURNAL/,
      ],
    ] as const;
    for (const [secondEnv, path, advice] of cases) {
      const lines = await failedStartLines(cwd, secondEnv);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(path);
      expect(lines[0]).toContain(`${path}.lock`);
      expect(lines[0]).toContain(`process ${first.pid}`);
      expect(lines[0]).toMatch(advice);
    }
    // The first one is unharmed.
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
  }, 120_000);

  it('checks its journal lock before it sets up its PGlite store, and exits 1 at once', async () => {
    const cwd = await tempDir();
    const journal = join(cwd, 'held/audit.ndjson');
    const pglite = join(cwd, 'own/pglite');
    // The journal is held by a live process: this test's.
    await mkdir(join(cwd, 'held'));
    await writeFile(`${journal}.lock`, `${process.pid}\n`);
    const lines = await failedStartLines(cwd, {
      ...quietEnv,
      PORT: '0',
      DATABASE_URL: '',
      AUDIT_PGLITE_DIR: pglite,
      AUDIT_JOURNAL: journal,
    });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`${journal}.lock`);
    expect(lines[0]).toContain(`process ${process.pid}`);
    expect(lines[0]).toMatch(/AUDIT_JOURNAL/);
    // Its PGlite store was never set up (nor its directory locked): the lock came first.
    expect(existsSync(join(cwd, 'own'))).toBe(false);
  }, 60_000);

  // Node 20's recursive mkdir never returns there: the start-up hung before it made them itself.
  it.each([
    ['AUDIT_PGLITE_DIR', { AUDIT_PGLITE_DIR: '/proc/nope/pglite' }, '/proc/nope/pglite'],
    ['AUDIT_JOURNAL', { AUDIT_JOURNAL: '/proc/nope/audit.ndjson' }, '/proc/nope'],
  ])(
    'exits 1 at once with one line naming %s when its directory cannot be created (/proc)',
    async (variable, settings, dir) => {
      const started = Date.now();
      const lines = await failedStartLines(await tempDir(), {
        ...quietEnv,
        PORT: '0',
        DATABASE_URL: '',
        ...settings,
      });
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^${variable}: cannot create ${dir}\\b`));
      // The failed mkdir: ENOENT as root, EACCES for others.
      expect(lines[0]).toMatch(/\((ENOENT|EACCES): [^)]*, mkdir '\/proc\/nope'\)/);
    },
    30_000,
  );

  it.each(startRefusalCases(held.port))(
    'exits 1 on %s with one line naming it (not a stack), its locks released',
    async (_what, env, line) => {
      await expectListenFailure(MAIN, env, line);
    },
    90_000,
  );

  it('warns once per AUDIT_ variable it does not read, with what was meant, and starts', async () => {
    const { schema, drop } = await openSchemaStore();
    defer(drop);
    const service = await startMain(await tempDir(), {
      ...quietEnv,
      PORT: '0',
      DATABASE_URL,
      AUDIT_DB_SCHEMA: schema,
      AUDIT_PREFIX: uniquePrefix(),
      AUDIT_WORKER: 'false',
      AUDIT_RETENTON_DAYS: '7',
    });
    expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
    const warnings = service
      .stderr()
      .split('\n')
      .filter((line) => line.includes('ignored environment variable'))
      .map((line) => JSON.parse(line) as { level: unknown; variable: string; msg: string });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, variable: 'AUDIT_RETENTON_DAYS' });
    expect(warnings[0]?.msg).toContain('(did you mean "AUDIT_RETENTION_DAYS"?)');
    expect(await service.stop('SIGTERM', 15_000)).toEqual({ code: 0, signal: null });
  }, 60_000);

  it('drains on a SIGTERM sent as soon as its start-up line appears', async () => {
    await expectDrainOnSigtermAtStartupLine(MAIN);
  }, 120_000);

  it('drains and exits 0 on SIGTERM while Redis is down', async () => {
    const redis = await startRedisServer();
    const { schema, drop } = await openSchemaStore();
    defer(drop);
    const service = await startMain(await tempDir(), {
      ...quietEnv,
      PORT: '0',
      REDIS_URL: redis.url,
      DATABASE_URL,
      AUDIT_DB_SCHEMA: schema,
    });
    await waitFor(async () => (await fetch(`${service.url}/readyz`)).status === 200, 'readiness');
    await redis.kill();
    // Let the worker, retention and producer notice (and queue commands that cannot be sent).
    await new Promise((tick) => setTimeout(tick, 1500));
    const started = Date.now();
    const exit = await service.stop('SIGTERM', 25_000);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeLessThan(15_000);
  }, 90_000);

  it('holds in memory no more records than AUDIT_MAX_BUFFERED while Redis is away', async () => {
    const { schema, drop } = await openSchemaStore();
    defer(drop);
    const journal = join(await tempDir(), 'audit.ndjson');
    const service = await startMain(await tempDir(), {
      ...quietEnv,
      PORT: '0',
      // Nothing listens there: the producer cannot send.
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      DATABASE_URL,
      AUDIT_DB_SCHEMA: schema,
      AUDIT_WORKER: 'false',
      AUDIT_JOURNAL: journal,
      AUDIT_MAX_BUFFERED: '0',
    });
    const trace = traceId();
    await invokeAuditLogger(service.url, trace);
    // With the default bound (10 000) the record would wait in memory until shutdown.
    await waitFor(
      async () => (await readFile(journal, 'utf8').catch(() => '')).includes(trace),
      'the record in the journal',
      10_000,
    );
    expect(service.stderr()).not.toContain('ignored environment variable');
    expect(await service.stop('SIGTERM', 15_000)).toEqual({ code: 0, signal: null });
  }, 60_000);

  it.each([
    { writeAhead: 'true', kept: 'the record' },
    { writeAhead: 'false', kept: 'nothing' },
  ])(
    'the next start of a SIGKILLed audit-logger delivers $kept it held (AUDIT_WRITE_AHEAD=$writeAhead)',
    async ({ writeAhead }) => {
      const { schema, drop } = await openSchemaStore();
      defer(drop);
      const cwd = await tempDir();
      const env = {
        ...quietEnv,
        PORT: '0',
        DATABASE_URL,
        AUDIT_DB_SCHEMA: schema,
        AUDIT_PREFIX: uniquePrefix(),
        AUDIT_WORKER: 'false',
        AUDIT_JOURNAL: join(cwd, 'audit.ndjson'),
        AUDIT_WRITE_AHEAD: writeAhead,
      };
      // Redis unreachable: the record waits in memory (far below AUDIT_MAX_BUFFERED) when the
      // process is killed.
      const killed = await startMain(cwd, {
        ...env,
        REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      });
      await invokeAuditLogger(killed.url, traceId());
      expect((await killed.stop('SIGKILL')).signal).toBe('SIGKILL');

      const next = await startMain(cwd, { ...env, REDIS_URL });
      const records = async (outcome: string) =>
        metricSample(
          await (await fetch(`${next.url}/metrics`)).text(),
          'fleet_audit_producer_records_total',
          { fleet_audit_outcome: outcome },
        ) ?? 0;
      if (writeAhead === 'true') {
        await waitFor(async () => (await records('replayed')) === 1, 'the record replayed');
        expect(await records('recovered')).toBe(1);
      } else {
        // Give a replay every chance to happen: nothing was there to replay.
        await new Promise((tick) => setTimeout(tick, 1500));
        expect([await records('recovered'), await records('replayed')]).toEqual([0, 0]);
      }
      expect(await next.stop('SIGTERM', 15_000)).toEqual({ code: 0, signal: null });
    },
    90_000,
  );

  it.each([
    ['PORT', 'eighty'],
    ['AUDIT_MAX_BUFFERED', '-1'],
    ['AUDIT_WRITE_AHEAD', 'maybe'],
    // Digits only: Number(' ') would be 0 (a free port), Number('0x10') 16.
    ['PORT', ' '],
    ['AUDIT_BATCH_SIZE', '0x10'],
  ])(
    'exits 1 with a message naming a bad %s (%j)',
    async (variable, value) => {
      const lines = await failedStartLines(await tempDir(), { ...quietEnv, [variable]: value });
      expect(lines.join('\n')).toContain(variable);
    },
    30_000,
  );
});

describe('audit-worker process', () => {
  it('exits 1 at once with one line naming AUDIT_PGLITE_DIR when it cannot be created (/proc)', async () => {
    const started = Date.now();
    const lines = await failedStartLines(
      await tempDir(),
      { ...quietEnv, PORT: '0', DATABASE_URL: '', AUDIT_PGLITE_DIR: '/proc/nope/pglite' },
      WORKER,
    );
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(lines).toEqual([
      expect.stringMatching(/^AUDIT_PGLITE_DIR: cannot create \/proc\/nope\/pglite /),
    ]);
  }, 30_000);

  it('drains on a SIGTERM sent as soon as its start-up line appears', async () => {
    await expectDrainOnSigtermAtStartupLine(WORKER);
  }, 120_000);

  it.each(startRefusalCases(held.port))(
    'exits 1 on %s with one line naming it (not a stack), its store released',
    async (_what, env, line) => {
      await expectListenFailure(WORKER, env, line);
    },
    90_000,
  );

  it.each([
    [
      'a PostgreSQL that never answers, after AUDIT_DB_WAIT_S',
      'postgres://postgres:s3cret@127.0.0.1:1/audit',
      'DATABASE_URL: cannot reach PostgreSQL at 127.0.0.1:1/audit (ECONNREFUSED) after waiting 1 s (AUDIT_DB_WAIT_S): start it, or point DATABASE_URL at one that answers.',
    ],
    [
      'a database that does not exist, at once',
      'postgres://postgres@127.0.0.1:5432/no_such_audit_db',
      'DATABASE_URL: PostgreSQL at 127.0.0.1:5432/no_such_audit_db refused the connection: database "no_such_audit_db" does not exist (SQLSTATE 3D000); fix DATABASE_URL or the database.',
    ],
  ])(
    'exits 1 on %s with one line (no password, no stack)',
    async (_what, url, line) => {
      const refusal = await failedStart(
        await tempDir(),
        { ...quietEnv, PORT: '0', DATABASE_URL: url, AUDIT_DB_WAIT_S: '1' },
        WORKER,
      );
      expect(refusal.lines).toEqual([line]);
      expect(refusal.stderr).not.toContain('s3cret');
    },
    60_000,
  );

  it('waits at start-up for a PostgreSQL that comes up after it, then serves', async () => {
    const database = await startPostgresServer();
    await database.stop();
    let stderr = '';
    const starting = startServiceProcess({
      ...mainProcess(
        await tempDir(),
        { ...quietEnv, PORT: '0', DATABASE_URL: database.url, AUDIT_DB_WAIT_S: '60' },
        WORKER,
      ),
      onStderr: (chunk) => {
        stderr += chunk;
      },
    });
    starting.then((service) => defer(() => service.stop('SIGKILL'))).catch(() => undefined);
    // The database comes up only once the worker has said it waits (a fixed pause was shorter
    // than a loaded machine takes to load the worker from source).
    await waitFor(
      () => stderr.includes('does not take connections yet; waiting for it'),
      'the worker to wait for PostgreSQL',
      40_000,
    );
    await database.start();
    const service = await starting;
    // Ready once its worker has Redis too, as any start.
    await waitFor(async () => (await fetch(`${service.url}/readyz`)).status === 200, 'readiness');
  }, 90_000);

  it('stores what producers enqueue, serves health and metrics, and drains on SIGTERM', async () => {
    const { store, schema, drop } = await openSchemaStore();
    defer(drop);
    const prefix = uniquePrefix();
    const worker = await startServiceProcess({
      ...sourceCommand(WORKER),
      cwd: await tempDir(),
      env: {
        ...quietEnv,
        PORT: '0',
        DATABASE_URL: process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
        AUDIT_DB_SCHEMA: schema,
        AUDIT_PREFIX: prefix,
      },
      readyTimeoutMs: 40_000,
    });
    defer(() => worker.stop('SIGKILL'));
    expect(worker.service).toBe('audit-worker');
    expect((await fetch(`${worker.url}/healthz`)).status).toBe(200);
    await waitFor(async () => (await fetch(`${worker.url}/readyz`)).status === 200, 'readiness');

    const producer = createAuditProducer({
      connection: REDIS_URL,
      prefix,
      journalPath: join(await tempDir(), 'journal.ndjson'),
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    });
    defer(() => producer.close());
    const trace = traceId();
    for (let i = 0; i < 25; i++)
      producer.enqueue(
        createAuditRecord({
          kind: 'chain',
          traceId: trace,
          event: 'tools/call',
          phase: 'request',
          method: 'tools/call',
          target: `tool-${i}`,
          decision: 'allowed',
          status: 'success',
          durationMs: i,
        }),
      );
    await producer.flush();
    await waitFor(async () => (await store.trace(trace)).records.length === 25, '25 rows', 15_000);
    await waitFor(
      async () =>
        /fleet_audit_worker_records_total\{[^}]*"processed"[^}]*\} 25/.test(
          await (await fetch(`${worker.url}/metrics`)).text(),
        ),
      'the processed counter',
    );
    expect(await worker.stop('SIGTERM', 15_000)).toEqual({ code: 0, signal: null });
  }, 90_000);
});
