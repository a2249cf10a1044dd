/**
 * The real fleet as processes (orchestrator, pii-redactor, policy-validator, audit-logger,
 * audit worker, demo backend, plus a stdio fixture backend and server-everything), on real
 * Redis (a unique queue and registry prefix) and a real PostgreSQL database per run, driven
 * by the official MCP SDK client.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { LocalFleet } from '@fleet/cli';
import type { OtlpReceiver } from '@fleet/telemetry/testing';
import { sourceCommand } from '@fleet/test-fixtures';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  type E2eFleet,
  runFleet,
  startE2eFleet,
  resultText as text,
} from './fleet.ts';

let e2e: E2eFleet;
let fleet: LocalFleet;
let receiver: OtlpReceiver;
let databaseUrl: string;
const clients: Client[] = [];

beforeAll(async () => {
  e2e = await startE2eFleet({ postgres: true, otlp: true, extraBackends: true });
  fleet = e2e.fleet;
  receiver = e2e.receiver as OtlpReceiver;
  databaseUrl = e2e.databaseUrl as string;
}, 180_000);

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await e2e?.stop();
}, 60_000);

async function connect(token: string): Promise<Client> {
  const client = await connectClient(fleet.mcpUrl, token);
  clients.push(client);
  return client;
}

const traceparent = (traceId: string) => `00-${traceId}-${randomBytes(8).toString('hex')}-01`;

async function auditTrace(
  traceId: string,
  until: (records: Array<Record<string, unknown>>) => boolean,
) {
  const deadline = Date.now() + 20_000;
  let records: Array<Record<string, unknown>> = [];
  while (Date.now() < deadline) {
    const res = await fetch(`${fleet.urls['audit-logger']}/api/audit/traces/${traceId}`);
    if (res.ok)
      records = ((await res.json()) as { records: Array<Record<string, unknown>> }).records;
    if (until(records)) return records;
    await new Promise((r) => setTimeout(r, 250));
  }
  return records;
}

describe('the fleet end to end', { timeout: 60_000 }, () => {
  it('redacts PII on the way out and restores the caller’s own token on the way in', async () => {
    const alice = await connect('alice-e2e-token-1');
    const bob = await connect('bob-e2e-token-123');
    const seen = text(await alice.callTool({ name: 'lookup_customer', arguments: { id: '42' } }));
    expect(seen).toContain('Ada Lovelace');
    expect(seen).not.toContain('ada.lovelace@example.com');
    expect(seen).toContain('1111');
    expect(seen).not.toContain('4111 1111 1111 1111');
    const token = /<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/.exec(seen)?.[0] ?? '';
    expect(token).not.toBe('');
    expect(
      text(await alice.callTool({ name: 'send_email', arguments: { to: token, subject: 'hi' } })),
    ).toContain('Delivered');
    // Bob replays Alice's token: it is not restored, so the backend cannot deliver.
    expect(
      text(await bob.callTool({ name: 'send_email', arguments: { to: token, subject: 'hi' } })),
    ).toContain('Could not deliver');
  });

  it('keeps its Redis keys (registry, rate limits, token vault) under its own prefix', async () => {
    const alice = await connect('alice-e2e-token-1');
    await alice.callTool({ name: 'lookup_customer', arguments: { id: '42' } });
    // Another fleet on this Redis (the other e2e files, a developer's `fleet up`) counts its
    // own rate limits and keeps its own tokens: nothing of this one is under the defaults.
    const redis = new Redis({ host: '127.0.0.1', port: 6379 });
    try {
      const prefix = e2e.registryPrefix;
      expect(prefix).toMatch(/^fleet-up-[0-9a-f]{8}$/);
      for (const part of ['ratelimit:per-principal-calls', 'pii:vault'])
        expect((await redis.keys(`${prefix}:${part}:*`)).length, part).toBeGreaterThan(0);
    } finally {
      redis.disconnect();
    }
  });

  it('serves desktop clients on stdio with `fleet stdio`, two at once, through the same chain', async () => {
    const cli = sourceCommand(
      fileURLToPath(new URL('../../../packages/cli/src/main.ts', import.meta.url)),
      ['stdio', '--state-dir', fleet.stateDir],
    );
    const transport = new StdioClientTransport({
      command: cli.command,
      args: cli.args,
      env: { AUDIT_QUEUE: e2e.queue, LOG_LEVEL: 'warn', OTEL_TRACES_EXPORTER: 'none' },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const desktop = new Client({ name: 'desktop', version: '1.0.0' });
    await desktop.connect(transport);
    // A second desktop client at the same time (its own session, its own audit journal).
    const second = new Client({ name: 'desktop-2', version: '1.0.0' });
    await second.connect(
      new StdioClientTransport({
        command: cli.command,
        args: cli.args,
        env: { AUDIT_QUEUE: e2e.queue, LOG_LEVEL: 'warn', OTEL_TRACES_EXPORTER: 'none' },
        stderr: 'pipe',
      }),
    );
    try {
      expect(
        text(await second.callTool({ name: 'lookup_customer', arguments: { id: '42' } })),
      ).toContain('Ada Lovelace');
      const tools = (await desktop.listTools()).tools.map((t) => t.name);
      expect(tools).toContain('lookup_customer');
      // The fleet's pii-redactor is on the path: the address leaves as a token.
      const seen = text(
        await desktop.callTool({ name: 'lookup_customer', arguments: { id: '42' } }),
      );
      expect(seen).toContain('Ada Lovelace');
      expect(seen).not.toContain('ada.lovelace@example.com');
      expect(seen).toMatch(/<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/);
      // And its policy-validator: the desktop user (the OS account, no roles) is no admin.
      const error = await desktop
        .callTool({ name: 'delete_record', arguments: { id: '42' } })
        .catch((e: unknown) => e);
      expect(error, stderr).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(-32602);
    } finally {
      await desktop.close();
      await second.close();
    }
  });

  it('denies by policy with the rule id and filters tools/list per principal', async () => {
    const alice = await connect('alice-e2e-token-1');
    const bob = await connect('bob-e2e-token-123');
    const error = await bob
      .callTool({ name: 'delete_record', arguments: { id: '42' } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32602);
    expect(JSON.stringify((error as McpError).data)).toContain('admins-only-delete');
    expect(text(await alice.callTool({ name: 'delete_record', arguments: { id: '7' } }))).toContain(
      'Deleted',
    );

    const names = async (client: Client) => {
      const all: string[] = [];
      let cursor: string | undefined;
      for (let i = 0; i < 10; i++) {
        const page = await client.listTools(cursor === undefined ? {} : { cursor });
        all.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
        if (!cursor) break;
      }
      return all;
    };
    expect(await names(alice)).toContain('delete_record');
    const bobs = await names(bob);
    expect(bobs).not.toContain('delete_record');
    expect(bobs).toEqual(expect.arrayContaining(['lookup_customer', 'fx_echo', 'ev_echo']));
  });

  it('routes to the stdio fixture and to server-everything through the chain', async () => {
    const alice = await connect('alice-e2e-token-1');
    expect(text(await alice.callTool({ name: 'fx_echo', arguments: { text: 'hello' } }))).toBe(
      '[fx] hello',
    );
    expect(
      text(
        await alice.callTool({
          name: 'ev_echo',
          arguments: { message: 'mail me at x@example.com' },
        }),
      ),
    ).not.toContain('x@example.com');
  });

  it('records every call in the audit trail, found by the client’s trace id, without raw PII', async () => {
    const alice = await connect('alice-e2e-token-1');
    const traceId = randomBytes(16).toString('hex');
    await alice.callTool({
      name: 'lookup_customer',
      arguments: { id: '7' },
      _meta: { traceparent: traceparent(traceId) },
    });
    const records = await auditTrace(
      traceId,
      (r) =>
        r.filter((x) => x.kind === 'chain').length >= 2 && r.some((x) => x.kind === 'invocation'),
    );
    const chain = records.filter((r) => r.kind === 'chain');
    expect(chain.map((r) => r.phase)).toEqual(['request', 'response']);
    expect(chain.every((r) => r.decision === 'allowed' && r.target === 'lookup_customer')).toBe(
      true,
    );
    expect(records.some((r) => r.kind === 'invocation')).toBe(true);
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query('SELECT record::text AS r FROM audit_records');
      expect(rows.length).toBeGreaterThan(0);
      const all = rows.map((row: { r: string }) => row.r).join('\n');
      expect(all).not.toContain('alan.turing@example.org');
      expect(all).not.toContain('5555 5555 5555 4444');
    } finally {
      await db.end();
    }
  });

  it('puts changes made through the admin API in the audit trail, as kind admin', async () => {
    const { services } = (await (await fetch(`${fleet.adminUrl}/services`)).json()) as {
      services: Array<{ id: string; url: string }>;
    };
    const pii = services.find((s) => s.url.startsWith(fleet.urls['pii-redactor']));
    expect(pii).toBeDefined();
    const refreshed = await fetch(`${fleet.adminUrl}/services/${pii?.id}/refresh`, {
      method: 'POST',
    });
    expect(refreshed.status).toBe(200);
    // The orchestrator's producer → BullMQ → the audit worker → PostgreSQL → the audit API.
    const deadline = Date.now() + 20_000;
    let records: Array<Record<string, unknown>> = [];
    while (records.length === 0 && Date.now() < deadline) {
      const res = await fetch(`${fleet.urls['audit-logger']}/api/audit/records?kind=admin`);
      if (res.ok) records = ((await res.json()) as { records: typeof records }).records;
      if (records.length === 0) await new Promise((r) => setTimeout(r, 250));
    }
    expect(records).toEqual([
      expect.objectContaining({
        kind: 'admin',
        event: 'admin/services/refresh',
        method: 'POST /admin/services/{id}/refresh',
        target: pii?.id,
        // This fleet's admin API is open (no FLEET_ADMIN_TOKEN): no one in particular.
        principal: { type: 'anonymous' },
        decision: 'allowed',
        status: 'success',
      }),
    ]);
  });

  it('shows the trail with `fleet audit query` and `fleet audit trace`', async () => {
    const bob = await connect('bob-e2e-token-123');
    const traceId = randomBytes(16).toString('hex');
    await bob
      .callTool({
        name: 'delete_record',
        arguments: { id: '7' },
        _meta: { traceparent: traceparent(traceId) },
      })
      .catch(() => undefined);
    await auditTrace(traceId, (r) => r.some((x) => x.kind === 'chain' && x.decision === 'denied'));
    const run = runFleet;
    const audit = fleet.urls['audit-logger'];
    const trace = await run(['audit', 'trace', traceId, '--audit', audit]);
    expect(trace.code).toBe(0);
    expect(trace.stdout).toContain('delete_record');
    expect(trace.stdout).toContain('admins-only-delete');
    const query = await run([
      'audit',
      'query',
      '--decision',
      'denied',
      '--principal',
      'bob',
      '--since',
      '10m',
      '--audit',
      audit,
      '--json',
    ]);
    expect(query.code).toBe(0);
    const records = (
      JSON.parse(query.stdout) as { records: Array<{ traceId: string; decision: string }> }
    ).records;
    expect(records.some((r) => r.traceId === traceId && r.decision === 'denied')).toBe(true);
    expect((await run(['audit', 'trace', 'not-a-trace', '--audit', audit])).code).toBe(2);
  });

  it('carries one trace across the orchestrator and every interceptor service', async () => {
    const alice = await connect('alice-e2e-token-1');
    const traceId = randomBytes(16).toString('hex');
    await alice.callTool({
      name: 'get_weather',
      arguments: { city: 'Oslo' },
      _meta: { traceparent: traceparent(traceId) },
    });
    const wanted = ['orchestrator', 'pii-redactor', 'policy-validator', 'audit-logger'];
    await receiver.waitFor(
      (spans) =>
        wanted.every((s) => spans.some((x) => x.traceId === traceId && x.serviceName === s)),
      20_000,
    );
    const services = new Set(
      receiver
        .spans()
        .filter((s) => s.traceId === traceId)
        .map((s) => s.serviceName),
    );
    for (const s of wanted) expect(services.has(s)).toBe(true);
  });

  it('fails closed while the pii-redactor is down and recovers when it returns', async () => {
    const alice = await connect('alice-e2e-token-1');
    expect(fleet.kill('pii-redactor')).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    const error = await alice
      .callTool({ name: 'get_weather', arguments: { city: 'Rome' } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32603);
    // The service's first interceptor on the request path (pii-guard) is the one reported.
    expect(JSON.stringify((error as McpError).data)).toMatch(
      /"failedInterceptor":"pii-(guard|redactor)"/,
    );
    const deadline = Date.now() + 30_000;
    let recovered = '';
    while (Date.now() < deadline) {
      recovered = await alice
        .callTool({ name: 'get_weather', arguments: { city: 'Rome' } })
        .then(text, () => '');
      if (recovered) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(recovered).toContain('Rome');
  });
});
