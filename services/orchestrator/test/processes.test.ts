/**
 * The orchestrator as a real process (`main.ts`), with an interceptor service process and a
 * backend: one trace id across all of them, collected by an in-test OTLP receiver, and the
 * backend receiving the same trace context; graceful SIGTERM; the request deadline that
 * ends a slow-loris body.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineMutator, modified } from '@fleet/interceptor-kit';
import { startSlowLoris } from '@fleet/interceptor-kit/testing';
import { startOtlpReceiver } from '@fleet/telemetry/testing';
import {
  deleteKeys,
  fixtureCommand,
  freePort,
  occupiedPort,
  sourceCommand,
  startHttpBackend,
  startServiceProcess,
} from '@fleet/test-fixtures';
import { startRedisServer } from '@fleet/test-fixtures/redis-server';
import { startExpectingRefusal, startRefusalCases } from '@fleet/test-fixtures/start-refusal';
import { EmptyResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { connectClient, defer, serveInterceptors, textOf } from './harness.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

// A port another server holds, for the PORT-in-use case.
const held = await occupiedPort();
afterAll(() => held.close());

describe('orchestrator process', () => {
  it('carries one trace across orchestrator, interceptor service and backend', async () => {
    const receiver = await startOtlpReceiver();
    defer(() => receiver.close());
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50' };
    const probeCommand = fixtureCommand('probe-interceptors');
    const probe = await startServiceProcess({
      ...probeCommand,
      env: { PORT: '0', OTEL_SERVICE_NAME: 'probe', ...otel },
    });
    defer(() => probe.stop());

    const dir = mkdtempSync(join(tmpdir(), 'fleet-orch-'));
    const configPath = join(dir, 'fleet.yaml');
    const prefix = `proc-${Date.now()}`;
    writeFileSync(
      configPath,
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${probe.url}/mcp"\nregistry: {prefix: ${prefix}}\naudit: {queue: ${prefix}-audit}\n`,
    );
    defer(async () => {
      const redis = new Redis({ host: '127.0.0.1', port: 6379 });
      await deleteKeys(redis, `*${prefix}*`);
      redis.disconnect();
    });
    const main = sourceCommand(MAIN);
    const orchestrator = await startServiceProcess({
      ...main,
      cwd: dir,
      env: {
        PORT: '0',
        FLEET_CONFIG: configPath,
        OTEL_SERVICE_NAME: 'orchestrator',
        LOG_LEVEL: 'warn',
        ...otel,
      },
    });
    defer(() => orchestrator.stop());
    expect(orchestrator.service).toBe('orchestrator');

    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const client = await connectClient(`${orchestrator.url}/mcp`, {
      headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` },
    });
    const result = await client.callTool({ name: 'get_headers', arguments: {} });
    const headers = (result.structuredContent as { headers: Record<string, string> }).headers;
    expect(headers.traceparent?.split('-')[1]).toBe(traceId);

    // The request's SERVER span ends last (after the answer) and may be exported in a later
    // batch than the stage spans: wait for it by name, not just for both services.
    await receiver.waitFor((spans) => {
      const ofTrace = spans.filter((s) => s.traceId === traceId);
      return (
        ofTrace.some((s) => s.serviceName === 'probe') &&
        ofTrace.some((s) => s.serviceName === 'orchestrator' && s.name === 'tools/call get_headers')
      );
    }, 15_000);
    const spans = receiver.spans().filter((s) => s.traceId === traceId);
    const root = spans.find(
      (s) => s.serviceName === 'orchestrator' && s.name === 'tools/call get_headers',
    );
    expect(root?.parentSpanId).toBe('b7ad6b7169203331');
    const probeSpans = spans.filter((s) => s.serviceName === 'probe');
    expect(probeSpans.length).toBeGreaterThanOrEqual(2); // request and response phase
    // The whole hierarchy: request span → chain stage spans → one CLIENT span per
    // invocation → the service's own span; the backend call is a CLIENT span of the request
    // span, and the backend's POST carried that span's id.
    const ours = spans.filter((s) => s.serviceName === 'orchestrator');
    const idsOf = (predicate: (name: string) => boolean) =>
      new Set(ours.filter((s) => predicate(s.name)).map((s) => s.spanId));
    const stages = ours.filter((s) => s.name.startsWith('fleet.chain '));
    expect(stages.map((s) => s.name)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^fleet\.chain request /),
        expect.stringMatching(/^fleet\.chain response /),
      ]),
    );
    for (const stage of stages) expect(stage.parentSpanId).toBe(root?.spanId);
    const stageIds = idsOf((name) => name.startsWith('fleet.chain '));
    const invocations = ours.filter((s) => s.name === 'interceptor/invoke probe');
    expect(invocations.length).toBeGreaterThanOrEqual(2);
    for (const invocation of invocations)
      expect(stageIds.has(invocation.parentSpanId ?? '')).toBe(true);
    const invocationIds = idsOf((name) => name === 'interceptor/invoke probe');
    for (const span of probeSpans) expect(invocationIds.has(span.parentSpanId ?? '')).toBe(true);
    const backendCall = ours.find((s) => s.name === 'tools/call fx');
    expect(backendCall?.parentSpanId).toBe(root?.spanId);
    expect(headers.traceparent?.split('-')[2]).toBe(backendCall?.spanId);

    // A made-up method is answered, but never becomes a metric label of its own: a client
    // could otherwise grow /metrics (and the gateway's memory) without bound.
    // (Under MAX_METHOD_LENGTH: a longer one is refused before any metric or span.)
    const madeUp = `x/${'y'.repeat(200)}`;
    await expect(client.request({ method: madeUp }, EmptyResultSchema)).rejects.toMatchObject({
      code: -32601,
    });
    const metrics = await (await fetch(`${orchestrator.url}/metrics`)).text();
    expect(metrics).toContain('fleet_interceptor_duration');
    expect(metrics).toMatch(/fleet_request_duration[a-z_]*\{[^}]*mcp_method_name="other"/);
    expect(metrics).not.toContain('yyyy');

    const exit = await orchestrator.stop('SIGTERM');
    expect(exit.code).toBe(0);
  });

  it('starts and serves while Redis is down, and takes registrations once it is back', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const interceptors = await serveInterceptors([
      defineMutator({
        name: 'upper',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: (payload) => {
          const p = payload as { arguments?: { text?: string } };
          return modified({ ...p, arguments: { text: String(p.arguments?.text).toUpperCase() } });
        },
      }),
    ]);
    const redisPort = await freePort(); // nothing listens there yet
    const dir = mkdtempSync(join(tmpdir(), 'fleet-orch-'));
    const configPath = join(dir, 'fleet.yaml');
    writeFileSync(configPath, `backends:\n  - {id: fx, url: "${backend.url}"}\n`);
    const orchestrator = await startServiceProcess({
      ...sourceCommand(MAIN),
      cwd: dir,
      env: {
        PORT: '0',
        FLEET_CONFIG: configPath,
        REDIS_URL: `redis://127.0.0.1:${redisPort}`,
        FLEET_ADMIN_TOKEN: 'admin-token-1',
        AUDIT_JOURNAL: join(dir, 'audit.ndjson'),
        LOG_LEVEL: 'warn',
        OTEL_TRACES_EXPORTER: 'none',
      },
      readyTimeoutMs: 30_000,
    });
    defer(() => orchestrator.stop());
    const client = await connectClient(`${orchestrator.url}/mcp`);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'a' } }))).toBe(
      '[fx] a',
    );

    await startRedisServer({ port: redisPort });
    const register = () =>
      fetch(`${orchestrator.url}/admin/services`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer admin-token-1' },
        body: JSON.stringify({ url: interceptors.url }),
      });
    let status = 0;
    for (let i = 0; i < 60 && status !== 201; i++) {
      status = (await register()).status;
      if (status !== 201) await new Promise((r) => setTimeout(r, 500));
    }
    expect(status).toBe(201);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'a' } }))).toBe(
      '[fx] A',
    );
    expect((await orchestrator.stop('SIGTERM')).code).toBe(0);
  });

  it('finishes calls in flight on SIGTERM before it closes their sessions', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const dir = mkdtempSync(join(tmpdir(), 'fleet-orch-'));
    const configPath = join(dir, 'fleet.yaml');
    const prefix = `drain-${Date.now()}`;
    writeFileSync(
      configPath,
      `backends:\n  - {id: fx, url: "${backend.url}"}\nregistry: {prefix: ${prefix}}\naudit: {enabled: false}\n`,
    );
    const orchestrator = await startServiceProcess({
      ...sourceCommand(MAIN),
      cwd: dir,
      env: { PORT: '0', FLEET_CONFIG: configPath, LOG_LEVEL: 'warn', OTEL_TRACES_EXPORTER: 'none' },
      readyTimeoutMs: 30_000,
    });
    defer(() => orchestrator.stop());
    const client = await connectClient(`${orchestrator.url}/mcp`);
    // The first progress notification proves the call is at the backend, in flight.
    let reached: () => void = () => undefined;
    const atBackend = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const call = client.callTool(
      { name: 'progress', arguments: { steps: 2, delayMs: 750 } },
      undefined,
      { onprogress: () => reached() },
    );
    await atBackend;
    const exited = orchestrator.stop('SIGTERM');
    expect(textOf(await call)).toBe('done');
    expect((await exited).code).toBe(0);
  });

  it('refuses a bad config with a message naming the field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-orch-'));
    const configPath = join(dir, 'fleet.yaml');
    writeFileSync(configPath, 'chain: {timeoutMs: -5}\n');
    const main = sourceCommand(MAIN);
    const error = await startServiceProcess({
      ...main,
      cwd: dir,
      env: { PORT: '0', FLEET_CONFIG: configPath },
      readyTimeoutMs: 10_000,
    }).catch((e: unknown) => e);
    expect(String(error)).toContain('chain.timeoutMs');
  });

  it.each(startRefusalCases(held.port, { redisUrl: true, logLevel: true }))(
    'exits 1 on %s with one line naming it (not a stack)',
    async (_what, env, line) => {
      const dir = mkdtempSync(join(tmpdir(), 'fleet-orch-'));
      defer(() => rm(dir, { recursive: true, force: true }));
      const { how, stderr, lines } = await startExpectingRefusal({
        ...sourceCommand(MAIN),
        cwd: dir,
        env,
        readyTimeoutMs: 15_000,
      });
      expect(how).toContain('exited before its start-up line (code 1');
      // Beside the JSON log lines (the shutdown that closes Redis, the audit producer, ...)
      // only this one: no stack.
      expect(lines).toEqual([line]);
      // It never listened: nothing to drain, and the log does not say otherwise.
      expect(stderr).not.toContain('http server drained');
      // The audit producer released its journal: the next start takes it at once.
      expect(existsSync(join(dir, '.fleet/orchestrator-audit.ndjson.lock'))).toBe(false);
    },
  );

  it('exits 1 at once naming AUDIT_JOURNAL when its directory cannot be created (/proc)', async () => {
    // Node 20's recursive mkdir never returns there: the start-up hung before it made it itself.
    const dir = mkdtempSync(join(tmpdir(), 'fleet-orch-'));
    defer(() => rm(dir, { recursive: true, force: true }));
    const started = Date.now();
    const error = await startServiceProcess({
      ...sourceCommand(MAIN),
      cwd: dir,
      env: { PORT: '0', AUDIT_JOURNAL: '/proc/nope/audit.ndjson' },
      readyTimeoutMs: 20_000,
    }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(15_000);
    const [how = '', stderr = ''] = String(error).split('--- stderr (tail) ---\n');
    expect(how).toContain('(code 1,');
    // One line, no stack trace; the failed mkdir is ENOENT as root, EACCES for others.
    expect(stderr.trim()).toMatch(
      /^AUDIT_JOURNAL: cannot create \/proc\/nope, the audit journal's directory \((ENOENT|EACCES): [^)]*, mkdir '\/proc\/nope'\): [^\n]*$/,
    );
  });

  it('answers a dripping slow-loris body with 408 after limits.requestTimeoutMs and keeps serving', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const dir = mkdtempSync(join(tmpdir(), 'fleet-orch-'));
    const configPath = join(dir, 'fleet.yaml');
    const prefix = `proc-loris-${Date.now()}`;
    writeFileSync(
      configPath,
      `backends:\n  - {id: fx, url: "${backend.url}"}\nregistry: {prefix: ${prefix}}\naudit: {enabled: false}\nlimits: {requestTimeoutMs: 800, headersTimeoutMs: 400}\n`,
    );
    const orchestrator = await startServiceProcess({
      ...sourceCommand(MAIN),
      cwd: dir,
      env: { PORT: '0', FLEET_CONFIG: configPath, LOG_LEVEL: 'warn' },
    });
    defer(() => orchestrator.stop());
    const loris = await startSlowLoris(orchestrator.url);
    defer(async () => loris.stop());
    const client = await connectClient(`${orchestrator.url}/mcp`);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    expect(await loris.untilClosed(10_000)).toBe(true);
    expect(loris.received()).toMatch(/^HTTP\/1\.1 408 /);
    const after = await connectClient(`${orchestrator.url}/mcp`);
    expect((await after.listTools()).tools.length).toBeGreaterThan(0);
  });
});
