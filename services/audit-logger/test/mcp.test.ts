/**
 * The audit-logger interceptor over real HTTP, answering a stock MCP SDK client: it shows up
 * in interceptors/list as a validator in audit mode with failOpen, answers invoke with
 * valid: true at once (also with Redis unreachable), and its record travels through the real
 * producer, Redis and worker into PostgreSQL.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type AuditLogger,
  type AuditProducer,
  type AuditStore,
  type AuditWorkerOptions,
  createAuditProducer,
  createAuditWorker,
} from '@fleet/audit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAuditLoggerApp } from '../src/app.ts';
import { createPiiScrubber } from '../src/scrubber.ts';
import {
  connectMcpClient,
  defer,
  openSchemaStore,
  REDIS_URL,
  serve,
  spanId,
  traceId,
  uniquePrefix,
  waitFor,
} from './helpers.ts';

const quiet: AuditLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const ListResult = z.looseObject({ interceptors: z.array(z.looseObject({ name: z.string() })) });
const InvokeResult = z.looseObject({ interceptor: z.string(), valid: z.boolean() });

let store: AuditStore;
let drop: () => Promise<void>;
beforeAll(async () => {
  ({ store, drop } = await openSchemaStore());
});
afterAll(async () => {
  await drop?.();
});

async function journalPath(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'audit-logger-journal-'));
  defer(() => rm(dir, { recursive: true, force: true }));
  return join(dir, 'journal.ndjson');
}

function invoke(event: string, phase: 'request' | 'response', payload: unknown, context = {}) {
  return {
    method: 'interceptor/invoke',
    params: { name: 'audit-logger', event, phase, payload, context },
  };
}

/** A producer and a worker on a fresh prefix of the real Redis, into the test's store. */
async function startPipeline(
  worker: Pick<AuditWorkerOptions, 'scrub'> = {},
): Promise<AuditProducer> {
  const prefix = uniquePrefix();
  const producer = createAuditProducer({
    connection: REDIS_URL,
    prefix,
    journalPath: await journalPath(),
    logger: quiet,
  });
  defer(() => producer.close());
  const consumer = createAuditWorker({
    store,
    connection: REDIS_URL,
    prefix,
    logger: quiet,
    ...worker,
  });
  defer(() => consumer.close());
  return producer;
}

describe('audit-logger over MCP Streamable HTTP', () => {
  it('answers a stock SDK client, and each invocation lands in the store', async () => {
    const producer = await startPipeline();
    const service = createAuditLoggerApp({ sink: producer, store });
    const base = await serve(service.listener);
    const client = await connectMcpClient(`${base}/mcp`);

    const capabilities = client.getServerCapabilities() as {
      extensions?: Record<string, { supportedEvents?: string[] }>;
    };
    expect(capabilities.extensions?.['io.modelcontextprotocol/interceptors']).toEqual({
      supportedEvents: ['*'],
    });
    const list = await client.request({ method: 'interceptors/list', params: {} }, ListResult);
    expect(list.interceptors).toEqual([
      expect.objectContaining({
        name: 'audit-logger',
        type: 'validation',
        mode: 'audit',
        failOpen: true,
      }),
    ]);

    const trace = traceId();
    const context = {
      traceId: trace,
      spanId: spanId(),
      sessionId: 'mcp-session-1',
      timestamp: new Date().toISOString(),
      principal: {
        type: 'user',
        id: 'alice',
        claims: { roles: ['admin'], email: 'a@example.com' },
      },
    };
    const started = performance.now();
    const request = await client.request(
      invoke(
        'tools/call',
        'request',
        { name: 'get_weather', arguments: { city: 'Paris' } },
        context,
      ),
      InvokeResult,
    );
    const requestMs = performance.now() - started;
    const response = await client.request(
      invoke('tools/call', 'response', { content: [{ type: 'text', text: 'sunny' }] }, context),
      InvokeResult,
    );
    expect(request).toMatchObject({
      interceptor: 'audit-logger',
      type: 'validation',
      valid: true,
      phase: 'request',
    });
    expect(response).toMatchObject({ valid: true, phase: 'response' });
    expect(requestMs).toBeLessThan(500);

    await waitFor(
      async () => (await store.trace(trace)).records.length === 2,
      'both records in PostgreSQL',
    );
    const { records } = await store.trace(trace);
    expect(records.map((r) => [r.kind, r.phase, r.target])).toEqual([
      ['invocation', 'request', 'get_weather'],
      ['invocation', 'response', undefined],
    ]);
    expect(records[0]).toMatchObject({
      sessionId: 'mcp-session-1',
      principal: { type: 'user', id: 'alice', claims: { roles: ['admin'] } },
    });
    expect(JSON.stringify(records)).not.toMatch(/Paris|sunny|a@example\.com/);
  });

  it('stores targets scrubbed by the PII engine: records and stats byTool hold no raw value', async () => {
    const producer = await startPipeline({ scrub: createPiiScrubber() });
    const base = await serve(createAuditLoggerApp({ sink: producer, store }).listener);
    const client = await connectMcpClient(`${base}/mcp`);
    const trace = traceId();
    const context = { traceId: trace, timestamp: new Date().toISOString() };
    const uri = 'mailto:bob@example.com?card=4111111111111111';
    await client.request(invoke('resources/read', 'request', { uri }, context), InvokeResult);
    await client.request(
      invoke('tools/call', 'request', { name: 'notify_bob@example.com' }, context),
      InvokeResult,
    );
    await waitFor(async () => (await store.trace(trace)).records.length === 2, 'both records');

    const records = await (await fetch(`${base}/api/audit/traces/${trace}`)).json();
    const stats = await (await fetch(`${base}/api/audit/stats?since=1h`)).json();
    for (const body of [JSON.stringify(records), JSON.stringify(stats)]) {
      expect(body).not.toContain('bob@example.com');
      expect(body).not.toContain('4111111111111111');
    }
    expect((records as { records: Array<{ target: string }> }).records[0]?.target).toBe(
      'mailto:[EMAIL_ADDRESS]?card=[CREDIT_CARD]',
    );
    expect((stats as { byTool: Array<{ tool: string }> }).byTool.map((r) => r.tool)).toContain(
      '[EMAIL_ADDRESS]',
    );
  });

  it('stores a made-up event scrubbed by the PII engine, and an MCP event as it is', async () => {
    const producer = await startPipeline({ scrub: createPiiScrubber() });
    const base = await serve(createAuditLoggerApp({ sink: producer, store }).listener);
    const client = await connectMcpClient(`${base}/mcp`);
    const trace = traceId();
    const context = { traceId: trace, timestamp: new Date().toISOString() };
    // The interceptor hooks `*`: any method a client makes up is an event named by it.
    const invented = 'tools/bob@example.com';
    await client.request(invoke(invented, 'request', {}, context), InvokeResult);
    await client.request(invoke('tools/call', 'request', { name: 'echo' }, context), InvokeResult);
    await waitFor(async () => (await store.trace(trace)).records.length === 2, 'both records');

    const byEvent = async (event: string) =>
      (
        (await (
          await fetch(
            `${base}/api/audit/records?traceId=${trace}&event=${encodeURIComponent(event)}`,
          )
        ).json()) as { records: Array<{ event: string; method: string }> }
      ).records;
    expect(JSON.stringify(await store.trace(trace))).not.toContain('bob@example.com');
    expect(await byEvent(invented)).toEqual([]);
    expect(await byEvent('tools/[EMAIL_ADDRESS]')).toMatchObject([
      { event: 'tools/[EMAIL_ADDRESS]', method: 'tools/[EMAIL_ADDRESS]' },
    ]);
    expect(await byEvent('tools/call')).toMatchObject([
      { event: 'tools/call', method: 'tools/call' },
    ]);
  });

  it('stores a payload preview cut through a PII value without any part of the value', async () => {
    const producer = await startPipeline({ scrub: createPiiScrubber() });
    const previewChars = 48;
    const base = await serve(
      createAuditLoggerApp({ sink: producer, store, previewChars }).listener,
    );
    const client = await connectMcpClient(`${base}/mcp`);
    const trace = traceId();
    const payload = { name: 'send', arguments: { to: 'bob.smith@example.com' } };
    // The cut falls inside the address: `...{"to":"bob.smith@exam`.
    expect(JSON.stringify(payload).slice(0, previewChars)).toMatch(/bob\.smith@exam$/);
    await client.request(
      invoke('tools/call', 'request', payload, {
        traceId: trace,
        timestamp: new Date().toISOString(),
      }),
      InvokeResult,
    );
    await waitFor(async () => (await store.trace(trace)).records.length === 1, 'the record');
    const [record] = (await store.trace(trace)).records;
    expect(record?.payloadPreview).toHaveLength(previewChars);
    expect(record?.payloadPreview).toMatch(/^\{"name":"send","arguments":\{"to":"\[EMAIL/);
    expect(record?.payloadPreview).not.toMatch(/bob|smith|exam/);
  });

  it('never waits on Redis: with Redis unreachable, invoke still answers at once', async () => {
    const producer = createAuditProducer({
      connection: 'redis://127.0.0.1:1',
      journalPath: await journalPath(),
      logger: quiet,
    });
    defer(() => producer.close());
    const base = await serve(createAuditLoggerApp({ sink: producer, store }).listener);
    const client = await connectMcpClient(`${base}/mcp`);
    const times: number[] = [];
    for (let i = 0; i < 20; i++) {
      const started = performance.now();
      const result = await client.request(
        invoke('resources/read', 'request', { uri: `file:///${i}` }),
        InvokeResult,
      );
      times.push(performance.now() - started);
      expect(result.valid).toBe(true);
    }
    times.sort((a, b) => a - b);
    expect(times[10]).toBeLessThan(50);
    expect(producer.metrics()).toMatchObject({ enqueued: 20, sent: 0, connected: false });
  });

  it('requires FLEET_TOKEN on /mcp when it is set', async () => {
    const base = await serve(
      createAuditLoggerApp({ sink: { enqueue: () => undefined }, store, token: 'fleet-secret' })
        .listener,
    );
    const denied = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'interceptors/list', params: {} }),
    });
    expect(denied.status).toBe(401);
    const client = await connectMcpClient(`${base}/mcp`, 'fleet-secret');
    const list = await client.request({ method: 'interceptors/list', params: {} }, ListResult);
    expect(list.interceptors.map((i) => i.name)).toEqual(['audit-logger']);
  });
});
