/**
 * The audit query API over HTTP against real PostgreSQL: every filter, pagination, traces,
 * stats, 400s naming the parameter, 401 with AUDIT_READ_TOKEN, and 503 when the store fails.
 */
import type { AuditRecord, AuditStore } from '@fleet/audit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuditLoggerApp } from '../src/app.ts';
import { openSchemaStore, recordAt, serve, serveUntilClosed, T0, traceId } from './helpers.ts';

const TOKEN = 'read-secret';
const trace1 = traceId();
const trace2 = traceId();

const records: AuditRecord[] = [
  recordAt(0, {
    traceId: trace1,
    principal: { type: 'user', id: 'alice' },
    interceptors: [
      { name: 'pii-guard', type: 'validation', mode: 'active', outcome: 'allowed', durationMs: 2 },
    ],
    durationMs: 5,
  }),
  recordAt(1000, {
    traceId: trace1,
    phase: 'response',
    principal: { type: 'user', id: 'alice' },
    interceptors: [
      {
        name: 'pii-redactor',
        type: 'mutation',
        mode: 'active',
        outcome: 'modified',
        durationMs: 3,
      },
    ],
    durationMs: 6,
  }),
  recordAt(2000, {
    traceId: trace2,
    target: 'get_weather',
    principal: { type: 'service', id: 'bot' },
    decision: 'denied',
    status: 'validation_failed',
    interceptors: [
      {
        name: 'policy-validator',
        type: 'validation',
        mode: 'active',
        outcome: 'denied',
        durationMs: 1,
      },
    ],
    abortReasons: [
      {
        interceptor: 'policy-validator',
        reason: 'tool not allowed',
        type: 'validation',
        phase: 'request',
      },
    ],
    durationMs: 7,
  }),
  recordAt(3000, {
    event: 'resources/read',
    method: 'resources/read',
    target: 'file:///etc/motd',
    decision: 'error',
    status: 'timeout',
    durationMs: 8,
  }),
  ...Array.from({ length: 26 }, (_, i) =>
    recordAt(10_000 + i * 100, { target: 'bulk', durationMs: i }),
  ),
];
const ids = (list: readonly AuditRecord[]) => list.map((r) => r.id);
const newest = [...records].sort(
  (a, b) => Date.parse(b.timestamp) - Date.parse(a.timestamp) || (a.id < b.id ? 1 : -1),
);

let store: AuditStore;
let drop: () => Promise<void>;
let base: string;
let open: string;
const servers: Array<{ close(): Promise<void> }> = [];
beforeAll(async () => {
  ({ store, drop } = await openSchemaStore());
  await store.insertBatch(records);
  const deps = {
    sink: { enqueue: () => undefined },
    store,
    traceUrlTemplate: 'http://jaeger:16686/trace/{traceId}',
  };
  const secured = await serveUntilClosed(
    createAuditLoggerApp({ ...deps, readToken: TOKEN }).listener,
  );
  const unsecured = await serveUntilClosed(createAuditLoggerApp(deps).listener);
  servers.push(secured, unsecured);
  base = secured.url;
  open = unsecured.url;
});
afterAll(async () => {
  for (const server of servers) await server.close();
  await drop?.();
});

async function get(path: string, token: string | null = TOKEN, at = base) {
  const response = await fetch(
    `${at}${path}`,
    token ? { headers: { authorization: `Bearer ${token}` } } : {},
  );
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies, asserted field by field
  const body = (await response.json()) as any;
  return { status: response.status, headers: response.headers, body };
}

/** A 400 `INVALID_QUERY` whose issues name exactly `parameter`. */
async function expectInvalidQuery(path: string, parameter: string): Promise<void> {
  const { status, body } = await get(path);
  expect(status).toBe(400);
  expect(body.error.code).toBe('INVALID_QUERY');
  expect(body.error.issues.map((i: { parameter: string }) => i.parameter)).toEqual([parameter]);
  expect(body.error.message).toContain(parameter);
}

describe('GET /api/audit/records', () => {
  it.each([
    ['', records.map((_, i) => i).slice(0)],
    [`traceId=${trace1}`, [0, 1]],
    [`traceId=${trace1.toUpperCase()}`, [0, 1]],
    ['tool=get_weather', [2]],
    [`tool=${encodeURIComponent('file:///etc/motd')}`, [3]],
    ['event=resources%2Fread', [3]],
    ['principal=alice', [0, 1]],
    ['decision=denied', [2]],
    ['interceptor=pii-redactor', [1]],
    ['kind=chain', records.map((_, i) => i)],
    ['kind=admin', []],
    [
      `since=${new Date(T0 + 2000).toISOString()}&until=${new Date(T0 + 10_000).toISOString()}`,
      [2, 3],
    ],
    ['principal=alice&event=tools%2Fcall&decision=allowed', [0, 1]],
  ])('?%s', async (query, expected) => {
    const { status, body } = await get(`/api/audit/records?${query}&limit=500`);
    expect(status).toBe(200);
    expect(ids(body.records)).toEqual(
      ids(newest.filter((r) => expected.includes(records.indexOf(r)))),
    );
  });

  it('pages with nextCursor until the end, without duplicates or gaps', async () => {
    const seen: AuditRecord[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const { body } = await get(`/api/audit/records?limit=7${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...body.records);
      cursor = body.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(Math.ceil(records.length / 7));
    expect(ids(seen)).toEqual(ids(newest));
  });

  it('defaults to 50 records and says there is no next page', async () => {
    const { body } = await get('/api/audit/records');
    expect(body.records).toHaveLength(records.length);
    expect(body.nextCursor).toBeUndefined();
  });

  it.each([
    ['traceId=xyz', 'traceId'],
    ['decision=maybe', 'decision'],
    ['since=yesterday', 'since'],
    ['until=2025-13-01', 'until'],
    ['limit=0', 'limit'],
    ['limit=501', 'limit'],
    ['cursor=bogus', 'cursor'],
    ['tool=', 'tool'],
    ['tool=a&tool=b', 'tool'],
    ['colour=red', 'colour'],
    // Before year 1 (or past 9999): refused up front, never a database error (503).
    ['since=0000-01-01T00:00:00Z', 'since'],
    ['since=0000-06-01', 'since'],
    ['until=0000-01-02T00:00:00Z', 'until'],
    ['since=740000d', 'since'],
    // Cursors of the right shape whose time is none a record has: the database would refuse
    // or misread them (503), where the caller's parameter is at fault.
    ...['1', '0000-01-01T00:00:00Z', '+275760-09-13T00:00:00.000Z', 'March 7 2025'].map(
      (timestamp) =>
        [
          `cursor=${Buffer.from(JSON.stringify([timestamp, records[0]?.id])).toString('base64url')}`,
          'cursor',
        ] as [string, string],
    ),
  ])('?%s is a 400 naming %s', async (query, parameter) => {
    await expectInvalidQuery(`/api/audit/records?${query}`, parameter);
  });
});

describe('GET /api/audit/traces/:traceId', () => {
  it('returns every record of the trace, oldest first, with the abort reasons', async () => {
    const { status, body } = await get(`/api/audit/traces/${trace2}`);
    expect(status).toBe(200);
    expect(body.traceId).toBe(trace2);
    expect(body.records).toHaveLength(1);
    expect(body.records[0]).toMatchObject({
      decision: 'denied',
      abortReasons: [{ interceptor: 'policy-validator', reason: 'tool not allowed' }],
    });
    const both = await get(`/api/audit/traces/${trace1.toUpperCase()}`);
    expect(both.body.traceId).toBe(trace1);
    expect(ids(both.body.records)).toEqual(ids(records.slice(0, 2)));
  });

  it('answers an unknown trace with no records, and a malformed id with a 400', async () => {
    expect((await get(`/api/audit/traces/${traceId()}`)).body.records).toEqual([]);
    const bad = await get('/api/audit/traces/not-a-trace');
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0].parameter).toBe('traceId');
  });

  it('answers a trace id that is not valid percent-encoding with a 400, not a store error', async () => {
    await expectInvalidQuery('/api/audit/traces/%ZZ', 'traceId');
    await expectInvalidQuery(`/api/audit/traces/${trace1.slice(0, 30)}%E0%A4`, 'traceId');
  });
});

describe('GET /api/audit/stats', () => {
  it('counts by decision, tool, event and interceptor, with latency percentiles', async () => {
    const { status, body } = await get(
      `/api/audit/stats?since=${new Date(T0 - 1000).toISOString()}&until=${new Date(T0 + 60_000).toISOString()}`,
    );
    expect(status).toBe(200);
    expect(body.total).toBe(records.length);
    expect(body.byDecision).toEqual({ allowed: records.length - 2, denied: 1, error: 1 });
    expect(body.byTool[0]).toEqual({ tool: 'bulk', count: 26 });
    expect(body.byEvent).toEqual([
      { event: 'tools/call', count: records.length - 1 },
      { event: 'resources/read', count: 1 },
    ]);
    expect(body.byInterceptor.map((i: { interceptor: string }) => i.interceptor).sort()).toEqual([
      'pii-guard',
      'pii-redactor',
      'policy-validator',
    ]);
    expect(body.latencyMs).toMatchObject({ count: records.length });
    expect(body.latencyMs.p50).toBeTypeOf('number');
  });

  it('defaults to the last day, and refuses a bad window', async () => {
    const { body } = await get('/api/audit/stats');
    expect(body.total).toBe(0);
    expect(Date.parse(body.until) - Date.parse(body.since)).toBeCloseTo(86_400_000, -3);
    const bad = await get('/api/audit/stats?since=1h&until=2h');
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0].parameter).toBe('until');
  });

  it.each([
    ['since=1000000d', 'since'],
    ['since=0000-01-01', 'since'],
    ['until=0000-01-02T00:00:00Z', 'until'],
    // Later than now (the default until): refused like /records refuses until <= since.
    ['since=2999-01-01', 'since'],
    ['since=2999-01-01&until=2998-01-01', 'until'],
    // Not later than the default since (one day back): the window would be empty or inverted.
    ['until=1d', 'until'],
    ['until=2d', 'until'],
    ['since=&until=3d', 'until'],
  ])('?%s is a 400 naming %s', async (query, parameter) => {
    await expectInvalidQuery(`/api/audit/stats?${query}`, parameter);
  });
});

describe('read token', () => {
  it.each(['/api/audit/records', `/api/audit/traces/${trace1}`, '/api/audit/stats'])(
    '%s needs the bearer token when AUDIT_READ_TOKEN is set',
    async (path) => {
      const none = await get(path, null);
      expect(none.status).toBe(401);
      expect(none.body.error.code).toBe('UNAUTHORIZED');
      expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect((await get(path, 'wrong')).status).toBe(401);
      expect((await get(path)).status).toBe(200);
      expect((await get(path, null, open)).status).toBe(200);
    },
  );

  it('leaves /api/audit/config open: the viewer learns from it that a token is needed', async () => {
    expect((await get('/api/audit/config', null)).body).toEqual({
      traceUrlTemplate: 'http://jaeger:16686/trace/{traceId}',
      authRequired: true,
    });
    expect((await get('/api/audit/config', null, open)).body.authRequired).toBe(false);
  });
});

describe('failures', () => {
  it('answers 503 without internals when the store fails, and 404 for unknown endpoints', async () => {
    const broken: AuditStore = {
      ...store,
      query: () => Promise.reject(new Error('connection refused to 10.0.0.5')),
    };
    const at = await serve(
      createAuditLoggerApp({ sink: { enqueue: () => undefined }, store: broken }).listener,
    );
    const failed = await get('/api/audit/records', null, at);
    expect(failed.status).toBe(503);
    expect(failed.body.error.code).toBe('STORE_UNAVAILABLE');
    expect(JSON.stringify(failed.body)).not.toContain('10.0.0.5');
    expect((await get('/api/audit/nothing', null, at)).status).toBe(404);
  });
});
