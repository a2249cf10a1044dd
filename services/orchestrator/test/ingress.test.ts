/** Ingress guards: batches, body limit, Host/Origin (DNS rebinding), auth, session binding. */
import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { allow, defineValidator } from '@fleet/interceptor-kit';
import { startHttpBackend } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, serveInterceptors, startGateway, textOf } from './harness.ts';
import { SESSION_INIT } from './raw-http.ts';

const INIT = SESSION_INIT;

/** A POST through node:http, which (unlike fetch) lets a test set the Host header. */
async function raw(url: string, body: string | Buffer, headers: Record<string, string> = {}) {
  const { status, text } = await new Promise<{ status: number; text: string }>(
    (resolve, reject) => {
      const req = request(
        url,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'content-length': Buffer.byteLength(body),
            ...headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    },
  );
  let json: { jsonrpc?: string; id?: unknown; error?: { code: number; message: string } } = {};
  try {
    json = JSON.parse(text);
  } catch {
    // SSE or empty
  }
  return { status, json, text };
}

async function gateway(extra = '') {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  return startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n${extra}`, { redis: false });
}

describe('ingress guards', () => {
  it.each([
    ['a JSON-RPC batch', JSON.stringify([INIT]), {}, 400, -32600],
    ['invalid JSON', '{"jsonrpc":', {}, 400, -32700],
    ['a bad Host header', JSON.stringify(INIT), { host: 'evil.example.com' }, 403, -32600],
    ['a foreign Origin', JSON.stringify(INIT), { origin: 'https://evil.example.com' }, 403, -32600],
    [
      'a request before initialize',
      JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
      {},
      400,
      -32600,
    ],
    [
      'an unknown session',
      JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
      { 'mcp-session-id': 'nope' },
      404,
      -32600,
    ],
  ])('refuses %s', async (_what, body, headers, status, code) => {
    const gw = await gateway();
    const res = await raw(gw.mcpUrl, body, headers);
    expect(res.status).toBe(status);
    expect(res.json.jsonrpc).toBe('2.0');
    expect(res.json.error?.code).toBe(code);
    expect(res.json).not.toHaveProperty('id', null);
  });

  it('expires a session idle past limits.sessionIdleMs, never one with an open stream', async () => {
    const gw = await gateway('limits: {sessionIdleMs: 1000}\n');
    // A session opened by hand and left idle (no request, no stream) ...
    const opened = await fetch(gw.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify(INIT),
    });
    const idleId = opened.headers.get('mcp-session-id') ?? '';
    await opened.text();
    expect(idleId).not.toBe('');
    // ... and an SDK client's, which holds its standalone SSE stream open while it lives.
    const listening = await connectClient(gw.mcpUrl);
    // Idle for longer than sessionIdleMs plus one sweep interval (1 s each here); on a loaded
    // machine a sweep may come late, so ask until it is gone (each ask is a request of the
    // session, so wait a whole idle period between asks).
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' });
    const headers = { 'mcp-session-id': idleId, 'mcp-protocol-version': '2025-11-25' };
    let status = 0;
    for (let i = 0; i < 8 && status !== 404; i++) {
      await new Promise((r) => setTimeout(r, 2_500));
      status = (await raw(gw.mcpUrl, ping, headers)).status;
    }
    expect(status).toBe(404);
    // The session with an open stream survived the same sweeps and still serves calls.
    expect(textOf(await listening.callTool({ name: 'echo', arguments: { text: 'x' } }))).toBe(
      '[fx] x',
    );
  });

  it('refuses an oversized body with 413 and -32600', async () => {
    const gw = await gateway('limits: {maxBodyBytes: 1024}\n');
    const res = await raw(
      gw.mcpUrl,
      JSON.stringify({ ...INIT, params: { ...INIT.params, pad: 'x'.repeat(5000) } }),
    );
    expect(res.status).toBe(413);
    expect(res.json.error?.code).toBe(-32600);
    // The gateway still serves the next good request.
    const client = await connectClient(gw.mcpUrl);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'ok' } }))).toBe(
      '[fx] ok',
    );
  });

  it('reads gzip bodies within the limit and refuses unknown encodings and charsets', async () => {
    const gw = await gateway('limits: {maxBodyBytes: 4096}\n');
    const ok = await raw(gw.mcpUrl, gzipSync(JSON.stringify(INIT)), { 'content-encoding': 'gzip' });
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('"protocolVersion"');
    // Inflated size counts: a small compressed body that expands past the limit is refused.
    const bomb = gzipSync(
      JSON.stringify({ ...INIT, params: { ...INIT.params, pad: 'x'.repeat(100_000) } }),
    );
    expect(bomb.length).toBeLessThan(4096);
    const big = await raw(gw.mcpUrl, bomb, { 'content-encoding': 'gzip' });
    expect([big.status, big.json.error?.code]).toEqual([413, -32600]);
    const unknown = await raw(gw.mcpUrl, JSON.stringify(INIT), { 'content-encoding': 'compress' });
    expect([unknown.status, unknown.json.error?.code]).toEqual([415, -32600]);
    expect(unknown.json.error?.message).toContain('encoding');
    const latin1 = await raw(gw.mcpUrl, JSON.stringify(INIT), {
      'content-type': 'application/json; charset=latin1',
    });
    expect([latin1.status, latin1.json.error?.code]).toEqual([415, -32600]);
    expect(latin1.json.error?.message).toContain('latin1');
    const broken = await raw(gw.mcpUrl, Buffer.from('not gzip'), { 'content-encoding': 'gzip' });
    expect([broken.status, broken.json.error?.code]).toEqual([400, -32700]);
  });

  it('refuses a body not sent as application/json with 415 and -32600', async () => {
    const gw = await gateway();
    // text/plain and form bodies are what a page can send without a CORS preflight.
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'text/json', '']) {
      const res = await raw(gw.mcpUrl, JSON.stringify(INIT), { 'content-type': type });
      expect([type, res.status, res.json.error?.code]).toEqual([type, 415, -32600]);
      expect(res.json.error?.message).toContain('application/json');
      // Refused before the body is read: its id is not known, so it is omitted.
      expect(res.json).not.toHaveProperty('id');
    }
    for (const type of ['Application/JSON', 'application/json; charset=UTF-8']) {
      const res = await raw(gw.mcpUrl, JSON.stringify(INIT), { 'content-type': type });
      expect([type, res.status]).toEqual([type, 200]);
    }
  });

  it('accepts a loopback Origin and configured hosts', async () => {
    const gw = await gateway('security: {allowedHosts: ["gateway.internal"]}\n');
    expect(
      (await raw(gw.mcpUrl, JSON.stringify(INIT), { origin: 'http://localhost:6274' })).status,
    ).toBe(200);
    expect((await raw(gw.mcpUrl, JSON.stringify(INIT), { host: 'gateway.internal' })).status).toBe(
      200,
    );
  });
});

describe('token auth', () => {
  const auth = `auth:
  mode: tokens
  tokens:
    - {token: alice-token-123, principal: {type: user, id: alice, claims: {roles: [admin]}}}
    - {token: bob-token-12345, principal: {type: user, id: bob}}
`;

  it('refuses missing or wrong tokens with 401 and a JSON-RPC body', async () => {
    const gw = await gateway(auth);
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer wrong-token-000' },
      { authorization: 'Basic abc' },
    ];
    for (const headers of attempts) {
      const res = await raw(gw.mcpUrl, JSON.stringify(INIT), headers);
      expect(res.status).toBe(401);
      expect(res.json.error?.code).toBe(-32600);
    }
  });

  it('passes the principal to interceptors and binds a session to it', async () => {
    const seen: unknown[] = [];
    const recorder = defineValidator({
      name: 'recorder',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: (_p, ctx) => {
        seen.push(ctx.context.principal);
        return allow();
      },
    });
    const service = await serveInterceptors([recorder]);
    const gw = await gateway(`${auth}interceptors:\n  - url: "${service.url}"\n`);
    const alice = await connectClient(gw.mcpUrl, {
      headers: { authorization: 'Bearer alice-token-123' },
    });
    await alice.callTool({ name: 'echo', arguments: { text: 'x' } });
    expect(seen[0]).toEqual({ type: 'user', id: 'alice', claims: { roles: ['admin'] } });

    // Bob cannot ride on Alice's session.
    const init = await fetch(gw.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: 'Bearer alice-token-123',
      },
      body: JSON.stringify(INIT),
    });
    const sessionId = init.headers.get('mcp-session-id') ?? '';
    await init.text();
    expect(sessionId).not.toBe('');
    const hijack = await raw(
      gw.mcpUrl,
      JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' }),
      {
        authorization: 'Bearer bob-token-12345',
        'mcp-session-id': sessionId,
        'mcp-protocol-version': '2025-11-25',
      },
    );
    expect(hijack.status).toBe(403);
  });
});
