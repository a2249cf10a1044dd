/**
 * The real audit path of the gateway: chain executions → audit observer → BullMQ producer →
 * Redis. Reads the jobs back from the queue and checks what an auditor relies on: one record
 * per chain phase, the client's trace id, decisions and statuses, interceptor results with
 * durations, abort reasons, target, backend and principal — and no argument value anywhere.
 */
import { randomUUID } from 'node:crypto';
import { allow, defineValidator, deny } from '@fleet/interceptor-kit';
import { startHttpBackend } from '@fleet/test-fixtures';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createAuditObserver, DROPPED_RECORD_LOG_INTERVAL_MS } from '../src/audit.ts';
import {
  connectClient,
  defer,
  serveInterceptors,
  startAuditQueue,
  startGateway,
  textOf,
} from './harness.ts';

const REDIS_URL = 'redis://127.0.0.1:6379';
const TOKEN = 'audit-test-token-123';
/** Appears in call arguments only; it must never reach the audit queue. */
const MARKER = `SECRET-ARG-${randomUUID()}`;

const guard = defineValidator({
  name: 'guard',
  hooks: [{ events: ['tools/call'], phase: 'request' }],
  handler: (payload) =>
    JSON.stringify(payload).includes('deny-me')
      ? deny('denied by the guard', { path: 'arguments.text' })
      : allow(),
});

const inspector = defineValidator({
  name: 'inspector',
  hooks: [{ events: ['tools/call'], phase: 'response' }],
  handler: () => allow(),
});

/** Every value stored under `prefix` in Redis, whatever the key type. */
async function everythingStored(redis: Redis, prefix: string): Promise<string> {
  const parts: string[] = [];
  for (const key of await redis.keys(`${prefix}:*`)) {
    parts.push(key);
    const type = await redis.type(key);
    if (type === 'string') parts.push(String(await redis.get(key)));
    else if (type === 'hash') parts.push(JSON.stringify(await redis.hgetall(key)));
    else if (type === 'list') parts.push(JSON.stringify(await redis.lrange(key, 0, -1)));
    else if (type === 'set') parts.push(JSON.stringify(await redis.smembers(key)));
    else if (type === 'zset') parts.push(JSON.stringify(await redis.zrange(key, '0', '-1')));
    else if (type === 'stream') parts.push(JSON.stringify(await redis.xrange(key, '-', '+')));
  }
  return parts.join('\n');
}

function traceparentFor(traceId: string): string {
  return `00-${traceId}-${randomUUID().replaceAll('-', '').slice(0, 16)}-01`;
}

function newTraceId(): string {
  return randomUUID().replaceAll('-', '');
}

describe('audit records in the queue', () => {
  it('writes one record per chain phase with decisions, reasons, timings and no payloads', async () => {
    const { producer, prefix: bullPrefix, records: queued } = await startAuditQueue();
    const redis = new Redis(REDIS_URL);
    defer(async () => redis.disconnect());

    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const service = await serveInterceptors([guard, inspector]);
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}
interceptors:\n  - url: "${service.url}"
auth:
  mode: tokens
  tokens:
    - {token: ${TOKEN}, principal: {type: user, id: auditor-alice, claims: {team: red}}}
`,
      { redis: false, observer: createAuditObserver(producer) },
    );

    // One client (and trace) per call, each with its own W3C traceparent.
    const call = async (name: string, args: Record<string, unknown>) => {
      const traceId = newTraceId();
      const client = await connectClient(gateway.mcpUrl, {
        headers: { authorization: `Bearer ${TOKEN}`, traceparent: traceparentFor(traceId) },
      });
      const outcome = await client.callTool({ name, arguments: args }).then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      );
      return { traceId, outcome };
    };
    const allowed = await call('echo', { text: `hello ${MARKER}` });
    expect('result' in allowed.outcome && textOf(allowed.outcome.result)).toBe(
      `[fx] hello ${MARKER}`,
    );
    const denied = await call('echo', { text: `deny-me ${MARKER}` });
    expect('error' in denied.outcome && (denied.outcome.error as McpError).code).toBe(-32602);
    const failed = await call('throw', { message: `backend says ${MARKER}` });
    expect('error' in failed.outcome && failed.outcome.error).toBeInstanceOf(McpError);

    const records = await queued();
    expect(producer.metrics()).toMatchObject({ dropped: 0, rejected: 0, journaled: 0 });
    const byTrace = (traceId: string) =>
      records.filter((r) => r.traceId === traceId).sort((a, b) => a.id.localeCompare(b.id));

    // Every record belongs to one of the three calls' traces: the client's trace id is kept.
    expect(records.map((r) => r.traceId).toSorted()).toEqual(
      [allowed.traceId, allowed.traceId, denied.traceId, failed.traceId, failed.traceId].toSorted(),
    );
    for (const record of records) {
      expect(record).toMatchObject({
        kind: 'chain',
        event: 'tools/call',
        method: 'tools/call',
        backend: 'fx',
        principal: { type: 'user', id: 'auditor-alice' },
        sessionId: expect.any(String),
        spanId: expect.stringMatching(/^[0-9a-f]{16}$/),
      });
      expect(record.durationMs).toBeGreaterThanOrEqual(0);
    }

    // Allowed: request and response phase, each with its interceptor's result and duration.
    const [allowedRequest, allowedResponse, ...allowedRest] = byTrace(allowed.traceId);
    expect(allowedRest).toEqual([]);
    expect(allowedRequest).toMatchObject({
      phase: 'request',
      target: 'echo',
      decision: 'allowed',
      status: 'success',
      abortReasons: [],
      interceptors: [
        { name: 'guard', type: 'validation', mode: 'active', outcome: expect.any(String) },
      ],
    });
    expect(allowedResponse).toMatchObject({
      phase: 'response',
      target: 'echo',
      decision: 'allowed',
      status: 'success',
      abortReasons: [],
      interceptors: [{ name: 'inspector', type: 'validation', mode: 'active' }],
    });
    for (const entry of [
      ...(allowedRequest?.interceptors ?? []),
      ...(allowedResponse?.interceptors ?? []),
    ]) {
      expect(entry.durationMs).toBeGreaterThanOrEqual(0);
      expect(entry.service).toEqual(expect.any(String));
    }

    // Denied: the request phase only (the backend was never called), naming the validator.
    const [deniedRequest, ...deniedRest] = byTrace(denied.traceId);
    expect(deniedRest).toEqual([]);
    expect(deniedRequest).toMatchObject({
      phase: 'request',
      target: 'echo',
      decision: 'denied',
      status: 'validation_failed',
      abortReasons: [
        {
          interceptor: 'guard',
          reason: 'denied by the guard',
          type: 'validation',
          phase: 'request',
        },
      ],
      interceptors: [
        {
          name: 'guard',
          type: 'validation',
          outcome: expect.any(String),
          messages: [{ path: 'arguments.text', severity: 'error', message: 'denied by the guard' }],
        },
      ],
    });
    expect(deniedRequest?.interceptors[0]?.durationMs).toBeGreaterThanOrEqual(0);

    // Backend error: the request phase passed, then the backend failed.
    const [failedRequest, failedBackend, ...failedRest] = byTrace(failed.traceId);
    expect(failedRest).toEqual([]);
    expect(failedRequest).toMatchObject({
      phase: 'request',
      target: 'throw',
      decision: 'allowed',
      status: 'success',
    });
    expect(failedBackend).toMatchObject({
      phase: 'response',
      target: 'throw',
      decision: 'error',
      status: 'backend_error',
    });

    // No argument value (nor the backend's error text built from one) anywhere in Redis.
    const stored = await everythingStored(redis, bullPrefix);
    expect(stored).toContain(allowed.traceId);
    expect(stored).not.toContain(MARKER);
    expect(stored).not.toContain('hello');
    expect(stored).not.toContain('deny-me');
  });
});

describe('records that cannot be queued', () => {
  it('drops them without failing the call, and says so once a minute with the count', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
    let clock = 0;
    const observer = createAuditObserver(
      {
        enqueue() {
          throw new RangeError('the queue refused the record');
        },
      },
      {
        warn: (fields: Record<string, unknown>, message: string) =>
          warnings.push({ fields, message }),
      },
      () => clock,
    );
    const gateway = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n`, {
      redis: false,
      observer,
    });
    const client = await connectClient(gateway.mcpUrl);
    const call = async () =>
      textOf(await client.callTool({ name: 'echo', arguments: { text: MARKER } }));
    expect(await call()).toBe(`[fx] ${MARKER}`);
    expect(warnings).toEqual([
      {
        fields: { dropped: 1, reason: 'RangeError: the queue refused the record' },
        message: 'audit record dropped: it could not be built or queued',
      },
    ]);
    // Within the minute: counted, not logged again.
    expect(await call()).toBe(`[fx] ${MARKER}`);
    expect(warnings).toHaveLength(1);
    clock += DROPPED_RECORD_LOG_INTERVAL_MS;
    const before = gateway.executions.length;
    expect(await call()).toBe(`[fx] ${MARKER}`);
    expect(warnings).toHaveLength(2);
    // Every chain execution so far was dropped and counted (one record per execution).
    expect(warnings[1]?.fields.dropped).toBe(before + 1);
    expect(before).toBeGreaterThanOrEqual(2);
    expect(JSON.stringify(warnings)).not.toContain(MARKER);
  });
});
