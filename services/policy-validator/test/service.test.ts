/**
 * The policy-validator service over real HTTP with a stock MCP SDK client, real Redis rate
 * limits shared by two instances, hot reload of the policy file, tools/list filtering.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listen, silentLogger } from '@fleet/interceptor-kit';
import { expectErrorReply, findGc, rawPost } from '@fleet/interceptor-kit/testing';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createPolicySource,
  createPolicyValidatorApp,
  type PolicySource,
  RedisRateLimiter,
} from '../src/app.ts';
import { unreachableRedis } from './redis.ts';

const AnyResult = z.object({}).passthrough();
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

const POLICY = `
version: 1
default: deny
rules:
  - id: read-only-for-guests
    effect: deny
    events: ["tools/call"]
    tools: ["*delete*"]
    when: '!("admin" in principal.claims.roles)'
    message: "Only admins may delete"
  - id: big-transfers
    effect: deny
    tools: ["bank_transfer"]
    when: 'arguments.amount > 10000'
  - id: allow-rest
    effect: allow
    events: ["*"]
`;

function policyFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'policy-'));
  const path = join(dir, 'policy.yaml');
  writeFileSync(path, text);
  return path;
}

async function startService(
  options: { path?: string; redis?: Redis; prefix?: string; pollMs?: number } = {},
) {
  const events: string[] = [];
  let refresh: (() => void) | undefined;
  const source: PolicySource = await createPolicySource({
    path: options.path,
    pollMs: options.pollMs ?? 100,
    events: {
      loaded: (_p, first) => {
        events.push(first ? 'loaded' : 'reloaded');
        if (!first) refresh?.();
      },
      rejected: (e) => events.push(`rejected: ${e.message}`),
    },
  });
  const app = createPolicyValidatorApp({
    source,
    log: silentLogger,
    limiter: options.redis ? new RedisRateLimiter(options.redis, options.prefix) : undefined,
  });
  refresh = () => app.refresh();
  const listening = await listen(app.listener, { service: 'policy-validator', announce: false });
  cleanups.push(
    () => listening.close(100),
    () => source.close(),
  );
  return { url: `${listening.url}/mcp`, source, events };
}

async function client(url: string): Promise<Client> {
  const c = new Client({ name: 'stock', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => c.close());
  return c;
}

const alice = { type: 'user', id: 'alice', claims: { roles: ['admin'] } };
const bob = { type: 'user', id: 'bob', claims: { roles: [] } };

function invoke(c: Client, payload: unknown, principal: unknown, event = 'tools/call') {
  return c.request(
    {
      method: 'interceptor/invoke',
      params: {
        name: 'policy-validator',
        event,
        phase: 'request',
        payload,
        context: { principal, timestamp: new Date().toISOString() },
      },
    },
    AnyResult,
  );
}

describe('policy-validator over MCP', () => {
  it('lists both interceptors and decides calls with the rule named', async () => {
    const svc = await startService({ path: policyFile(POLICY) });
    const c = await client(svc.url);
    const list = await c.request({ method: 'interceptors/list', params: {} }, AnyResult);
    const infos = list.interceptors as Array<{
      name: string;
      type: string;
      hooks: Array<{ events: string[]; phase: string }>;
    }>;
    expect(infos.map((i) => [i.name, i.type])).toEqual([
      ['policy-validator', 'validation'],
      ['tool-filter', 'mutation'],
    ]);
    expect(infos[1]?.hooks[0]).toEqual({
      events: expect.arrayContaining(['tools/list', 'prompts/list', 'resources/list']),
      phase: 'response',
    });

    const denied = await invoke(c, { name: 'fs_delete', arguments: {} }, bob);
    expect(denied).toMatchObject({
      valid: false,
      severity: 'error',
      info: { rule: 'read-only-for-guests' },
    });
    expect(JSON.stringify(denied.messages)).toContain('read-only-for-guests');
    expect(JSON.stringify(denied.messages)).toContain('Only admins may delete');
    expect(await invoke(c, { name: 'fs_delete', arguments: {} }, alice)).toMatchObject({
      valid: true,
      info: { rule: 'allow-rest' },
    });
    expect(
      await invoke(c, { name: 'bank_transfer', arguments: { amount: 20000 } }, alice),
    ).toMatchObject({ valid: false, info: { rule: 'big-transfers' } });
    expect(
      await invoke(c, { name: 'bank_transfer', arguments: { amount: 5 } }, alice),
    ).toMatchObject({ valid: true });
    // A missing argument evaluates safely.
    expect(await invoke(c, { name: 'bank_transfer', arguments: {} }, alice)).toMatchObject({
      valid: true,
    });
  });

  it('filters tools/list per principal', async () => {
    const svc = await startService({ path: policyFile(POLICY) });
    const c = await client(svc.url);
    const tools = {
      tools: [
        { name: 'fs_delete', inputSchema: { type: 'object' } },
        { name: 'read_file', inputSchema: { type: 'object' } },
      ],
    };
    const call = (principal: unknown) =>
      c.request(
        {
          method: 'interceptor/invoke',
          params: {
            name: 'tool-filter',
            event: 'tools/list',
            phase: 'response',
            payload: tools,
            context: { principal },
          },
        },
        AnyResult,
      );
    const forBob = await call(bob);
    expect(forBob).toMatchObject({ modified: true, payload: { tools: [{ name: 'read_file' }] } });
    const forAlice = await call(alice);
    expect(forAlice).toMatchObject({ modified: false });
    expect((forAlice.payload as typeof tools).tools).toHaveLength(2);
  });

  it('holds a bounded amount of list answers in its Cedar filter cache', async () => {
    // Any caller may send tool-filter a list to filter; each distinct one used to be cached
    // whole (its JSON as the key, the filtered copy as the value), 512 of them: ~2 MB kept per
    // 1 MiB answer, gigabytes with 4 MiB bodies (here 100 answers of 256 KiB kept ~50 MiB).
    const gc = findGc();
    if (gc === undefined) return;
    const cedar = `version: 1\nengine: cedar\ncedar:\n  policies: |\n    permit(principal, action, resource);\n`;
    const svc = await startService({ path: policyFile(cedar) });
    const filterList = (i: number) =>
      rawPost(svc.url, {
        jsonrpc: '2.0',
        id: i,
        method: 'interceptor/invoke',
        params: {
          name: 'tool-filter',
          event: 'tools/list',
          phase: 'response',
          payload: {
            tools: [{ name: `t${i}`, description: 'd'.repeat(256 * 1024), inputSchema: {} }],
          },
          context: { principal: bob },
        },
      });
    expect((await filterList(0)).json.result).toMatchObject({ modified: false });
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 1; i <= 100; i++) await filterList(i);
    gc();
    const keptMiB = (process.memoryUsage().heapUsed - before) / 1024 / 1024;
    expect(keptMiB).toBeLessThan(32);
  });

  it('answers malformed params with -32602', async () => {
    const svc = await startService({ path: policyFile(POLICY) });
    const c = await client(svc.url);
    const error = await c
      .request(
        { method: 'interceptor/invoke', params: { name: 'policy-validator', event: 'tools/call' } },
        AnyResult,
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32602);
  });

  it('allows everything without a policy file', async () => {
    const svc = await startService();
    const c = await client(svc.url);
    expect(
      await invoke(c, { name: 'anything_delete', arguments: {} }, { type: 'anonymous' }),
    ).toMatchObject({ valid: true });
  });
});

describe('hot reload', () => {
  it('applies a good edit and keeps the last good policy on a bad one', async () => {
    const path = policyFile(POLICY);
    const svc = await startService({ path, pollMs: 50 });
    const c = await client(svc.url);
    expect(await invoke(c, { name: 'read_file', arguments: {} }, bob)).toMatchObject({
      valid: true,
    });

    writeFileSync(
      path,
      `version: 1\ndefault: allow\nrules:\n  - id: no-reads\n    effect: deny\n    tools: ["read_*"]\n`,
    );
    await expect
      .poll(async () => (await invoke(c, { name: 'read_file', arguments: {} }, bob)).valid, {
        timeout: 5000,
      })
      .toBe(false);

    writeFileSync(
      path,
      `version: 1\ndefault: allow\nrules:\n  - id: broken\n    effect: deny\n    when: 'this is not CEL ((('\n`,
    );
    // The watcher may first see the file empty (truncated, not yet written): rejected too,
    // for another reason. Wait for the rejection of the broken rule itself.
    await expect
      .poll(() => svc.source.status().lastError ?? '', { timeout: 5000 })
      .toContain('broken');
    expect(svc.events.some((e) => e.startsWith('rejected'))).toBe(true);
    expect(await invoke(c, { name: 'read_file', arguments: {} }, bob)).toMatchObject({
      valid: false,
      info: { rule: 'no-reads' },
    });
  });

  it('changes the advertised hooks when the policy events change', async () => {
    const path = policyFile(`version: 1\ndefault: allow\nrules: []\n`);
    const svc = await startService({ path, pollMs: 50 });
    const c = await client(svc.url);
    const events = async () => {
      const list = await c.request({ method: 'interceptors/list', params: {} }, AnyResult);
      return (
        (list.interceptors as Array<{ name: string; hooks: Array<{ events: string[] }> }>)[0]
          ?.hooks[0]?.events ?? []
      );
    };
    expect(await events()).not.toContain('completion/complete');
    // The policy's top-level `events` say which events the validator is invoked for.
    writeFileSync(
      path,
      `version: 1\ndefault: allow\nevents: ["tools/call", "completion/complete"]\nrules:\n  - id: comp\n    effect: deny\n    events: ["completion/complete"]\n`,
    );
    await expect.poll(events, { timeout: 5000 }).toContain('completion/complete');
  });
});

describe('rate limits in Redis', () => {
  const limited = `version: 1\ndefault: allow\nrules: []\nrateLimits:\n  - id: per-user-calls\n    events: ["tools/call"]\n    key: principal.id\n    limit: 3\n    window: 60s\n`;

  it('are shared by two instances and keyed per principal', async () => {
    const redis = new Redis({ host: '127.0.0.1', port: 6379 });
    const prefix = `test-rl-${randomUUID()}`;
    cleanups.push(async () => {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    const path = policyFile(limited);
    const one = await client((await startService({ path, redis, prefix })).url);
    const two = await client((await startService({ path, redis, prefix })).url);
    const results = [];
    for (const c of [one, two, one, two])
      results.push((await invoke(c, { name: 'x', arguments: {} }, bob)).valid);
    expect(results).toEqual([true, true, true, false]);
    const refused = await invoke(one, { name: 'x', arguments: {} }, bob);
    expect(JSON.stringify(refused.messages)).toContain('per-user-calls');
    expect((await invoke(two, { name: 'x', arguments: {} }, alice)).valid).toBe(true);
  });

  it('name Redis keys by a hash of the key, never the raw argument value', async () => {
    const redis = new Redis({ host: '127.0.0.1', port: 6379 });
    const prefix = `test-rl-${randomUUID()}`;
    cleanups.push(async () => {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    const byArgument = `version: 1\ndefault: allow\nrules: []\nrateLimits:\n  - id: per-account\n    key: arguments.a\n    limit: 2\n    window: 60s\n`;
    const c = await client(
      (await startService({ path: policyFile(byArgument), redis, prefix })).url,
    );
    const email = { a: ['x'.repeat(100_000), 'bob@example.com'] };
    const results = [];
    for (let i = 0; i < 3; i++)
      results.push((await invoke(c, { name: 'x', arguments: email }, bob)).valid);
    // Same key, same bucket: the third call is over the limit of 2.
    expect(results).toEqual([true, true, false]);
    expect((await invoke(c, { name: 'x', arguments: { a: 'alice@example.com' } }, bob)).valid).toBe(
      true,
    );
    const keys = await redis.keys(`${prefix}:*`);
    expect(keys).toHaveLength(2);
    for (const key of keys) {
      expect(key).toMatch(new RegExp(`^${prefix}:per-account:[0-9a-f]{64}$`));
      expect(key).not.toContain('@example.com');
    }
  });

  it('refuse a rate-limit key argument nested 5,000 deep with -32602, naming the limit', async () => {
    const redis = new Redis({ host: '127.0.0.1', port: 6379 });
    const prefix = `test-rl-${randomUUID()}`;
    cleanups.push(async () => {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    const byArgument = `version: 1\ndefault: allow\nrules: []\nrateLimits:\n  - id: per-account\n    key: arguments.a\n    limit: 2\n    window: 60s\n`;
    const { url } = await startService({ path: policyFile(byArgument), redis, prefix });
    const deep = `${'{"a":['.repeat(5_000)}"bob@example.com"${']}'.repeat(5_000)}`;
    const reply = await rawPost(
      url,
      `{"jsonrpc":"2.0","id":9,"method":"interceptor/invoke","params":{"name":"policy-validator","event":"tools/call","phase":"request","payload":{"name":"x","arguments":${deep}},"context":{"principal":{"type":"user","id":"bob"}}}}`,
    );
    expectErrorReply(reply, 200, -32602, 9);
    expect(reply.json.error?.data).toMatchObject({
      name: 'policy-validator',
      reason: 'limit_exceeded',
      limit: 'maxDepth',
    });
    expect(reply.text).not.toMatch(/call stack/i);
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
  });

  it('follow failOpen when Redis is unreachable', async () => {
    const dead = unreachableRedis();
    cleanups.push(() => dead.disconnect());
    const open = await client((await startService({ path: policyFile(limited), redis: dead })).url);
    expect((await invoke(open, { name: 'x', arguments: {} }, bob)).valid).toBe(true);
    const closed = await client(
      (
        await startService({
          path: policyFile(limited.replace('window: 60s', 'window: 60s\n    failOpen: false')),
          redis: dead,
        })
      ).url,
    );
    const denied = await invoke(closed, { name: 'x', arguments: {} }, bob);
    expect(denied.valid).toBe(false);
    expect(JSON.stringify(denied.messages)).toContain('per-user-calls');
  });
});
