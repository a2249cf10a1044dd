/**
 * Faults across the real fleet (processes, a private Redis or PostgreSQL): what a client sees
 * while a dependency is gone, and that the audit trail loses nothing and stores nothing twice.
 */
import { randomBytes } from 'node:crypto';
import { startPostgresServer } from '@fleet/test-fixtures/postgres-server';
import { startRedisServer } from '@fleet/test-fixtures/redis-server';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ALICE_TOKEN,
  connectClient,
  type E2eFleet,
  startE2eFleet,
  resultText as text,
} from './fleet.ts';

let e2e: E2eFleet | undefined;
const clients: Client[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  await e2e?.stop();
  e2e = undefined;
}, 60_000);

async function connect(fleet: E2eFleet): Promise<Client> {
  const client = await connectClient(fleet.fleet.mcpUrl, ALICE_TOKEN, 'faults');
  clients.push(client);
  return client;
}

interface Outcome {
  traceId: string;
  ok: boolean;
  ms: number;
  error?: string;
}

/** One `get_weather` call under its own trace id. */
async function call(client: Client, city: string): Promise<Outcome> {
  const traceId = randomBytes(16).toString('hex');
  const started = Date.now();
  try {
    const result = await client.callTool(
      {
        name: 'get_weather',
        arguments: { city },
        _meta: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      },
      undefined,
      { timeout: 20_000 },
    );
    const ok = text(result).includes(city) && result.isError !== true;
    return { traceId, ok, ms: Date.now() - started, ...(ok ? {} : { error: text(result) }) };
  } catch (error) {
    return { traceId, ok: false, ms: Date.now() - started, error: String(error) };
  }
}

/** The chain records stored per trace id (request and response phases). */
async function storedChainRecords(
  databaseUrl: string,
  traceIds: readonly string[],
): Promise<Map<string, string[]>> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const { rows } = await db.query<{ trace: string; phase: string }>(
      `SELECT record->>'traceId' AS trace, record->>'phase' AS phase FROM audit_records
       WHERE record->>'kind' = 'chain' AND record->>'traceId' = ANY($1)`,
      [traceIds],
    );
    const byTrace = new Map<string, string[]>();
    for (const row of rows) byTrace.set(row.trace, [...(byTrace.get(row.trace) ?? []), row.phase]);
    return byTrace;
  } finally {
    await db.end();
  }
}

/** Wait until every trace holds a request and a response record, or time runs out. */
async function awaitTrail(databaseUrl: string, traceIds: readonly string[], ms = 60_000) {
  const deadline = Date.now() + ms;
  let stored = new Map<string, string[]>();
  while (Date.now() < deadline) {
    stored = await storedChainRecords(databaseUrl, traceIds);
    if (traceIds.every((t) => (stored.get(t)?.length ?? 0) >= 2)) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  return stored;
}

/** Calls from `clients` in parallel, each one after the other, until `stop` is aborted. */
async function traffic(clients: readonly Client[], stop: AbortSignal): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  await Promise.all(
    clients.map(async (client, c) => {
      for (let i = 0; !stop.aborted; i++) outcomes.push(await call(client, `City${c}x${i}`));
    }),
  );
  return outcomes;
}

/**
 * The demo policy's rules with a rate limit no test reaches (the demo's 120 calls a minute
 * would refuse this suite's traffic); it still needs Redis, and fails open without it.
 */
const POLICY = `version: 1
default: allow
events: ["tools/call"]
rules:
  - {id: admins-only-delete, effect: deny, tools: ["*delete*"], when: '!("admin" in principal.claims.roles)'}
rateLimits:
  - {id: per-principal-calls, events: ["tools/call"], key: principal.id, limit: 1000000, window: 60s}
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every served call has one request and one response record, and no call has more. */
async function expectTrailOf(fleet: E2eFleet, outcomes: readonly Outcome[]) {
  const served = outcomes.filter((o) => o.ok).map((o) => o.traceId);
  expect(served.length).toBeGreaterThan(0);
  const stored = await awaitTrail(fleet.databaseUrl as string, served);
  const missing = served.filter((t) => (stored.get(t)?.length ?? 0) < 2);
  const doubled = [...stored].filter(([, phases]) => phases.length > 2);
  expect({ missing, doubled }).toEqual({ missing: [], doubled: [] });
  for (const phases of stored.values()) expect(phases.sort()).toEqual(['request', 'response']);
}

describe('faults', () => {
  it('serves through a Redis outage and loses no audit record', async () => {
    const redis = await startRedisServer({ durable: true });
    e2e = await startE2eFleet({ postgres: true, redisUrl: redis.url, policy: POLICY });
    const client = await connect(e2e);

    const before: Outcome[] = [];
    for (let i = 0; i < 10; i++) before.push(await call(client, `Before${i}`));
    expect(before.filter((o) => !o.ok)).toEqual([]);

    await redis.kill();
    // Nothing on this path needs Redis to answer: the audit records wait in the
    // orchestrator's buffer, the rate limit fails open (its default).
    const during: Outcome[] = [];
    for (let i = 0; i < 10; i++) during.push(await call(client, `During${i}`));
    expect(during.filter((o) => !o.ok)).toEqual([]);
    // A reversible token needs the vault: refused (fail-closed), naming it, the value kept back.
    const tokenizing = await client
      .callTool({ name: 'lookup_customer', arguments: { id: '7' } }, undefined, {
        timeout: 20_000,
      })
      .catch((e: unknown) => e);
    expect(tokenizing).toBeInstanceOf(McpError);
    expect((tokenizing as McpError).data).toMatchObject({
      failedInterceptor: 'pii-redactor',
      reason: expect.stringMatching(/^token vault unavailable/),
      phase: 'response',
    });

    await redis.start();
    const after: Outcome[] = [];
    const deadline = Date.now() + 30_000;
    while (after.filter((o) => o.ok).length < 10 && Date.now() < deadline) {
      after.push(await call(client, `After${after.length}`));
      if (!after.at(-1)?.ok) await sleep(250);
    }
    expect(after.filter((o) => o.ok)).toHaveLength(10);
    await expectTrailOf(e2e, [...before, ...during, ...after]);
  }, 240_000);

  it('serves through a PostgreSQL crash and stores every record once it is back', async () => {
    const database = await startPostgresServer();
    e2e = await startE2eFleet({ databaseUrl: database.url, policy: POLICY });
    const clients = [await connect(e2e), await connect(e2e)];
    const stop = new AbortController();
    const running = traffic(clients, stop.signal);
    await sleep(1000);
    // The store is only the audit worker's: calls never wait for it.
    await database.kill();
    await sleep(4000);
    await database.start();
    await sleep(1000);
    stop.abort();
    const outcomes = await running;
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    await expectTrailOf(e2e, outcomes);
    // The audit API's pool reconnects too.
    const last = outcomes.at(-1)?.traceId;
    const res = await fetch(`${e2e.fleet.urls['audit-logger']}/api/audit/traces/${last}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { records: unknown[] }).records.length).toBeGreaterThanOrEqual(2);
  }, 240_000);

  it('loses no audit record when the audit worker is killed mid-stream', async () => {
    e2e = await startE2eFleet({ postgres: true, policy: POLICY });
    const clients = [await connect(e2e), await connect(e2e), await connect(e2e)];
    const stop = new AbortController();
    const running = traffic(clients, stop.signal);
    await sleep(1500);
    // The audit-logger process runs the queue worker (and the audit-mode interceptor, which
    // is off the critical path: the calls never wait for it).
    expect(e2e.fleet.kill('audit-logger', 'SIGKILL')).toBe(true);
    await sleep(3000);
    stop.abort();
    const outcomes = await running;
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    await expectTrailOf(e2e, outcomes);
  }, 240_000);

  it.each([
    // A rolling restart: SIGTERM drains (calls in flight finish, the audit buffer is flushed).
    ['stopped', 'SIGTERM'],
    // No drain and no flush: the records of the last calls were still waiting for their batch.
    // They are in the write-ahead log beside the journal (AUDIT_WRITE_AHEAD, on by default),
    // which the orchestrator the fleet restarts on the same journal replays.
    ['killed', 'SIGKILL'],
  ] as const)(
    'stores the record of every call it served when the orchestrator is %s (%s)',
    async (_, signal) => {
      e2e = await startE2eFleet({ postgres: true, policy: POLICY });
      const clients = [await connect(e2e), await connect(e2e)];
      const stop = new AbortController();
      const running = traffic(clients, stop.signal);
      await sleep(1500);
      expect(e2e.fleet.kill('orchestrator', signal)).toBe(true);
      await sleep(500);
      stop.abort();
      const outcomes = await running;
      expect(outcomes.filter((o) => o.ok).length).toBeGreaterThan(10);
      await expectTrailOf(e2e, outcomes);
    },
    240_000,
  );
});
