/**
 * `fleet audit query`, `fleet audit export`, `fleet audit trace` and `fleet audit stats` against a real audit-logger
 * process (its query API on a PGlite store in a temp dir, its worker on its own audit queue on
 * the real Redis). The stats tests put records of a window two days back into that queue; the
 * other tests look at the last hour or at trace ids of their own, so they find none.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ADMIN_EVENTS,
  type AuditRecordInput,
  createAuditProducer,
  createAuditRecord,
} from '@fleet/audit';
import { freePort, type ServiceProcess } from '@fleet/test-fixtures';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { defer, deleteRedisKeys, fleet, jsonServer, startAuditLogger } from './helpers.ts';

let auditLogger: ServiceProcess;
let dir: string;
const queue = `cli-audit-test-${randomUUID()}`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fleet-cli-audit-'));
  auditLogger = await startAuditLogger(dir, queue, { AUDIT_PGLITE_DIR: join(dir, 'pglite') });
}, 90_000);

afterAll(async () => {
  await auditLogger?.stop('SIGTERM', 5_000);
  await deleteRedisKeys([`bull:${queue}:*`, `bull:${queue}-retention:*`]).catch(() => undefined);
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `fleet audit ...` pointed at the test audit-logger. */
const audit = (argv: readonly string[]) =>
  fleet(['audit', ...argv, '--audit', auditLogger.url, '--state-dir', dir]);

/**
 * Put `records` into the test audit-logger's queue (timestamps `at(1)`, `at(2)`, ...) and wait
 * until its worker has stored them: `window` then holds `records.length` of them.
 */
async function storeRecords(
  records: readonly AuditRecordInput[],
  at: (step: number) => string,
  window: readonly string[],
): Promise<void> {
  const producer = createAuditProducer({
    queue,
    journalPath: join(dir, `producer-${randomUUID()}.ndjson`),
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
  });
  try {
    for (const [i, input] of records.entries())
      producer.enqueue(createAuditRecord({ ...input, timestamp: at(1 + i) }));
    await producer.flush();
  } finally {
    await producer.close();
  }
  // The audit-logger's worker stores them asynchronously.
  await vi.waitFor(
    async () => {
      const run = await audit(['stats', ...window, '--json']);
      expect(JSON.parse(run.stdout)).toMatchObject({ total: records.length });
    },
    { timeout: 20_000, interval: 200 },
  );
}

describe('fleet audit query', () => {
  it('says when nothing matches', async () => {
    const run = await audit(['query']);
    expect(run).toEqual({ code: 0, stdout: 'no audit records match\n', stderr: '' });
  });

  it('shows the message and the parameters of an audit API refusal, exit 2', async () => {
    const run = await audit(['query', '--limit', '501']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      'error: the audit API refused the query\n  limit: must be an integer from 1 to 500\n',
    );
    expect(run.stderr).not.toContain('[object Object]');
    const json = await audit(['query', '--limit', '501', '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({
      error: 'the audit API refused the query',
      code: 'INVALID_QUERY',
      status: 400,
      details: [{ parameter: 'limit', message: 'must be an integer from 1 to 500' }],
    });
  });

  it.each([
    ['query', '--decision', 'maybe', 'Allowed choices are allowed, denied, error'],
    ['query', '--limit', 'ten', '--limit must be a positive integer'],
    ['query', '--limit', '0', '--limit must be a positive integer'],
    ['query', '--since', 'yesterday', '--since must be a duration back from now'],
    ['query', '--until', '5 minutes', '--until must be a duration back from now'],
    ['query', '--audit', 'notaurl', '--audit "notaurl" is not a valid URL'],
    ['stats', '--since', 'yesterday', '--since must be a duration back from now'],
    ['stats', '--since', '2025-02-30', '--since must be a duration back from now'],
    ['stats', '--until', '5 minutes', '--until must be a duration back from now'],
    ['export', '--since', 'soon', '--since must be a duration back from now'],
    ['export', '--kind', 'registry', 'Allowed choices are chain, invocation, admin'],
    ['export', '--out', '', '--out "": expected a file'],
  ])(
    'audit %s refuses %s %s before asking the API (exit 2)',
    async (command, flag, value, message) => {
      // The flag under test comes last: it wins over the --audit before it.
      const run = await fleet(['audit', command, '--audit', 'http://127.0.0.1:1', flag, value]);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(message);
      expect(run.stderr).not.toContain('cannot reach');
    },
  );

  it('says so when nothing matches a --principal', async () => {
    const run = await audit(['query', '--principal', 'anonymous']);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('no audit records match\n');
  });

  it('audit stats refuses a bad --since as JSON with --json (exit 2)', async () => {
    const run = await fleet([
      'audit',
      'stats',
      '--audit',
      'http://127.0.0.1:1',
      '--since',
      'soon',
      '--json',
    ]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(JSON.parse(run.stderr)).toEqual({
      error:
        '--since must be a duration back from now (30m, 1h, 7d) or an ISO 8601 time (2025-01-31T12:00:00Z), got "soon"',
      code: 'USAGE',
    });
  });

  it.each(['query', 'stats', 'export'])(
    'audit %s says when the audit API cannot be reached (exit 1), how to start the fleet as launched',
    async (command) => {
      const url = `http://127.0.0.1:${await freePort()}`;
      const run = await fleet(['audit', command, '--audit', url, '--state-dir', dir], {
        launcher: 'pnpm fleet',
      });
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr.split('\n')[0]).toBe(
        `error: cannot reach the audit API at ${url}: is the fleet running? (pnpm fleet up --state-dir ${dir}, or pass --audit)`,
      );
      const plain = await fleet(['audit', command, '--audit', url]);
      expect(plain.stderr.split('\n')[0]).toBe(
        `error: cannot reach the audit API at ${url}: is the fleet running? (fleet up, or pass --audit)`,
      );
      const json = await fleet(['audit', command, '--audit', url, '--json']);
      expect(json.code).toBe(1);
      expect(JSON.parse(json.stderr)).toMatchObject({
        error: `cannot reach the audit API at ${url}: is the fleet running? (fleet up, or pass --audit)`,
        code: 'AUDIT_UNREACHABLE',
      });
    },
  );

  it('asks whether --audit is the audit-logger when the server there has no audit API', async () => {
    const { url, close } = await jsonServer(() => ({ status: 404, body: { error: 'not found' } }));
    defer(close);
    const run = await fleet(['audit', 'query', '--audit', url]);
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: the audit API answered 404: not found: is ${url} the audit-logger?\n`,
    });
  });
});

describe('fleet audit trace', () => {
  it('exits 1 saying so when the trace has no records', async () => {
    const traceId = randomBytes(16).toString('hex');
    const run = await audit(['trace', traceId]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `error: no audit records for trace ${traceId} at ${auditLogger.url} (none stored yet, or the trace did not pass this fleet)\n`,
    );
  });

  it('refuses what is not a trace id (exit 2)', async () => {
    expect((await audit(['trace', 'not-a-trace'])).code).toBe(2);
  });
});

describe('fleet audit stats', () => {
  // A window two days back, out of reach of the other tests' "last hour".
  const from = new Date(Math.floor((Date.now() - 2 * 86_400_000) / 60_000) * 60_000);
  const at = (minutes: number) => new Date(from.getTime() + minutes * 60_000).toISOString();
  const window = ['--since', at(0), '--until', at(60)];

  const check = (
    name: string,
    outcome: string,
    durationMs: number,
    mode: 'active' | 'audit' = 'active',
  ) => ({ name, type: 'validation', mode, outcome, durationMs }) as const;
  const call = { kind: 'chain', phase: 'request', status: 'success' } as const;
  const RECORDS: AuditRecordInput[] = [
    {
      ...call,
      event: 'tools/call',
      method: 'tools/call',
      target: 'get_weather',
      decision: 'allowed',
      durationMs: 10,
      interceptors: [check('pii-guard', 'allowed', 1), check('policy', 'allowed', 2)],
    },
    {
      ...call,
      event: 'tools/call',
      method: 'tools/call',
      target: 'get_weather',
      decision: 'denied',
      status: 'validation_failed',
      durationMs: 20,
      interceptors: [check('pii-guard', 'allowed', 3), check('policy', 'denied', 4)],
    },
    {
      ...call,
      event: 'tools/call',
      method: 'tools/call',
      target: 'send_email',
      decision: 'allowed',
      durationMs: 30,
      interceptors: [{ ...check('pii-guard', 'modified', 5), type: 'mutation' }],
    },
    {
      ...call,
      event: 'prompts/get',
      method: 'prompts/get',
      target: 'greeting',
      decision: 'error',
      status: 'backend_error',
      durationMs: 40,
    },
    {
      ...call,
      kind: 'invocation',
      event: 'tools/call',
      method: 'tools/call',
      target: 'get_weather',
      decision: 'allowed',
      durationMs: 0.5,
      interceptors: [check('audit-logger', 'allowed', 0.5, 'audit')],
    },
    {
      ...call,
      kind: 'invocation',
      event: 'prompts/get',
      method: 'prompts/get',
      target: 'greeting',
      decision: 'allowed',
      durationMs: 0.7,
      interceptors: [check('audit-logger', 'allowed', 0.7, 'audit')],
    },
  ];

  beforeAll(() => storeRecords(RECORDS, at, window), 30_000);

  it('prints the window, decisions, busiest tools and events, interceptors and chain latency', async () => {
    const run = await audit(['stats', ...window]);
    const time = (iso: string) => iso.replace('T', ' ').replace('.000Z', 'Z');
    expect(run).toEqual({
      code: 0,
      stderr: '',
      stdout: `audit records from ${time(at(0))} to ${time(at(60))}: 6 (4 chain, 2 invocation)

DECISION  RECORDS  SHARE
allowed         4  66.7%
denied          1  16.7%
error           1  16.7%

tools: 3, all shown
TOOL         RECORDS  SHARE
get_weather        3  50.0%
greeting           2  33.3%
send_email         1  16.7%

events: 2, all shown
EVENT        RECORDS  SHARE
tools/call         4  66.7%
prompts/get        2  33.3%

interceptors: 3 (durations in ms)
INTERCEPTOR   INVOCATIONS  OUTCOMES               P50  P95  P99
pii-guard               3  allowed 2, modified 1  3.0  4.8  5.0
audit-logger            2  allowed 2              0.6  0.7  0.7
policy                  2  allowed 1, denied 1    3.0  3.9  4.0

chain latency over 4 chain records: p50 25.0 ms, p95 38.5 ms, p99 39.7 ms
`,
    });
  });

  it('prints the audit API document with --json', async () => {
    const run = await audit(['stats', ...window, '--json']);
    expect(run.code).toBe(0);
    const query = new URLSearchParams({ since: at(0), until: at(60) });
    const api = await fetch(`${auditLogger.url}/api/audit/stats?${query.toString()}`);
    expect(JSON.parse(run.stdout)).toEqual(await api.json());
    expect(JSON.parse(run.stdout)).toMatchObject({
      total: 6,
      byDecision: { allowed: 4, denied: 1, error: 1 },
      byTool: [
        { tool: 'get_weather', count: 3 },
        { tool: 'greeting', count: 2 },
        { tool: 'send_email', count: 1 },
      ],
    });
  });

  it('shows the audit API refusing a window that ends before it starts (exit 2)', async () => {
    const run = await audit(['stats', '--since', '1h', '--until', '2h']);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      'error: the audit API refused the query\n  until: must be later than since\n',
    );
  });

  it('says plainly when the window holds no records (exit 0)', async () => {
    const time = (iso: string) => iso.replace('T', ' ').replace('.000Z', 'Z');
    const later = await audit(['stats', '--since', at(61), '--until', at(120)]);
    expect(later).toEqual({
      code: 0,
      stdout: `no audit records between ${time(at(61))} and ${time(at(120))}\n`,
      stderr: '',
    });
    const recent = await audit(['stats', '--since', '30m']);
    expect(recent.code).toBe(0);
    const since = /^no audit records since (\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ)\n$/.exec(
      recent.stdout,
    );
    expect(since).not.toBeNull();
    const sinceMs = Date.parse((since?.[1] ?? '').replace(' ', 'T'));
    expect(Math.abs(Date.now() - 30 * 60_000 - sinceMs)).toBeLessThan(60_000);
    const json = await audit(['stats', '--since', at(61), '--until', at(120), '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ since: at(61), until: at(120), total: 0 });
  });
});

describe('admin records', () => {
  // A window three days back, apart from the stats tests' and the last hour.
  const from = new Date(Math.floor((Date.now() - 3 * 86_400_000) / 60_000) * 60_000);
  const at = (minutes: number) => new Date(from.getTime() + minutes * 60_000).toISOString();
  const window = ['--since', at(0), '--until', at(60)];
  const SERVICE = 'pii-127-0-0-1-8081-mcp-0a1b2c3d';

  beforeAll(
    () =>
      storeRecords(
        [
          {
            kind: 'chain',
            event: 'tools/call',
            phase: 'request',
            method: 'tools/call',
            target: 'get_weather',
            decision: 'allowed',
            status: 'success',
            durationMs: 5,
          },
          {
            kind: 'admin',
            event: 'admin/services/register',
            phase: 'request',
            method: 'POST /admin/services',
            target: SERVICE,
            principal: { type: 'service', id: 'FLEET_ADMIN_TOKEN' },
            decision: 'allowed',
            status: 'success',
            durationMs: 12,
          },
        ],
        at,
        window,
      ),
    30_000,
  );

  it('finds who changed the chain with --kind admin and --event, and counts them in stats', async () => {
    for (const filter of [
      ['--kind', 'admin'],
      ['--event', 'admin/services/register'],
    ]) {
      const run = await audit(['query', ...filter, ...window, '--json']);
      expect(run.code).toBe(0);
      const { records } = JSON.parse(run.stdout) as { records: Array<Record<string, unknown>> };
      expect(records).toEqual([
        expect.objectContaining({
          kind: 'admin',
          target: SERVICE,
          principal: { type: 'service', id: 'FLEET_ADMIN_TOKEN' },
        }),
      ]);
    }
    const plain = await audit(['query', '--kind', 'admin', ...window]);
    expect(plain.stdout).toContain(`POST /admin/services ${SERVICE}`);
    expect(plain.stdout).toContain('service:FLEET_ADMIN_TOKEN');
    expect(plain.stdout).not.toContain('get_weather');
    const chain = await audit(['query', '--kind', 'chain', ...window, '--json']);
    expect(
      (JSON.parse(chain.stdout) as { records: Array<{ target: string }> }).records.map(
        (r) => r.target,
      ),
    ).toEqual(['get_weather']);
    const stats = await audit(['stats', ...window]);
    expect(stats.stdout.split('\n')[0]).toMatch(/: 2 \(1 chain, 0 invocation, 1 admin\)$/);
    // A service id is no tool.
    expect(stats.stdout).not.toContain(SERVICE);
  });

  it('are named in the --help of audit query, every admin event', async () => {
    const run = await fleet(['audit', 'query', '--help']);
    expect(run.code).toBe(0);
    // Commander wraps the help: compare words.
    const words = run.stdout.split(/[\s,()]+/);
    for (const event of Object.keys(ADMIN_EVENTS)) expect(words, event).toContain(event);
  });

  it('refuses a --kind it does not know (exit 2)', async () => {
    const run = await audit(['query', '--kind', 'registry']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--kind');
  });
});

describe('fleet audit export', () => {
  // A window four days back, apart from the other tests' windows; one record a second.
  const from = new Date(Math.floor((Date.now() - 4 * 86_400_000) / 60_000) * 60_000);
  const at = (seconds: number) => new Date(from.getTime() + seconds * 1000).toISOString();
  const TOTAL = 1_200;
  const window = ['--since', at(0), '--until', at(TOTAL + 60)];
  const records: AuditRecordInput[] = Array.from({ length: TOTAL }, (_, i) => ({
    kind: 'chain',
    event: 'tools/call',
    phase: 'request',
    method: 'tools/call',
    target: i % 3 === 0 ? 'send_email' : 'get_weather',
    decision: i % 2 === 0 ? 'allowed' : 'denied',
    status: i % 2 === 0 ? 'success' : 'validation_failed',
    durationMs: i,
  }));
  let out: string;

  beforeAll(() => storeRecords(records, at, window), 60_000);
  beforeAll(async () => {
    out = await mkdtemp(join(tmpdir(), 'fleet-cli-export-'));
  });
  afterAll(() => rm(out, { recursive: true, force: true }));

  const lines = (ndjson: string) =>
    ndjson
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { id: string; timestamp: string; durationMs: number });

  it('writes every record of more than one page to stdout, once each, as the API returns them', async () => {
    const run = await audit(['export', ...window]);
    expect(run.code).toBe(0);
    // Not a terminal and no --out: no progress, and stdout carries records only.
    expect(run.stderr).toBe('');
    expect(run.stdout.endsWith('\n')).toBe(true);
    const exported = lines(run.stdout);
    expect(exported).toHaveLength(TOTAL);
    expect(new Set(exported.map((r) => r.id)).size).toBe(TOTAL);
    expect(exported.map((r) => r.durationMs).sort((a, b) => a - b)).toEqual(
      records.map((r) => r.durationMs),
    );
    // Newest first, and each line is the record exactly as the audit API answers it.
    const query = new URLSearchParams({ since: at(0), until: at(TOTAL + 60), limit: '500' });
    const api = (await (
      await fetch(`${auditLogger.url}/api/audit/records?${query.toString()}`)
    ).json()) as { records: unknown[] };
    expect(run.stdout.split('\n').slice(0, 500)).toEqual(api.records.map((r) => JSON.stringify(r)));
  });

  it('waits for a slow reader of stdout after each page before it fetches the next', async () => {
    // Each wait: the lines written when it began, and again when it ends 100 ms later.
    const waits: Array<[number, number]> = [];
    const count = (text: string) => text.split('\n').length - 1;
    const run = await fleet(
      ['audit', 'export', ...window, '--audit', auditLogger.url, '--state-dir', dir],
      {
        stdoutDrained: async (stdout) => {
          const before = count(stdout());
          await new Promise((r) => setTimeout(r, 100));
          waits.push([before, count(stdout())]);
        },
      },
    );
    expect(run.code).toBe(0);
    expect(waits).toEqual([
      [500, 500],
      [1000, 1000],
      [1200, 1200],
    ]);
  });

  it('applies the filters of audit query', async () => {
    const run = await audit(['export', ...window, '--decision', 'denied', '--tool', 'get_weather']);
    expect(run.code).toBe(0);
    const exported = lines(run.stdout) as unknown as Array<{
      id: string;
      decision: string;
      target: string;
    }>;
    const expected = records.filter((r) => r.decision === 'denied' && r.target === 'get_weather');
    expect(exported).toHaveLength(expected.length);
    expect(new Set(exported.map((r) => r.id)).size).toBe(expected.length);
    for (const r of exported)
      expect(r).toMatchObject({ decision: 'denied', target: 'get_weather' });
  });

  it('writes --out, with progress on stderr, and refuses an existing file without --force', async () => {
    const file = join(out, 'audit.ndjson');
    const run = await audit(['export', ...window, '--out', file]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `exported 500 records…\nexported 1,000 records…\nexported 1,200 records (since ${at(0).replace('T', ' ').replace('.000Z', 'Z')} until ${at(
        TOTAL + 60,
      )
        .replace('T', ' ')
        .replace('.000Z', 'Z')}) to ${file}\n`,
    );
    const written = await readFile(file, 'utf8');
    expect(lines(written)).toHaveLength(TOTAL);
    expect(await readdir(out)).toEqual(['audit.ndjson']);

    const again = await audit(['export', ...window, '--out', file]);
    expect(again).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: ${file} exists already: pass --force to replace it, or pick another --out\n`,
    });
    const forced = await audit([
      'export',
      ...window,
      '--decision',
      'allowed',
      '--out',
      file,
      '--force',
    ]);
    expect(forced.code).toBe(0);
    expect(lines(await readFile(file, 'utf8'))).toHaveLength(TOTAL / 2);
    expect(await readdir(out)).toEqual(['audit.ndjson']);
  });

  it('refuses an --out it cannot write, in one line naming it, before asking the audit API', async () => {
    const missing = join(out, 'no-such-dir', 'audit.ndjson');
    const run = await audit(['export', ...window, '--out', missing]);
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: cannot write --out ${missing}: its directory ${join(out, 'no-such-dir')} does not exist; pick another --out\n  reason: ENOENT\n`,
    });
    const json = await audit(['export', ...window, '--out', missing, '--json']);
    expect(JSON.parse(json.stderr)).toMatchObject({
      code: 'OUT_UNWRITABLE',
      details: { reason: 'ENOENT' },
    });
    // A directory is no file to replace, --force or not; it is left as it was.
    const directory = await mkdtemp(join(out, 'a-directory-'));
    for (const force of [[], ['--force']]) {
      const refused = await audit(['export', ...window, '--out', directory, ...force]);
      expect(refused).toEqual({
        code: 1,
        stdout: '',
        stderr: `error: cannot write --out ${directory}: it is a directory; name a file, e.g. ${join(directory, 'audit.ndjson')}\n`,
      });
    }
    expect(await readdir(directory)).toEqual([]);
    expect((await readdir(out)).filter((name) => name.endsWith('.partial'))).toEqual([]);
  });

  describe('when the audit API dies after the first page', () => {
    const record = { id: 'r1', timestamp: at(1), kind: 'chain', decision: 'allowed' };
    /** A server whose first answer is one page with a cursor; then it drops and stops. */
    async function dyingAuditApi(): Promise<string> {
      let answered = 0;
      const server = await jsonServer((request) => {
        answered++;
        if (answered > 1) {
          request.socket.destroy();
          void server.close();
        }
        return { body: { records: [record, { ...record, id: 'r2' }], nextCursor: 'next' } };
      });
      defer(server.close);
      return server.url;
    }

    it('exits 1 saying the output on stdout is incomplete, and how many records it holds', async () => {
      const url = await dyingAuditApi();
      const run = await fleet(['audit', 'export', '--audit', url]);
      expect(run.code).toBe(1);
      expect(lines(run.stdout).map((r) => r.id)).toEqual(['r1', 'r2']);
      expect(run.stderr.split('\n')[0]).toBe(
        `error: cannot reach the audit API at ${url}: is the fleet running? (fleet up, or pass --audit) (the export is incomplete: 2 records written to stdout before the failure)`,
      );
      const json = await fleet(['audit', 'export', '--audit', await dyingAuditApi(), '--json']);
      expect(JSON.parse(json.stderr.split('\n').at(-2) ?? '')).toMatchObject({
        code: 'AUDIT_UNREACHABLE',
      });
    });

    it('leaves nothing at --out', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'fleet-cli-export-'));
      defer(() => rm(dir, { recursive: true, force: true }));
      const file = join(dir, 'audit.ndjson');
      const url = await dyingAuditApi();
      const run = await fleet(['audit', 'export', '--audit', url, '--out', file]);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain(
        `(the export is incomplete: 2 records fetched, nothing written to ${file})\n`,
      );
      expect(await readdir(dir)).toEqual([]);
    });
  });

  it('fails as audit query does when the API cannot be reached at all, writing nothing', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const file = join(out, 'never.ndjson');
    const run = await fleet(['audit', 'export', '--audit', url, '--out', file]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.split('\n')[0]).toBe(
      `error: cannot reach the audit API at ${url}: is the fleet running? (fleet up, or pass --audit)`,
    );
    await expect(readFile(file)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
