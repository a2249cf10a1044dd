/**
 * The service as a process: the start-up line, a SIGTERM right after it, a refused bad policy
 * or journal directory, the allow-all warning.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOtlpReceiver } from '@fleet/telemetry/testing';
import { deleteKeys, occupiedPort, sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { startRedisServer } from '@fleet/test-fixtures/redis-server';
import { startExpectingRefusal, startRefusalCases } from '@fleet/test-fixtures/start-refusal';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { invokePolicy, listTools } from './pin-service.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

/** A policy file in a new temporary directory. */
function policyFile(text: string): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'policy-'));
  const path = join(dir, 'policy.yaml');
  writeFileSync(path, text);
  return { dir, path };
}

/** The service as a process on a free port, on the local Redis, with `POLICY_FILE=path`. */
function startWithPolicy(path: string, env: Record<string, string> = {}) {
  return startServiceProcess({
    ...sourceCommand(MAIN),
    env: { PORT: '0', REDIS_URL: 'redis://127.0.0.1:6379', POLICY_FILE: path, ...env },
  });
}

/** Forget the pin (and any drift) of `tool`, which the service stored in the local Redis. */
async function redisDel(tool: string): Promise<void> {
  const redis = new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  try {
    await redis.hdel('fleet:pins:digests', tool);
    await redis.hdel('fleet:pins:drifts', tool);
  } finally {
    redis.disconnect();
  }
}

/**
 * A TCP proxy to the local Redis that holds each new connection `holdMs` before it connects
 * it through: a Redis that is slow to answer at start-up.
 */
async function slowRedisProxy(holdMs: number) {
  const target = new URL(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.pause();
    const timer = setTimeout(() => {
      const upstream = connect(Number(target.port || 6379), target.hostname);
      sockets.add(upstream);
      client.pipe(upstream).pipe(client);
      client.resume();
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    }, holdMs);
    client.on('close', () => clearTimeout(timer));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    async [Symbol.asyncDispose]() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

// A port another server holds, for the PORT-in-use case.
const held = await occupiedPort();
afterAll(() => held.close());

describe('policy-validator process', () => {
  it('waits for Redis at start-up: the first tools/list after the start-up line pins its tools', async () => {
    // Without the wait the service answered at once, its store "unavailable" while Redis was
    // still connecting, and pinning failed open: the first listing pinned nothing.
    const { path } = policyFile('version: 1\ndefault: allow\npinning: {enabled: true}\n');
    await using redis = await slowRedisProxy(1_500);
    const tool = `first-${randomUUID()}`;
    const proc = await startWithPolicy(path, { REDIS_URL: redis.url });
    try {
      const listed = await listTools(proc.url, [{ name: tool, inputSchema: { type: 'object' } }]);
      expect(listed).toMatchObject({ result: { info: { kept: 1 } } });
      const { pins } = (await (await fetch(`${proc.url}/policy/pins`)).json()) as {
        pins: Array<{ tool: string }>;
      };
      expect(pins.map((p) => p.tool)).toContain(tool);
      expect(proc.stderr()).not.toContain('redis not reachable at start-up');
    } finally {
      expect((await proc.stop()).code).toBe(0);
      await redisDel(tool);
    }
  });

  it('pins at most PINNING_MAX_TOOLS and shows drifts and unpinnable tools on /metrics', async () => {
    const { path } = policyFile('version: 1\ndefault: allow\npinning: {enabled: true}\n');
    // Its own Redis: the process uses the default key names, which other tests share.
    await using redis = await startRedisServer();
    const proc = await startWithPolicy(path, { REDIS_URL: redis.url, PINNING_MAX_TOOLS: '2' });
    const tool = (name: string, description = name) => ({ name, description, inputSchema: {} });
    try {
      await listTools(proc.url, [tool('alpha'), tool('beta')]);
      // alpha drifts; gamma cannot be pinned and passes (failOpen, the default).
      const listed = await listTools(proc.url, [tool('alpha', 'new'), tool('beta'), tool('gamma')]);
      expect(listed).toMatchObject({ result: { modified: true, info: { drifted: 1 } } });
      const { pins } = (await (await fetch(`${proc.url}/policy/pins`)).json()) as {
        pins: Array<{ tool: string }>;
      };
      expect(pins.map((p) => p.tool)).toEqual(['alpha', 'beta']);
      const metrics = (await (await fetch(`${proc.url}/metrics`)).text()).split('\n');
      for (const line of [
        /^fleet_pins_drift_detections_total\{fleet_pins_drift_kind="new",[^}]*\} 1$/,
        /^fleet_pins_drifted_tools\{[^}]*\} 1$/,
        /^fleet_pins_pinned_tools\{[^}]*\} 2$/,
        /^fleet_pins_unpinned_total\{fleet_pins_action="passed",[^}]*\} 1$/,
      ])
        expect(
          metrics.some((l) => line.test(l)),
          `${line} in /metrics`,
        ).toBe(true);
      expect(metrics.join('\n')).not.toMatch(/alpha|gamma/);
    } finally {
      expect((await proc.stop()).code).toBe(0);
    }
    const warnings = proc
      .stderr()
      .split('\n')
      .filter((l) => l.includes('"level":40'));
    expect(warnings.filter((l) => l.includes('drifted from its pin'))).toEqual([
      expect.stringContaining('"tool":"alpha"'),
    ]);
    expect(warnings.filter((l) => l.includes('tool pin store full'))).toEqual([
      expect.stringContaining('"example":"gamma"'),
    ]);
  });

  it('keeps its rate limits and pins under POLICY_KEY_PREFIX: two fleets on one Redis do not meet', async () => {
    const { path } = policyFile(
      'version: 1\ndefault: allow\npinning: {enabled: true}\nrateLimits:\n  - {id: one, events: ["tools/call"], key: principal.id, limit: 1, window: 60s}\n',
    );
    const prefixes = [`test-pv-${randomUUID()}`, `test-pv-${randomUUID()}`];
    const procs = await Promise.all(
      prefixes.map((prefix) => startWithPolicy(path, { POLICY_KEY_PREFIX: prefix })),
    );
    const redis = new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
    const tool = `shared-${randomUUID()}`;
    try {
      // The same tool name with two definitions, one per fleet: each pins its own, no drift.
      for (const [i, proc] of procs.entries()) {
        const listed = await listTools(proc.url, [
          { name: tool, description: `fleet ${i}`, inputSchema: {} },
        ]);
        expect(listed).toMatchObject({ result: { info: { kept: 1 } } });
        expect(listed).not.toMatchObject({ result: { info: { drifted: 1 } } });
      }
      for (const prefix of prefixes)
        expect(await redis.hexists(`${prefix}:pins:digests`, tool)).toBe(1);
      expect(await redis.hexists('fleet:pins:digests', tool)).toBe(0);
      // A limit of one call a minute for alice, counted per fleet: each fleet allows her first.
      for (const proc of procs) {
        const verdict = await invokePolicy(proc.url, { type: 'user', id: 'alice' });
        expect(verdict).toMatchObject({ result: { valid: true } });
      }
      const again = await invokePolicy(procs[0]?.url ?? '', { type: 'user', id: 'alice' });
      expect(again).toMatchObject({ result: { valid: false } });
      for (const prefix of prefixes)
        expect(await redis.keys(`${prefix}:ratelimit:one:*`)).toHaveLength(1);
    } finally {
      for (const proc of procs) expect((await proc.stop()).code).toBe(0);
      for (const prefix of prefixes) await deleteKeys(redis, `${prefix}:*`);
      redis.disconnect();
    }
  });

  it('refuses to start with POLICY_KEY_PREFIX="fleet *", in one line naming it', async () => {
    const { how, lines } = await startExpectingRefusal({
      ...sourceCommand(MAIN),
      env: { PORT: '0', POLICY_KEY_PREFIX: 'fleet *' },
      readyTimeoutMs: 10_000,
    });
    expect(how).toContain('exited before its start-up line (code 1');
    expect(lines).toEqual([expect.stringContaining('POLICY_KEY_PREFIX must be 1 to 128 letters')]);
  });

  it.each(startRefusalCases(held.port, { redisUrl: true, logLevel: true }))(
    'exits 1 on %s with one line naming it (not a stack)',
    async (_what, env, line) => {
      const dir = mkdtempSync(join(tmpdir(), 'policy-'));
      const journal = join(dir, 'audit.ndjson');
      try {
        const { how, lines } = await startExpectingRefusal({
          ...sourceCommand(MAIN),
          env: { AUDIT_JOURNAL: journal, ...env },
          readyTimeoutMs: 10_000,
        });
        expect(how).toContain('exited before its start-up line (code 1');
        // Beside the JSON log lines (the shutdown that closes the producer, Redis and
        // telemetry) only this one: no stack.
        expect(lines).toEqual([line]);
        // The audit producer released its journal: the next start takes it at once.
        expect(existsSync(`${journal}.lock`)).toBe(false);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it.each(['maybe', '2'])(
    'refuses to start with AUDIT_WRITE_AHEAD=%j, in one line naming it',
    async (value) => {
      const { how, lines } = await startExpectingRefusal({
        ...sourceCommand(MAIN),
        env: { PORT: '0', AUDIT_WRITE_AHEAD: value },
        readyTimeoutMs: 10_000,
      });
      expect(how).toContain('exited before its start-up line (code 1');
      expect(lines).toEqual([
        `AUDIT_WRITE_AHEAD must be one of true, 1, yes, on, false, 0, no, off, got "${value}"`,
      ]);
    },
  );

  it.each(['0', 'ten', '1000001'])('refuses to start with PINNING_MAX_TOOLS=%s', async (value) => {
    const error = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', PINNING_MAX_TOOLS: value },
      readyTimeoutMs: 10_000,
    }).catch((e: unknown) => String(e));
    expect(error).toContain('exited before its start-up line (code 1');
    expect(error).toContain(
      `PINNING_MAX_TOOLS must be an integer from 1 to 1000000 (digits only), got "${value}"`,
    );
  });

  it('starts, says it allows everything without POLICY_FILE, and stops on SIGTERM', async () => {
    const proc = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', REDIS_URL: 'redis://127.0.0.1:6379' },
    });
    expect(proc.service).toBe('policy-validator');
    expect((await fetch(`${proc.url}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${proc.url}/policy`)).json()).toMatchObject({
      fingerprint: 'allow-all',
    });
    const exit = await proc.stop();
    expect(exit.code).toBe(0);
    expect(proc.stderr()).toContain('the policy allows everything');
  });

  it('drains on a SIGTERM sent as soon as its start-up line appears', async () => {
    // The line says the process is ready; its SIGTERM handler used to come after it, and
    // such a SIGTERM ended the process by the signal (code null) in about half the runs.
    const dir = mkdtempSync(join(tmpdir(), 'policy-'));
    try {
      for (let run = 0; run < 4; run++) {
        const proc = await startServiceProcess({
          ...sourceCommand(MAIN),
          cwd: dir,
          env: { PORT: '0', REDIS_URL: 'redis://127.0.0.1:6379' },
        });
        expect(await proc.stop(), `run ${run}:\n${proc.stderr()}`).toEqual({
          code: 0,
          signal: null,
        });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // Four cold starts from source: ~10 s on a quiet machine, twice that under load.
  }, 60_000);

  it('refuses to start, in one line naming AUDIT_JOURNAL, when its directory cannot be created', async () => {
    // The producer started without a journal it could not lock, only logging it: approvals
    // Redis could not take were lost. (Node 20's recursive mkdir under /proc never returns.)
    const error = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', AUDIT_JOURNAL: '/proc/nope/audit.ndjson' },
      // A cold start from source takes ~2.5 s here, and over 10 s on a loaded machine.
      readyTimeoutMs: 30_000,
    }).catch((e: unknown) => String(e));
    expect(error).toContain('exited before its start-up line (code 1');
    // Nothing else on stderr; the failed mkdir is ENOENT as root, EACCES for others.
    expect(String(error).split('--- stderr (tail) ---\n')[1]).toMatch(
      /^AUDIT_JOURNAL: cannot create \/proc\/nope, the audit journal's directory \((ENOENT|EACCES): [^)]*, mkdir '\/proc\/nope'\): set AUDIT_JOURNAL to [^\n]*$/,
    );
  });

  it('with FLEET_TOKEN guards /policy like /mcp and records invocation metrics', async () => {
    const { dir, path } = policyFile(
      `version: 1\ndefault: allow\nrules:\n  - id: no-delete\n    effect: deny\n    tools: ["delete"]\n`,
    );
    const proc = await startWithPolicy(path, { FLEET_TOKEN: 't0k' });
    try {
      const unauthorized = await fetch(`${proc.url}/policy`);
      expect(unauthorized.status).toBe(401);
      expect(unauthorized.headers.get('www-authenticate')).toBe('Bearer');
      const body = await unauthorized.text();
      expect(JSON.parse(body)).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
      expect(body).not.toContain(dir);
      const authorized = await fetch(`${proc.url}/policy`, {
        headers: { authorization: 'Bearer t0k' },
      });
      expect(authorized.status).toBe(200);
      expect(await authorized.json()).toMatchObject({ path });
      // The tool pins behind the same token, on the Redis store main wires.
      const pins = await fetch(`${proc.url}/policy/pins`);
      expect(pins.status).toBe(401);
      expect(await pins.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
      const pinsAuthorized = await fetch(`${proc.url}/policy/pins`, {
        headers: { authorization: 'Bearer t0k' },
      });
      expect(pinsAuthorized.status).toBe(200);
      expect(await pinsAuthorized.json()).toMatchObject({ enabled: false });

      const call = (tool: string, authorization: string) =>
        fetch(`${proc.url}/mcp`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json',
            authorization,
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'interceptor/invoke',
            params: {
              name: 'policy-validator',
              event: 'tools/call',
              phase: 'request',
              payload: { name: tool, arguments: {} },
              context: { principal: { type: 'user', id: 'bob' } },
            },
          }),
        });
      expect((await call('read', 'Bearer wrong')).status).toBe(401);
      // The auth scheme is case-insensitive (RFC 7235).
      expect(await (await call('read', 'bearer t0k')).json()).toMatchObject({
        result: { valid: true },
      });
      expect(await (await call('delete', 'Bearer t0k')).json()).toMatchObject({
        result: { valid: false },
      });
      const metrics = await (await fetch(`${proc.url}/metrics`)).text();
      // One count per outcome in the duration histogram of the interceptor.
      const counts = metrics
        .split('\n')
        .filter((line) => /^fleet_interceptor_duration\w*_count\{/.test(line))
        .filter((line) => line.includes('fleet_interceptor_name="policy-validator"'));
      for (const outcome of ['allowed', 'denied']) {
        expect(
          counts.some(
            (line) =>
              line.includes(`fleet_interceptor_outcome="${outcome}"`) && line.endsWith(' 1'),
          ),
          `${outcome} in\n${counts.join('\n')}`,
        ).toBe(true);
      }
    } finally {
      expect((await proc.stop()).code).toBe(0);
    }
  });

  it('puts no caller-chosen name, event or phase in its spans, metrics or logs', async () => {
    // A policy on every event: any event a caller makes up reaches the validator.
    const { path } = policyFile(`version: 1\ndefault: allow\nevents: ["*"]\nrules: []\n`);
    await using otlp = await startOtlpReceiver();
    const proc = await startWithPolicy(path, {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    const pii = 'bob@example.com';
    const big = 'x'.repeat(1024 * 1024);
    try {
      const invoke = (params: Record<string, unknown>) =>
        fetch(`${proc.url}/mcp`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'interceptor/invoke', params }),
        }).then((r) => r.json() as Promise<{ result?: unknown; error?: { code: number } }>);
      const payload = { name: 'read', arguments: {} };
      const context = { principal: { type: 'user', id: pii }, sessionId: pii };
      for (const name of [big, pii, 'made-up-1', 'made-up-2'])
        expect(
          (await invoke({ name, event: 'tools/call', phase: 'request', payload })).error,
        ).toMatchObject({ code: -32602 });
      for (const event of [`tools/${pii}`, `e/${big}`])
        expect(
          (await invoke({ name: 'policy-validator', event, phase: 'request', payload, context }))
            .result,
        ).toMatchObject({ valid: true });
      await invoke({ name: 'policy-validator', event: 'tools/call', phase: big, payload });
      const metrics = await (await fetch(`${proc.url}/metrics`)).text();
      for (const text of [pii, 'made-up', 'x'.repeat(100)]) expect(metrics).not.toContain(text);
      expect(metrics.length).toBeLessThan(20_000);
      const spans = await otlp.waitFor((all) => all.length >= 7, 10_000);
      expect(spans.map((s) => s.name).sort()).toEqual([
        'interceptor/invoke other',
        'interceptor/invoke other',
        'interceptor/invoke other',
        'interceptor/invoke other',
        'interceptor/invoke policy-validator',
        'interceptor/invoke policy-validator',
        'interceptor/invoke policy-validator',
      ]);
      expect(spans.map((s) => s.attributes['fleet.chain.event'])).toContain('other');
      const exported = JSON.stringify(spans);
      for (const text of [pii, 'made-up', 'x'.repeat(100)]) expect(exported).not.toContain(text);
      expect(exported.length).toBeLessThan(50_000);
    } finally {
      expect((await proc.stop()).code).toBe(0);
    }
    for (const text of [pii, 'x'.repeat(100)]) expect(proc.stderr()).not.toContain(text);
  });

  it.each([
    [
      'a bad policy, naming the rule and line',
      `version: 1\ndefault: deny\nrules:\n  - id: bad-rule\n    effect: deny\n    when: 'arguments.amount >'\n`,
      ['bad-rule', /line \d+|:\d+:\d+/],
    ],
    [
      'a misspelt top-level key, naming it and the likely key',
      'version: 1\ndefualt: allow\nrules: []\n',
      ['unknown key "defualt" (did you mean "default"?)'],
    ],
  ])('refuses to start with %s', async (_what, text, expected) => {
    const error = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', POLICY_FILE: policyFile(text).path },
      readyTimeoutMs: 10_000,
    }).catch((e: unknown) => String(e));
    expect(error).toContain('exited before its start-up line (code 1');
    for (const part of expected) expect(error).toMatch(part);
  });
});
