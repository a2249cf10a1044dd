/**
 * The admin API and runtime registration: persisted in Redis, propagated to a second
 * replica sharing it, with the status codes of DESIGN.md §3.
 */
import { randomUUID } from 'node:crypto';
import { createServer, request } from 'node:http';
import { allow, defineMutator, defineValidator, listen, modified } from '@fleet/interceptor-kit';
import { startHttpBackend } from '@fleet/test-fixtures';
import { startRedisServer } from '@fleet/test-fixtures/redis-server';
import express from 'express';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminRouter } from '../src/admin.ts';
import { serviceIdOf, silentLogger } from '../src/app.ts';
import { Registry } from '../src/registry.ts';
import {
  connectClient,
  defer,
  listenLoopback,
  recordingLogger,
  serveInterceptors,
  startGateway,
  textOf,
  waitFor,
} from './harness.ts';

const ADMIN = 'admin-token-123';

function admin(base: string, path: string, init: RequestInit = {}, token = ADMIN) {
  return fetch(`${base}/admin${path}`, {
    ...init,
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${token}`,
      ...(init.headers as Record<string, string>),
    },
  });
}

const shout = defineMutator({
  name: 'shout',
  hooks: [{ events: ['tools/call'], phase: 'request' }],
  priorityHint: 5,
  handler: (payload) => {
    const p = payload as { arguments?: { text?: string } };
    return modified({
      ...p,
      arguments: { ...p.arguments, text: `${p.arguments?.text ?? ''}`.toUpperCase() },
    });
  },
});

const gate = defineValidator({
  name: 'gate',
  hooks: [{ events: ['tools/*'], phase: 'request' }],
  handler: () => allow(),
});

describe('admin API', () => {
  it('registers at runtime, changes the chain of this and of a second replica, and unregisters', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const service = await serveInterceptors([shout]);
    const config = `backends:\n  - {id: fx, url: "${backend.url}"}\n`;
    const one = await startGateway(config, { adminToken: ADMIN });
    const two = await startGateway(config, { adminToken: ADMIN, prefix: one.prefix });
    const c1 = await connectClient(one.mcpUrl);
    const c2 = await connectClient(two.mcpUrl);
    expect(textOf(await c1.callTool({ name: 'echo', arguments: { text: 'quiet' } }))).toBe(
      '[fx] quiet',
    );

    const created = await admin(one.base, '/services', {
      method: 'POST',
      body: JSON.stringify({ url: service.url }),
    });
    expect(created.status).toBe(201);
    const body = (await created.json()) as {
      id: string;
      url: string;
      interceptors: Array<{ name: string }>;
    };
    expect(body.id).toBe(serviceIdOf(service.url));
    expect(body.interceptors.map((i) => i.name)).toEqual(['shout']);

    const again = await admin(one.base, '/services', {
      method: 'POST',
      body: JSON.stringify({
        url: service.url,
        token: 'service-token-1',
        overrides: { shout: { failOpen: true } },
      }),
    });
    expect(again.status).toBe(200);
    // A registration of the same URL updates it; the answer shows what is in force (whether a
    // token is stored, never the token).
    const updated = await again.text();
    expect(JSON.parse(updated)).toMatchObject({
      id: body.id,
      overrides: { shout: { failOpen: true } },
      hasToken: true,
    });
    expect(updated).not.toContain('service-token-1');
    await admin(one.base, '/services', {
      method: 'POST',
      body: JSON.stringify({ url: service.url }),
    });

    expect(textOf(await c1.callTool({ name: 'echo', arguments: { text: 'quiet' } }))).toBe(
      '[fx] QUIET',
    );
    // The other replica learns about it over Redis pub/sub, without restart.
    const deadline = Date.now() + 5000;
    let seen = '';
    while (Date.now() < deadline) {
      seen = textOf(await c2.callTool({ name: 'echo', arguments: { text: 'quiet' } }));
      if (seen === '[fx] QUIET') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(seen).toBe('[fx] QUIET');

    const chain = await (await admin(two.base, '/chain?event=tools/call&phase=request')).json();
    expect(chain).toEqual({
      event: 'tools/call',
      phase: 'request',
      stages: [
        {
          kind: 'mutators',
          interceptors: [
            {
              name: 'shout',
              service: body.id,
              type: 'mutation',
              mode: 'active',
              priority: 5,
              failOpen: false,
              timeoutMs: null,
            },
          ],
        },
      ],
    });

    const removed = await admin(one.base, `/services/${body.id}`, { method: 'DELETE' });
    expect(removed.status).toBe(204);
    const until = Date.now() + 5000;
    while (Date.now() < until) {
      seen = textOf(await c2.callTool({ name: 'echo', arguments: { text: 'quiet' } }));
      if (seen === '[fx] quiet') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(seen).toBe('[fx] quiet');
  });

  it('brings a replica that missed registry events in line with Redis', async () => {
    const service = await serveInterceptors([gate]);
    const replica = await startGateway('', { adminToken: ADMIN });
    const redis = new Redis({ host: '127.0.0.1', port: 6379 });
    defer(async () => {
      redis.disconnect();
    });
    const hash = `${replica.prefix}:registry:services`;
    const ids = async () =>
      (
        (await (await admin(replica.base, '/services')).json()) as {
          services: Array<{ id: string }>;
        }
      ).services.map((s) => s.id);
    const until = async (want: string[]) => {
      for (let i = 0; i < 50 && JSON.stringify(await ids()) !== JSON.stringify(want); i++)
        await new Promise((r) => setTimeout(r, 100));
      return ids();
    };
    // Written by another replica whose pub/sub event never arrived here.
    const id = serviceIdOf(service.url);
    await redis.hset(
      hash,
      id,
      JSON.stringify({ url: service.url, overrides: {}, registeredAt: new Date().toISOString() }),
    );
    expect(await until([id])).toEqual([id]);
    await redis.hdel(hash, id);
    expect(await until([])).toEqual([]);
  });

  it('dates a registration stored without registeredAt once, at its first refresh, and keeps that date', async () => {
    const service = await serveInterceptors([gate]);
    const redis = new Redis({ host: '127.0.0.1', port: 6379 });
    defer(async () => {
      redis.disconnect();
    });
    // Written by a version that did not record when; loaded at start, no health check after.
    const prefix = `test-${randomUUID()}`;
    const hash = `${prefix}:registry:services`;
    const id = serviceIdOf(service.url);
    await redis.hset(hash, id, JSON.stringify({ url: service.url, overrides: {} }));
    const gw = await startGateway('', { adminToken: ADMIN, prefix, healthIntervalMs: 60_000 });
    const stored = async () =>
      (JSON.parse((await redis.hget(hash, id)) ?? '{}') as { registeredAt?: string }).registeredAt;
    const refresh = async () => {
      const answer = await admin(gw.base, `/services/${id}/refresh`, { method: 'POST' });
      expect(answer.status).toBe(200);
      return ((await answer.json()) as { registeredAt?: string }).registeredAt;
    };
    const first = await refresh();
    expect(first).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await stored()).toBe(first);
    await new Promise((r) => setTimeout(r, 5));
    expect(await refresh()).toBe(first);
    expect(await stored()).toBe(first);
  });

  it('lists config services, refuses to remove them, and refreshes', async () => {
    const service = await serveInterceptors([gate]);
    const gw = await startGateway(`interceptors:\n  - url: "${service.url}"\n`, {
      adminToken: ADMIN,
    });
    const listed = (await (await admin(gw.base, '/services')).json()) as {
      services: Array<{ id: string; source: string; status: string }>;
    };
    expect(listed.services).toEqual([
      expect.objectContaining({
        id: serviceIdOf(service.url),
        source: 'config',
        status: 'healthy',
      }),
    ]);
    const id = listed.services[0]?.id ?? '';
    expect((await admin(gw.base, `/services/${id}`, { method: 'DELETE' })).status).toBe(409);
    expect((await admin(gw.base, '/services/nope', { method: 'DELETE' })).status).toBe(404);
    const refreshed = await admin(gw.base, `/services/${id}/refresh`, { method: 'POST' });
    expect(refreshed.status).toBe(200);
    expect(((await refreshed.json()) as { interceptors: unknown[] }).interceptors).toHaveLength(1);
  });

  it.each([
    ['a malformed body', 400, () => ({ url: 42 })],
    ['a non-http URL', 400, () => ({ url: 'ftp://example.com/mcp' })],
    [
      'overrides that widen hooks',
      400,
      (url: string) => ({
        url,
        overrides: { gate: { hooks: [{ events: ['*'], phase: 'response' }] } },
      }),
    ],
    ['an unreachable URL', 502, () => ({ url: 'http://127.0.0.1:9/mcp' })],
    [
      'a URL with credentials in it',
      400,
      (url: string) => ({ url: url.replace('http://', 'http://user:secret@') }),
    ],
    [
      'overrides for an interceptor the service does not have',
      400,
      (url: string) => ({ url, overrides: { nope: { failOpen: true } } }),
    ],
  ] as const)('answers %s with %i', async (_what, status, body) => {
    const service = await serveInterceptors([gate]);
    const gw = await startGateway('', { adminToken: ADMIN });
    const res = await admin(gw.base, '/services', {
      method: 'POST',
      body: JSON.stringify(body(service.url)),
    });
    expect(res.status).toBe(status);
    expect(((await res.json()) as { error: string }).error).toEqual(expect.any(String));
    expect(
      ((await (await admin(gw.base, '/services')).json()) as { services: unknown[] }).services,
    ).toEqual([]);
  });

  it('refuses a misspelt body key instead of registering without what it names', async () => {
    const service = await serveInterceptors([gate]);
    const gw = await startGateway('', { adminToken: ADMIN });
    // With "overides" ignored, the service would run with its own failOpen, not the operator's.
    const res = await admin(gw.base, '/services', {
      method: 'POST',
      body: JSON.stringify({ url: service.url, overides: { gate: { failOpen: true } } }),
    });
    expect(res.status).toBe(400);
    const { details } = (await res.json()) as { details: Array<{ path: string; message: string }> };
    expect(details).toEqual([
      { path: 'overides', message: expect.stringContaining('did you mean "overrides"?') },
    ]);
    expect(
      ((await (await admin(gw.base, '/services')).json()) as { services: unknown[] }).services,
    ).toEqual([]);
  });

  it.each([
    ['null', 'null', 'expected object, received null'],
    ['a string', '"http://127.0.0.1/mcp"', 'expected object, received string'],
  ])(
    'says that a body of JSON %s is not an object (not that it is not JSON)',
    async (_what, body, message) => {
      const gw = await startGateway('', { adminToken: ADMIN });
      const res = await admin(gw.base, '/services', { method: 'POST', body });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        error: expect.any(String),
        details: [{ path: '', message: expect.stringContaining(message) }],
      });
    },
  );

  it('answers 422 for an MCP server that is not an interceptor server', async () => {
    const backend = await startHttpBackend({ name: 'plain' });
    defer(() => backend.close());
    const gw = await startGateway('', { adminToken: ADMIN });
    const res = await admin(gw.base, '/services', {
      method: 'POST',
      body: JSON.stringify({ url: backend.url }),
    });
    expect(res.status).toBe(422);
  });

  it('answers 422 for a gateway (itself), which lists interceptors but does not run them', async () => {
    const service = await serveInterceptors([gate]);
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gw = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${service.url}"\n`,
      { adminToken: ADMIN },
    );
    const res = await admin(gw.base, '/services', {
      method: 'POST',
      body: JSON.stringify({ url: gw.mcpUrl }),
    });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { error: string }).error).toMatch(
      /does not serve interceptor\/invoke/,
    );
    const listed = (await (await admin(gw.base, '/services')).json()) as {
      services: Array<{ source: string }>;
    };
    expect(listed.services.map((s) => s.source)).toEqual(['config']);
    // The chain is untouched: calls still go through.
    const client = await connectClient(gw.mcpUrl);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } }))).toBe(
      '[fx] hi',
    );
  });

  it('answers a path whose percent-encoding does not decode in JSON, without a stack', async () => {
    const gw = await startGateway('', { adminToken: ADMIN });
    for (const [method, path] of [
      ['DELETE', '/services/%E0%A4%A'],
      ['POST', '/services/%ZZ/refresh'],
    ] as const) {
      const res = await admin(gw.base, path, { method });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toContain('application/json');
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ error: 'malformed percent-encoding in the URL' });
      expect(text).not.toMatch(/node_modules|at /);
    }
  });

  it('refuses a foreign Host or Origin (DNS rebinding) before looking at the token', async () => {
    const gw = await startGateway('security: {allowedHosts: ["fleet.internal"]}\n', {
      adminToken: ADMIN,
    });
    const port = new URL(gw.base).port;
    const get = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          `${gw.base}/admin/services`,
          { headers: { authorization: `Bearer ${ADMIN}`, ...headers } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end();
      });
    expect(await get({ host: `evil.example.com:${port}` })).toBe(403);
    expect(await get({ origin: 'https://evil.example.com' })).toBe(403);
    expect(await get({ host: 'fleet.internal' })).toBe(200);
    expect(await get({})).toBe(200);
  });

  it('requires the admin token', async () => {
    const gw = await startGateway('', { adminToken: ADMIN });
    expect((await admin(gw.base, '/services', {}, 'wrong')).status).toBe(401);
    expect((await fetch(`${gw.base}/admin/services`)).status).toBe(401);
    expect((await admin(gw.base, '/chain?phase=sideways')).status).toBe(400);
    for (const query of ['event=a&event=b', 'event=%00', `event=${'x'.repeat(300)}`])
      expect((await admin(gw.base, `/chain?${query}`)).status).toBe(400);
  });

  it('refuses a body over 256 KiB with 413 and registers nothing', async () => {
    const service = await serveInterceptors([gate]);
    const gw = await startGateway('', { adminToken: ADMIN });
    const res = await admin(gw.base, '/services', {
      method: 'POST',
      body: JSON.stringify({ url: service.url, pad: 'x'.repeat(300 * 1024) }),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({ error: 'the body is too large' });
    const listed = (await (await admin(gw.base, '/services')).json()) as { services: unknown[] };
    expect(listed.services).toEqual([]);
  });

  it('answers a method a path does not serve with 405 and Allow, once the credentials pass', async () => {
    const gw = await startGateway('', { adminToken: ADMIN });
    for (const [method, path, allowed] of [
      ['PUT', '/services', 'GET, HEAD, POST'],
      ['DELETE', '/services/', 'GET, HEAD, POST'],
      ['PATCH', '/services/some-id', 'DELETE'],
      ['GET', '/services/some-id/refresh', 'POST'],
      ['DELETE', '/chain', 'GET, HEAD'],
      ['OPTIONS', '/chain', 'GET, HEAD'],
      // Express matches paths in any case: so does the 405.
      ['PUT', '/SERVICES', 'GET, HEAD, POST'],
    ] as const) {
      const res = await admin(gw.base, path, { method });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get('allow')).toBe(allowed);
      expect(await res.json()).toEqual({
        error: `${method} is not allowed on /admin${path} (allowed: ${allowed})`,
      });
    }
    // Before the body is read: what is wrong is the method, not the JSON.
    const put = await admin(gw.base, '/services', { method: 'PUT', body: '{not json' });
    expect(put.status).toBe(405);
    // Without the token, no path says whether it exists or what it serves.
    const anonymous = await fetch(`${gw.base}/admin/services`, { method: 'PUT' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(anonymous.headers.get('allow')).toBeNull();
    expect((await fetch(`${gw.base}/admin/nope`, { method: 'PUT' })).status).toBe(401);
    // Unknown paths stay 404, whatever the method; HEAD is served where GET is.
    for (const [method, path] of [
      ['GET', '/nope'],
      ['PUT', '/nope'],
      ['POST', '/services/a/b'],
      ['GET', '/chain/x'],
    ] as const) {
      const res = await admin(gw.base, path, { method });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await res.json()).toEqual({ error: 'no such admin endpoint' });
    }
    for (const path of ['/services', '/chain'])
      expect((await admin(gw.base, path, { method: 'HEAD' })).status).toBe(200);
  });

  it('answers an unexpected failure with 500 and an id, its text only in the log', async () => {
    // Every registry operation turns its own failures (Redis, discovery) into a RegistryError
    // with a status; a bug is the rest: one that names internals, as a driver's error does.
    class BrokenRegistry extends Registry {
      override async unregister(): Promise<void> {
        throw new Error('connect ECONNREFUSED 10.0.0.7:6379 at Socket.<anonymous>');
      }
    }
    const registry = new BrokenRegistry({ staticServices: [], log: silentLogger });
    const lines: Array<{ level: string; fields: Record<string, unknown>; message: string }> = [];
    const at = (level: string) => (fields: object, message: string) => {
      lines.push({ level, fields: fields as Record<string, unknown>, message });
    };
    const app = express();
    app.use(
      '/admin',
      createAdminRouter({
        registry,
        log: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
      }),
    );
    const listening = await listen(app, { service: 'admin', announce: false });
    defer(() => listening.close(100));

    const res = await fetch(`${listening.url}/admin/services/some-id`, {
      method: 'DELETE',
      headers: { authorization: 'Bearer not-logged' },
    });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({
      error: 'internal error',
      details: { errorId: expect.stringMatching(/^[0-9a-f-]{36}$/) },
    });
    expect(text).not.toMatch(/ECONNREFUSED|10\.0\.0\.7|Socket/);
    const { errorId } = (JSON.parse(text) as { details: { errorId: string } }).details;
    expect(lines).toEqual([
      {
        level: 'error',
        message: 'admin request failed',
        fields: {
          err: 'Error: connect ECONNREFUSED 10.0.0.7:6379 at Socket.<anonymous>',
          errorId,
          method: 'DELETE',
          path: '/admin/services/some-id',
        },
      },
    ]);
    expect(JSON.stringify(lines)).not.toContain('not-logged');
  });

  it('answers 503 when Redis does not take a registration, refresh or removal, the cause only in the log', async () => {
    const server = await startRedisServer();
    const service = await serveInterceptors([gate]);
    const warnings: Array<{ fields: object; message: string }> = [];
    const log = {
      ...silentLogger,
      warn: (fields: object, message: string) => warnings.push({ fields, message }),
    };
    const gw = await startGateway('', { adminToken: ADMIN, redisUrl: server.url, log });
    const registered = await admin(gw.base, '/services', {
      method: 'POST',
      body: JSON.stringify({ url: service.url, token: 'svc-secret-1' }),
    });
    expect(registered.status).toBe(201);
    const { id } = (await registered.json()) as { id: string };

    await server.kill();
    const other = await serveInterceptors([shout]);
    const refused = await admin(gw.base, '/services', {
      method: 'POST',
      body: JSON.stringify({ url: other.url, token: 'svc-secret-2' }),
    });
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({
      error: 'the registry could not save the registration: Redis is unavailable',
      details: {},
    });
    const refreshed = await admin(gw.base, `/services/${id}/refresh`, { method: 'POST' });
    expect(refreshed.status).toBe(503);
    expect(await refreshed.json()).toEqual({
      error: 'refreshed, but the registry could not save the registration: Redis is unavailable',
      details: { id },
    });
    const removed = await admin(gw.base, `/services/${id}`, { method: 'DELETE' });
    expect(removed.status).toBe(503);
    expect(await removed.json()).toEqual({
      error: 'the registry could not remove the registration: Redis is unavailable',
      details: { id },
    });
    // What ioredis said is logged, with the service, never its token.
    const cause = expect.stringMatching(/^\w*Error: /);
    expect(warnings.filter(({ message }) => message.includes('the registry could'))).toEqual([
      {
        message: 'the registry could not save the registration',
        fields: { service: serviceIdOf(other.url), err: cause },
      },
      {
        message: 'refreshed, but the registry could not save the registration',
        fields: { service: id, err: cause },
      },
      {
        message: 'the registry could not remove the registration',
        fields: { service: id, err: cause },
      },
    ]);
    expect(JSON.stringify(warnings)).not.toContain('svc-secret');
    // Nothing changed: the first service is still registered, the refused one is not.
    const listed = (await (await admin(gw.base, '/services')).json()) as {
      services: Array<{ id: string }>;
    };
    expect(listed.services.map((s) => s.id)).toEqual([id]);
  }, 30_000);

  it('answers a change Redis stored but could not announce as made, and the other replica loads it at its next health check', async () => {
    const server = await startRedisServer();
    const setup = new Redis(server.url);
    defer(async () => {
      setup.disconnect();
    });
    // A user allowed everything but PUBLISH: each change is stored and its announcement
    // fails, as when Redis is lost between the two.
    await setup.call('ACL', 'SETUSER', 'mute', 'on', 'nopass', '~*', '&*', '+@all', '-publish');
    const muted = new URL(server.url);
    muted.username = 'mute';
    const token = 'svc-secret-5';
    const service = await serveInterceptors([gate], { token });
    const log = recordingLogger();
    const one = await startGateway('', { adminToken: ADMIN, redisUrl: muted.href, log });
    // Its health check every 200 ms: the only way the changes can reach it.
    const two = await startGateway('', {
      adminToken: ADMIN,
      redisUrl: server.url,
      prefix: one.prefix,
    });

    const id = await registerOn(one, { url: service.url, token });
    await waitFor(async () => (await servicesOn(two)).length === 1, 3000, 'the registration');
    expect((await admin(one.base, `/services/${id}`, { method: 'DELETE' })).status).toBe(204);
    expect(await servicesOn(one)).toEqual([]);
    await waitFor(async () => (await servicesOn(two)).length === 0, 3000, 'the removal');
    const failed = log.warnings.filter((w) => /could not announce/.test(String(w.msg)));
    expect(failed.map((w) => w.obj)).toEqual([
      { service: id, op: 'upsert', err: expect.stringContaining('NOPERM') },
      { service: id, op: 'delete', err: expect.stringContaining('NOPERM') },
    ]);
    expect(JSON.stringify(log.warnings)).not.toContain(token);
  });
});

/** A validator of `tools/call` requests named `name` that allows everything. */
const allowing = (name: string) =>
  defineValidator({
    name,
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: () => allow(),
  });

/** An admin registration as the registry stores it in Redis. */
interface StoredRegistration {
  url: string;
  token?: string;
  overrides: Record<string, unknown>;
  registeredAt: string;
  interceptors: Array<{ name: string }>;
}

/** The names of `gateway`'s chain for `tools/call` requests, sorted. */
async function chainOf(gateway: { base: string }): Promise<string[]> {
  const res = await admin(gateway.base, '/chain?event=tools/call&phase=request');
  const body = (await res.json()) as { stages: Array<{ interceptors: Array<{ name: string }> }> };
  return body.stages.flatMap((stage) => stage.interceptors.map((i) => i.name)).sort();
}

/** The services `gateway`'s admin API lists. */
async function servicesOn(gateway: { base: string }) {
  const res = await admin(gateway.base, '/services');
  return (
    (await res.json()) as {
      services: Array<{
        id: string;
        status: string;
        overrides: Record<string, { failOpen?: boolean }>;
      }>;
    }
  ).services;
}

/** Register `body` on `gateway` through the admin API (201 expected); returns the service id. */
async function registerOn(gateway: { base: string }, body: Record<string, unknown>) {
  const res = await admin(gateway.base, '/services', {
    method: 'POST',
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

/**
 * A forwarding proxy in front of an interceptor service: while `hold()` is on, the
 * `interceptors/list` requests it receives wait for `release()`, so a test can act while a
 * rediscovery is in flight; `target` is the service it forwards to (set it to redeploy).
 */
async function startListGate(target: string) {
  const held: Array<() => void> = [];
  const gate = { target, holding: false };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    if (gate.holding && body.includes('"interceptors/list"'))
      await new Promise<void>((resolve) => held.push(resolve));
    const forwarded: Record<string, string> = {};
    for (const name of ['content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version']) {
      const value = req.headers[name];
      if (typeof value === 'string') forwarded[name] = value;
    }
    try {
      const answer = await fetch(gate.target, {
        method: req.method ?? 'POST',
        headers: forwarded,
        ...(req.method === 'POST' ? { body } : {}),
      });
      const headers: Record<string, string> = {};
      for (const name of ['content-type', 'mcp-session-id']) {
        const value = answer.headers.get(name);
        if (value !== null) headers[name] = value;
      }
      res.writeHead(answer.status, headers);
      res.end(Buffer.from(await answer.arrayBuffer()));
    } catch {
      // The service is gone (a test ending, or failing, mid-request): the caller sees the
      // connection drop, as it would without the proxy, and no rejection goes unhandled.
      res.destroy();
    }
  });
  const url = `${await listenLoopback(server)}/mcp`;
  const release = () => {
    gate.holding = false;
    for (const resolve of held.splice(0)) resolve();
  };
  defer(async () => release());
  return {
    url,
    gate,
    hold: () => {
      gate.holding = true;
    },
    held: () => held.length,
    release,
  };
}

describe('a service found redeployed with other interceptors', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis({ host: '127.0.0.1', port: 6379 });
  });
  afterAll(() => redis.disconnect());
  const stored = async (prefix: string, id: string) => {
    const json = await redis.hget(`${prefix}:registry:services`, id);
    return json === null ? null : (JSON.parse(json) as StoredRegistration);
  };

  it.each(['its health check', 'an invocation answered unknown_interceptor'] as const)(
    'is stored by the replica that finds it by %s, and the other replica follows before its own health check',
    async (trigger) => {
      const backend = await startHttpBackend({ name: 'fx' });
      defer(() => backend.close());
      const token = 'svc-token-1';
      const first = await serveInterceptors([allowing('kept'), allowing('dropped')], { token });
      const config = `backends:\n  - {id: fx, url: "${backend.url}"}\n`;
      const byHealthCheck = trigger === 'its health check';
      const one = await startGateway(config, {
        adminToken: ADMIN,
        healthIntervalMs: byHealthCheck ? 200 : 60_000,
      });
      // Its own health check is a minute away: only the first replica's news can reach it in time.
      const two = await startGateway(config, {
        adminToken: ADMIN,
        prefix: one.prefix,
        healthIntervalMs: 60_000,
      });
      const id = await registerOn(one, {
        url: first.url,
        token,
        overrides: { kept: { failOpen: true } },
      });
      const registered = await stored(one.prefix, id);
      await waitFor(async () => (await chainOf(two)).length === 2, 3000, 'the second replica');
      expect(await chainOf(two)).toEqual(['dropped', 'kept']);

      await first.stop();
      await serveInterceptors([allowing('kept'), allowing('added')], { token, port: first.port });
      if (!byHealthCheck) {
        const client = await connectClient(one.mcpUrl);
        await expect(
          client.callTool({ name: 'echo', arguments: { text: 'hi' } }),
        ).rejects.toMatchObject({
          data: { failedInterceptor: 'dropped', reason: 'unknown_interceptor' },
        });
      }

      await waitFor(
        async () => JSON.stringify(await chainOf(two)) === '["added","kept"]',
        3000,
        'the second replica planning the redeployed service',
      );
      // The new descriptors in Redis, the registration (URL, token, overrides, when) as it was.
      expect(await stored(one.prefix, id)).toEqual({
        ...registered,
        interceptors: [
          expect.objectContaining({ name: 'kept' }),
          expect.objectContaining({ name: 'added' }),
        ],
      });
    },
  );

  it('writes and announces nothing while the service is unchanged, and a change once, however many replicas find it', async () => {
    const first = await serveInterceptors([allowing('kept'), allowing('dropped')]);
    // Both replicas check every 200 ms.
    const one = await startGateway('', { adminToken: ADMIN });
    await startGateway('', { adminToken: ADMIN, prefix: one.prefix });
    const listener = new Redis({ host: '127.0.0.1', port: 6379 });
    defer(async () => {
      listener.disconnect();
    });
    const events: string[] = [];
    listener.on('message', (_channel: string, message: string) => {
      events.push((JSON.parse(message) as { op: string }).op);
    });
    await listener.subscribe(`${one.prefix}:registry:events`);
    const hash = `${one.prefix}:registry:services`;

    const id = await registerOn(one, { url: first.url });
    await waitFor(() => events.length === 1, 3000, 'the registration announced');
    const registered = await redis.hget(hash, id);
    // Five health checks on each replica.
    await new Promise((r) => setTimeout(r, 1000));
    expect(events).toEqual(['upsert']);
    expect(await redis.hget(hash, id)).toBe(registered);

    await first.stop();
    await serveInterceptors([allowing('kept'), allowing('added')], { port: first.port });
    await waitFor(
      async () => (await stored(one.prefix, id))?.interceptors.length === 2 && events.length === 2,
      3000,
      'the change stored and announced',
    );
    expect((await stored(one.prefix, id))?.interceptors.map((i) => i.name)).toEqual([
      'kept',
      'added',
    ]);
    const changed = await redis.hget(hash, id);
    // The replica that did not store it applies it without storing or announcing it again.
    await new Promise((r) => setTimeout(r, 1000));
    expect(events).toEqual(['upsert', 'upsert']);
    expect(await redis.hget(hash, id)).toBe(changed);
  });

  it.each([
    ['removed', (hash: string, id: string) => redis.hdel(hash, id)],
    [
      'registered again',
      (hash: string, id: string, url: string) =>
        redis.hset(
          hash,
          id,
          JSON.stringify({
            url,
            overrides: { kept: { failOpen: true } },
            registeredAt: '2030-01-01T00:00:00.000Z',
          }),
        ),
    ],
  ] as const)(
    'is not written over a registration %s on another replica while it was being found',
    async (what, change) => {
      const before = await serveInterceptors([allowing('kept')]);
      const after = await serveInterceptors([allowing('kept'), allowing('added')]);
      const service = await startListGate(before.url);
      const gateway = await startGateway('', { adminToken: ADMIN });
      const id = await registerOn(gateway, { url: service.url });
      const hash = `${gateway.prefix}:registry:services`;
      const url = (await stored(gateway.prefix, id))?.url ?? '';

      // A health check is listing the redeployed service when another replica changes the
      // registration; its event has not arrived yet.
      service.hold();
      service.gate.target = after.url;
      await waitFor(() => service.held() > 0, 3000, 'a rediscovery in flight');
      await change(hash, id, url);
      service.release();

      // The next health check reloads the registration from Redis: there is none to reload, or
      // the other replica's.
      const services = async () =>
        (
          (await (await admin(gateway.base, '/services')).json()) as {
            services: Array<{ registeredAt: string }>;
          }
        ).services;
      if (what === 'removed') {
        await waitFor(async () => (await services()).length === 0, 3000, 'the removal applied');
        expect(await redis.hexists(hash, id)).toBe(0);
      } else {
        await waitFor(
          async () => (await services())[0]?.registeredAt === '2030-01-01T00:00:00.000Z',
          3000,
          'the other registration applied',
        );
        expect(await stored(gateway.prefix, id)).toMatchObject({
          overrides: { kept: { failOpen: true } },
          registeredAt: '2030-01-01T00:00:00.000Z',
        });
      }
    },
  );

  it.each([
    ['removed', 404, 'announced'],
    ['removed', 404, 'unannounced'],
    ['registered again', 409, 'announced'],
    ['registered again', 409, 'unannounced'],
  ] as const)(
    'is not stored by a refresh over a registration %s on another replica while the refresh was listing it (%i), and this replica follows it at once when it was %s',
    async (what, status, announcement) => {
      // Unannounced: the other replica may not PUBLISH (as when Redis is lost between its write
      // and its announcement), so no event reaches this one before the refresh answers.
      let redisUrl: string | undefined;
      let mutedUrl: string | undefined;
      if (announcement === 'unannounced') {
        const server = await startRedisServer();
        const setup = new Redis(server.url);
        await setup.call('ACL', 'SETUSER', 'mute', 'on', 'nopass', '~*', '&*', '+@all', '-publish');
        setup.disconnect();
        redisUrl = server.url;
        const muted = new URL(server.url);
        muted.username = 'mute';
        mutedUrl = muted.href;
      }
      const check = new Redis(redisUrl ?? 'redis://127.0.0.1:6379');
      defer(async () => {
        check.disconnect();
      });
      const first = await serveInterceptors([allowing('kept')]);
      const service = await startListGate(first.url);
      // Health checks a minute away: only the refresh, the registrations and their events list
      // the service, and only the refresh or an event changes what the first replica holds.
      const one = await startGateway('', { adminToken: ADMIN, healthIntervalMs: 60_000, redisUrl });
      const two = await startGateway('', {
        adminToken: ADMIN,
        prefix: one.prefix,
        healthIntervalMs: 60_000,
        redisUrl: mutedUrl,
      });
      const hash = `${one.prefix}:registry:services`;
      const id = await registerOn(one, { url: service.url });
      const stored = async () =>
        JSON.parse((await check.hget(hash, id)) ?? 'null') as StoredRegistration | null;
      await waitFor(async () => (await servicesOn(two)).length === 1, 3000, 'the second replica');
      const registered = await stored();

      service.hold();
      const refreshing = admin(one.base, `/services/${id}/refresh`, { method: 'POST' });
      await waitFor(() => service.held() > 0, 3000, 'the refresh listing the service');
      if (what === 'removed') {
        expect((await admin(two.base, `/services/${id}`, { method: 'DELETE' })).status).toBe(204);
      } else {
        // The re-registration's own discovery, and the first replica's on its event, go through.
        service.gate.holding = false;
        const again = await admin(two.base, '/services', {
          method: 'POST',
          body: JSON.stringify({
            url: service.url,
            overrides: { kept: { failOpen: true } },
          }),
        });
        expect(again.status).toBe(200);
      }
      const changed = await check.hget(hash, id);
      service.release();

      const refreshed = await refreshing;
      expect(refreshed.status).toBe(status);
      expect(await refreshed.json()).toEqual({
        error:
          what === 'removed'
            ? `no service with id "${id}"`
            : `service "${id}" was registered again while it was being refreshed; refresh it again`,
        details: { id },
      });
      // Redis holds what the other replica left, and the first replica shows and runs it as
      // soon as the refresh answers, announced or not.
      expect(await check.hget(hash, id)).toBe(changed);
      const chain = async (gateway: { base: string }) => {
        const res = await admin(gateway.base, '/chain?event=tools/call&phase=request');
        const body = (await res.json()) as {
          stages: Array<{ interceptors: Array<{ name: string; failOpen: boolean }> }>;
        };
        return body.stages.flatMap((stage) => stage.interceptors);
      };
      if (what === 'removed') {
        for (const gateway of [one, two]) {
          expect(await servicesOn(gateway)).toEqual([]);
          expect(await chain(gateway)).toEqual([]);
        }
      } else {
        expect(await stored()).toEqual({ ...registered, overrides: { kept: { failOpen: true } } });
        for (const gateway of [one, two]) {
          expect(await servicesOn(gateway)).toEqual([
            expect.objectContaining({ id, overrides: { kept: { failOpen: true } } }),
          ]);
          expect(await chain(gateway)).toEqual([
            expect.objectContaining({ name: 'kept', failOpen: true }),
          ]);
        }
      }
    },
  );

  it('is stored by a refresh over other descriptors of the registration stored meanwhile by another replica', async () => {
    const before = await serveInterceptors([allowing('kept')]);
    const after = await serveInterceptors([allowing('kept'), allowing('added')]);
    const service = await startListGate(before.url);
    const gateway = await startGateway('', { adminToken: ADMIN, healthIntervalMs: 60_000 });
    const id = await registerOn(gateway, { url: service.url });
    const registered = await stored(gateway.prefix, id);

    service.hold();
    service.gate.target = after.url;
    const refreshing = admin(gateway.base, `/services/${id}/refresh`, { method: 'POST' });
    await waitFor(() => service.held() > 0, 3000, 'the refresh listing the service');
    // Another replica's health check found an older deployment (its upsert not here yet).
    await redis.hset(
      `${gateway.prefix}:registry:services`,
      id,
      JSON.stringify({
        ...registered,
        interceptors: registered?.interceptors.map((i) => ({ ...i, name: 'older' })),
      }),
    );
    service.release();

    expect((await refreshing).status).toBe(200);
    expect(await stored(gateway.prefix, id)).toEqual({
      ...registered,
      interceptors: [
        expect.objectContaining({ name: 'kept' }),
        expect.objectContaining({ name: 'added' }),
      ],
    });
  });

  it('is planned from by a replica that cannot reach the service when another replica stored it unannounced', async () => {
    const first = await serveInterceptors([allowing('kept'), allowing('dropped')]);
    const gateway = await startGateway('', { adminToken: ADMIN });
    const id = await registerOn(gateway, { url: first.url });
    const registered = await stored(gateway.prefix, id);
    await first.stop();
    await waitFor(
      async () => (await servicesOn(gateway))[0]?.status === 'unhealthy',
      3000,
      'the service unreachable from this replica',
    );

    // Another replica reaches the redeployed service and stored what it lists; its upsert was
    // lost.
    await redis.hset(
      `${gateway.prefix}:registry:services`,
      id,
      JSON.stringify({
        ...registered,
        interceptors: registered?.interceptors.map((i) =>
          i.name === 'dropped' ? { ...i, name: 'added' } : i,
        ),
      }),
    );
    await waitFor(
      async () => JSON.stringify(await chainOf(gateway)) === '["added","kept"]',
      3000,
      'the chain planned from the stored descriptors',
    );
    expect((await servicesOn(gateway))[0]?.status).toBe('unhealthy');
  });

  it('is stored once Redis is back when Redis was down, the chain following at once and a warning without the token logged', async () => {
    const server = await startRedisServer({ durable: true });
    const token = 'svc-secret-3';
    const first = await serveInterceptors([allowing('kept'), allowing('dropped')], { token });
    const log = recordingLogger();
    const gateway = await startGateway('', { adminToken: ADMIN, redisUrl: server.url, log });
    const id = await registerOn(gateway, { url: first.url, token });

    await server.kill();
    await first.stop();
    await serveInterceptors([allowing('kept'), allowing('added')], { token, port: first.port });
    await waitFor(
      async () => JSON.stringify(await chainOf(gateway)) === '["added","kept"]',
      10_000,
      'the chain following the service',
    );
    const warned = () =>
      log.warnings.filter((w) => /could not share the changed interceptors/.test(String(w.msg)));
    await waitFor(() => warned().length > 0, 20_000, 'the warning');
    expect(warned()[0]?.obj).toEqual({ service: id, err: expect.stringMatching(/^\w*Error: /) });
    expect(JSON.stringify(log.warnings)).not.toContain(token);

    await server.start();
    const check = new Redis(server.url);
    defer(async () => {
      check.disconnect();
    });
    const names = async () => {
      const json = await check.hget(`${gateway.prefix}:registry:services`, id);
      return (JSON.parse(json ?? '{}') as Partial<StoredRegistration>).interceptors?.map(
        (i) => i.name,
      );
    };
    await waitFor(
      async () => JSON.stringify(await names()) === '["kept","added"]',
      15_000,
      'the descriptors stored',
    );
  }, 60_000);
});
