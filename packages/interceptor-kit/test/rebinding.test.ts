/**
 * DNS-rebinding protection of a kit service (MCP Streamable HTTP: a server must refuse a
 * foreign Origin with 403): a browser page on another site must not reach a loopback
 * interceptor service, with or without a token, on `/mcp` or the service's own routes.
 */
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  allow,
  createInterceptorHost,
  createInterceptorHttpApp,
  defineValidator,
  listen,
} from '../src/index.ts';
import { expectErrorReply, rawPost } from '../src/testing.ts';
import { defer } from './helpers.ts';

const INVOKE = {
  jsonrpc: '2.0',
  id: 3,
  method: 'interceptor/invoke',
  params: { name: 'v', event: 'tools/call', phase: 'request', payload: { name: 'echo' } },
};

/** A kit service with one validator and a `/status` route of its own, on `host`. */
async function serve(
  host = '127.0.0.1',
  allowList?: { allowedHosts?: string[]; allowedOrigins?: string[] },
) {
  const interceptors = createInterceptorHost([
    defineValidator({
      name: 'v',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: () => allow(),
    }),
  ]);
  const { listener } = createInterceptorHttpApp(interceptors, {
    name: 'rebinding',
    ...allowList,
    extend: (app) => app.get('/status', (_req, res) => res.json({ ok: true })),
  });
  const listening = await listen(listener, { service: 'rebinding', host, announce: false });
  defer(() => listening.close(0));
  return listening;
}

describe('a kit service on loopback', () => {
  it('refuses a foreign Host with 403 on /mcp and on its own routes', async () => {
    const { url, port } = await serve();
    for (const host of [`evil.example:${port}`, 'evil.example', `192.0.2.1:${port}`]) {
      const mcp = await rawPost(`${url}/mcp`, INVOKE, { host });
      // Refused before the body is read, like a missing token: no id to echo.
      expectErrorReply(mcp, 403, -32600);
      expect(mcp.json.error?.message).toContain('Host');
      const status = await rawPost(`${url}/status`, '', { host }, { method: 'GET' });
      expect(status.status).toBe(403);
      expect(status.json).toMatchObject({ error: { code: 'FORBIDDEN' } });
      // GET /mcp would otherwise open an event stream.
      expect((await rawPost(`${url}/mcp`, '', { host }, { method: 'GET' })).status).toBe(403);
    }
  });

  it('refuses a foreign Origin with 403, and takes loopback ones', async () => {
    const { url } = await serve();
    for (const origin of ['http://evil.example', 'https://127.0.0.1.evil.example', 'null']) {
      const reply = await rawPost(`${url}/mcp`, INVOKE, { origin });
      expectErrorReply(reply, 403, -32600);
      expect(reply.json.error?.message).toContain('Origin');
    }
    for (const origin of ['http://localhost:6274', 'http://127.0.0.1', 'http://[::1]:3000']) {
      const reply = await rawPost(`${url}/mcp`, INVOKE, { origin });
      expect(reply.json).toMatchObject({ id: 3, result: { valid: true } });
    }
  });

  it('serves loopback Host names, and clients that send no Origin', async () => {
    const { url, port } = await serve();
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'localhost', `[::1]:${port}`]) {
      const reply = await rawPost(`${url}/mcp`, INVOKE, { host });
      expect(reply.json).toMatchObject({ id: 3, result: { valid: true } });
    }
  });
});

describe('allowed hosts and origins', () => {
  it('serves the Host names and Origins it is given, and still refuses others', async () => {
    const { url, port } = await serve('127.0.0.1', {
      allowedHosts: ['Pii-Redactor.fleet.svc'],
      allowedOrigins: ['https://console.example.com/'],
    });
    for (const headers of [
      { host: `pii-redactor.fleet.svc:${port}` } as Record<string, string>,
      { host: 'PII-REDACTOR.FLEET.SVC' },
      { origin: 'https://console.example.com' },
    ]) {
      const reply = await rawPost(`${url}/mcp`, INVOKE, headers);
      expect(reply.json, JSON.stringify(headers)).toMatchObject({ id: 3, result: { valid: true } });
    }
    for (const headers of [
      { host: `other.fleet.svc:${port}` } as Record<string, string>,
      { origin: 'https://console.example.com:8443' },
      { origin: 'http://console.example.com' },
    ])
      expectErrorReply(await rawPost(`${url}/mcp`, INVOKE, headers), 403, -32600);
  });

  it('reads ALLOWED_HOSTS and ALLOWED_ORIGINS when not given them', async () => {
    process.env.ALLOWED_HOSTS = ' gw.internal , ';
    process.env.ALLOWED_ORIGINS = 'https://console.example.com';
    defer(async () => {
      delete process.env.ALLOWED_HOSTS;
      delete process.env.ALLOWED_ORIGINS;
    });
    const { url } = await serve();
    const byHost = await rawPost(`${url}/mcp`, INVOKE, { host: 'gw.internal' });
    expect(byHost.json).toMatchObject({ id: 3, result: { valid: true } });
    const byOrigin = await rawPost(`${url}/mcp`, INVOKE, { origin: 'https://console.example.com' });
    expect(byOrigin.json).toMatchObject({ id: 3, result: { valid: true } });
    expectErrorReply(await rawPost(`${url}/mcp`, INVOKE, { host: 'evil.example' }), 403, -32600);
  });
});

// The Host check guards loopback only: elsewhere (a pod IP) callers use names of their own.
const external = Object.values(networkInterfaces())
  .flat()
  .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;

describe.skipIf(external === undefined)('a kit service on another address', () => {
  it('serves any Host there, and still refuses a foreign Origin', async () => {
    const { port } = await serve('0.0.0.0');
    const url = `http://${external}:${port}`;
    const reply = await rawPost(`${url}/mcp`, INVOKE, { host: `pii-redactor.fleet.svc:${port}` });
    expect(reply.json).toMatchObject({ id: 3, result: { valid: true } });
    expectErrorReply(
      await rawPost(`${url}/mcp`, INVOKE, { origin: 'http://evil.example' }),
      403,
      -32600,
    );
  });
});
