/**
 * Two protocol revisions on `/mcp`: 2025-11-25 sessions (the SDK client) and stateless
 * 2026-07-28 requests (raw HTTP), how a POST is classified, every rejection of an
 * inconsistent stateless request (HTTP status, JSON-RPC code, data), and how a stateless
 * request is served: principal from its credentials, progress and wanted log lines on a
 * request-scoped SSE stream, cancellation by disconnect, no server-to-client requests.
 */

import { SESSION_PROTOCOL_VERSIONS } from '@fleet/core';
import { allow, defineValidator } from '@fleet/interceptor-kit';
import { startHttpBackend } from '@fleet/test-fixtures';
import { SUPPORTED_PROTOCOL_VERSIONS as SDK_SESSION_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  connectClient,
  defer,
  serveInterceptors,
  startGateway,
  textOf,
  waitFor,
} from './harness.ts';
import {
  MODERN,
  modernMeta,
  postModern,
  type RawReply,
  rawPost,
  SESSION_INIT,
} from './raw-http.ts';

async function gateway(extra = '') {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const gw = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n${extra}`, {
    redis: false,
  });
  return { gw, backend };
}

/** Assert a well-formed JSON-RPC error envelope with this HTTP status, code and id. */
function expectError(reply: RawReply, status: number, code: number, id?: unknown): void {
  expect({ status: reply.status, code: reply.json.error?.code }).toEqual({ status, code });
  expect(reply.json.jsonrpc).toBe('2.0');
  if (id === undefined) expect(reply.json).not.toHaveProperty('id');
  else expect(reply.json.id).toEqual(id);
}

const ECHO = { name: 'echo', arguments: { text: 'hi' } };

describe('classifying a POST', () => {
  it('keeps serving 2025-11-25 sessions to the SDK client', async () => {
    const { gw } = await gateway();
    const client = await connectClient(gw.mcpUrl);
    expect(client.getServerVersion()?.name).toBe('interceptor-fleet');
    expect(textOf(await client.callTool(ECHO))).toBe('[fx] hi');
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('echo');
  });

  it('serves the session revisions the SDK negotiates', () => {
    expect([...SESSION_PROTOCOL_VERSIONS]).toEqual(SDK_SESSION_VERSIONS);
  });

  it('serves a complete stateless request without a session', async () => {
    const { gw } = await gateway();
    const reply = await postModern(gw.mcpUrl, 'tools/call', ECHO, { id: 7 });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toContain('application/json');
    expect(reply.headers['mcp-session-id']).toBeUndefined();
    expect(reply.json).toMatchObject({ jsonrpc: '2.0', id: 7 });
    expect(reply.json.result).toMatchObject({
      content: [{ type: 'text', text: '[fx] hi' }],
      resultType: 'complete',
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'interceptor-fleet' } },
    });
    expect(gw.orchestrator.gateway.sessions.size).toBe(0);
  });

  it('answers server/discover and marks cacheable results private and stale', async () => {
    const { gw } = await gateway();
    const discover = await postModern(gw.mcpUrl, 'server/discover');
    expect(discover.status).toBe(200);
    expect(discover.json.result).toMatchObject({
      supportedVersions: expect.arrayContaining([MODERN, '2025-11-25']),
      capabilities: { tools: {} },
      ttlMs: 0,
      cacheScope: 'private',
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'interceptor-fleet' } },
    });
    const list = await postModern(gw.mcpUrl, 'tools/list');
    expect(list.json.result).toMatchObject({ ttlMs: 0, cacheScope: 'private' });
    const tools = (list.json.result?.tools ?? []) as Array<{ name: string }>;
    expect(tools.map((t) => t.name)).toContain('echo');
  });

  it('never reads a stateless request as a session one: a session id it carries is ignored', async () => {
    const { gw } = await gateway();
    // An unknown session id would be 404 for a session request.
    const served = await postModern(gw.mcpUrl, 'tools/call', ECHO, {
      headers: { 'mcp-session-id': 'no-such-session' },
    });
    expect(served.status).toBe(200);
    expect(served.json.result?.content).toEqual([{ type: 'text', text: '[fx] hi' }]);
    // A 2026-07-28 header inside a live session still makes the request stateless, and a
    // stateless request without its metadata is refused rather than downgraded.
    const init = await rawPost(gw.mcpUrl, SESSION_INIT);
    const session = String(init.headers['mcp-session-id']);
    const refused = await rawPost(
      gw.mcpUrl,
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: ECHO },
      {
        'mcp-session-id': session,
        'mcp-protocol-version': MODERN,
        'mcp-method': 'tools/call',
        'mcp-name': 'echo',
      },
    );
    expectError(refused, 400, -32602, 2);
  });

  it('treats initialize as a session request even with 2026-07-28 metadata', async () => {
    const { gw } = await gateway();
    const init = await rawPost(
      gw.mcpUrl,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-11-25',
          capabilities: {},
          clientInfo: { name: 'r', version: '1' },
          _meta: modernMeta(),
        },
      },
      { 'mcp-protocol-version': MODERN },
    );
    expect(init.status).toBe(200);
    expect(init.headers['mcp-session-id']).toEqual(expect.any(String));
    expect(init.json.result).toMatchObject({ protocolVersion: '2025-11-25' });
  });

  it('refuses GET without a session when it names 2026-07-28 (405), and unsupported session versions (-32022)', async () => {
    const { gw } = await gateway();
    const get = await rawPost(gw.mcpUrl, '', { 'mcp-protocol-version': MODERN }, { method: 'GET' });
    expectError(get, 405, -32600);
    expect(get.headers.allow).toBe('POST');
    const client = await connectClient(gw.mcpUrl);
    expect(client).toBeDefined();
    const init = await rawPost(gw.mcpUrl, SESSION_INIT);
    const old = await rawPost(
      gw.mcpUrl,
      { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      {
        'mcp-session-id': String(init.headers['mcp-session-id']),
        'mcp-protocol-version': '1999-01-01',
      },
    );
    expectError(old, 400, -32022, 3);
    expect(old.json.error?.data).toEqual({
      supported: expect.arrayContaining([MODERN, '2025-11-25']),
      requested: '1999-01-01',
    });
  });
});

describe('inconsistent stateless requests', () => {
  const { 'io.modelcontextprotocol/protocolVersion': _v, ...withoutVersion } = modernMeta();
  const { 'io.modelcontextprotocol/clientCapabilities': _c, ...withoutCapabilities } = modernMeta();

  it.each<[string, Parameters<typeof postModern>[3], number, Record<string, unknown>?]>([
    [
      'reserved _meta keys without a version',
      { meta: { ...withoutVersion, 'io.modelcontextprotocol/protocolVersion': undefined } },
      -32602,
      { field: '_meta.io.modelcontextprotocol/protocolVersion' },
    ],
    [
      'no client capabilities',
      { meta: { ...withoutCapabilities, 'io.modelcontextprotocol/clientCapabilities': undefined } },
      -32021,
      { requiredCapabilities: {}, field: '_meta.io.modelcontextprotocol/clientCapabilities' },
    ],
    [
      'an MCP-Protocol-Version header that differs from the body',
      { headers: { 'mcp-protocol-version': '2025-11-25' } },
      -32020,
      { header: 'MCP-Protocol-Version', expected: MODERN },
    ],
    [
      'an Mcp-Method header that differs from the body',
      { headers: { 'mcp-method': 'tools/list' } },
      -32020,
      { header: 'Mcp-Method', expected: 'tools/call' },
    ],
    [
      'an Mcp-Name header that differs from params.name',
      { headers: { 'mcp-name': 'add' } },
      -32020,
      { header: 'Mcp-Name', expected: 'bump' },
    ],
    [
      'an Mcp-Name that is broken base64',
      { headers: { 'mcp-name': '=?base64?ZWNobw?=' } },
      -32020,
      { header: 'Mcp-Name' },
    ],
    [
      'an unsupported version',
      {
        meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' },
        headers: { 'mcp-protocol-version': '2099-01-01' },
      },
      -32022,
      { supported: expect.arrayContaining([MODERN]), requested: '2099-01-01' },
    ],
  ])('refuses %s with HTTP 400', async (_what, options, code, data) => {
    const { gw, backend } = await gateway();
    const reply = await postModern(
      gw.mcpUrl,
      'tools/call',
      { name: 'bump', arguments: {} },
      {
        id: 0,
        ...options,
        headers: { 'mcp-name': 'bump', ...options?.headers },
      },
    );
    expectError(reply, 400, code, 0);
    if (data) expect(reply.json.error?.data).toEqual(data);
    expect(backend.state.counter).toBe(0);
  });

  it('refuses a missing Mcp-Method or Mcp-Name header with -32020', async () => {
    const { gw } = await gateway();
    const base = {
      jsonrpc: '2.0',
      id: 'a',
      method: 'tools/call',
      params: { ...ECHO, _meta: modernMeta() },
    };
    const noMethod = await rawPost(gw.mcpUrl, base, {
      'mcp-protocol-version': MODERN,
      'mcp-name': 'echo',
    });
    expectError(noMethod, 400, -32020, 'a');
    const noName = await rawPost(gw.mcpUrl, base, {
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/call',
    });
    expectError(noName, 400, -32020, 'a');
  });

  it('decodes a base64 Mcp-Name before comparing it', async () => {
    const { gw } = await gateway();
    const reply = await postModern(
      gw.mcpUrl,
      'resources/read',
      { uri: 'fixture://static' },
      {
        headers: { 'mcp-name': `=?base64?${Buffer.from('fixture://static').toString('base64')}?=` },
      },
    );
    expect(reply.status).toBe(200);
    expect(reply.json.result?.contents).toEqual([
      expect.objectContaining({ uri: 'fixture://static' }),
    ]);
  });

  it('answers methods it does not serve statelessly with HTTP 404 and -32601', async () => {
    const { gw } = await gateway();
    for (const [method, params] of [
      ['ping', {}],
      ['logging/setLevel', { level: 'info' }],
      ['resources/subscribe', { uri: 'fixture://counter' }],
    ] as const) {
      const reply = await postModern(gw.mcpUrl, method, params);
      expectError(reply, 404, -32601, 1);
    }
  });

  it('refuses a stateless request the body check refuses, with the id kept', async () => {
    const { gw } = await gateway();
    const reply = await postModern(
      gw.mcpUrl,
      'tools/call',
      { name: 7 },
      {
        id: 'x',
        headers: { 'mcp-name': '7' },
      },
    );
    // params.name must be a string: caught by the body check before anything else.
    expect(reply.status).toBe(400);
    expect(reply.json.id).toBe('x');
    expect([-32602, -32020]).toContain(reply.json.error?.code);
  });
});

describe('serving a stateless request', () => {
  it('takes the principal from the request credentials (and refuses none with 401)', async () => {
    const seen: unknown[] = [];
    const recorder = defineValidator({
      name: 'recorder',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: (_payload, ctx) => {
        seen.push(ctx.context.principal);
        return allow();
      },
    });
    const served = await serveInterceptors([recorder]);
    const { gw } = await gateway(`interceptors:\n  - url: "${served.url}"\nauth:
  mode: tokens
  tokens:
    - {token: alice-token-123, principal: {type: user, id: alice}}
`);
    const denied = await postModern(gw.mcpUrl, 'tools/call', ECHO);
    expectError(denied, 401, -32600);
    const reply = await postModern(gw.mcpUrl, 'tools/call', ECHO, {
      headers: { authorization: 'Bearer alice-token-123' },
    });
    expect(reply.status).toBe(200);
    expect(seen).toEqual([expect.objectContaining({ type: 'user', id: 'alice' })]);
  });

  it('streams progress before the result on a request-scoped SSE stream', async () => {
    const { gw } = await gateway();
    const reply = await postModern(
      gw.mcpUrl,
      'tools/call',
      { name: 'progress', arguments: { steps: 3 } },
      { meta: { progressToken: 'p1' } },
    );
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toContain('text/event-stream');
    const progress = reply.events.filter((e) => e.method === 'notifications/progress');
    expect(progress.map((e) => [e.params?.progressToken, e.params?.progress])).toEqual([
      ['p1', 1],
      ['p1', 2],
      ['p1', 3],
    ]);
    expect(reply.json).toMatchObject({ id: 1, result: { content: [{ text: 'done' }] } });
  });

  it('sends log lines only at or above the level the request asked for', async () => {
    const { gw } = await gateway();
    const quiet = await postModern(gw.mcpUrl, 'tools/call', {
      name: 'log',
      arguments: { level: 'error', message: 'boom' },
    });
    expect(quiet.headers['content-type']).toContain('application/json');
    const asked = (level: string, logLevel: string) =>
      postModern(
        gw.mcpUrl,
        'tools/call',
        { name: 'log', arguments: { level, message: 'boom' } },
        {
          meta: { 'io.modelcontextprotocol/logLevel': logLevel },
        },
      );
    const loud = await asked('error', 'warning');
    expect(loud.events.filter((e) => e.method === 'notifications/message')).toEqual([
      expect.objectContaining({
        params: expect.objectContaining({ level: 'error', data: 'boom' }),
      }),
    ]);
    const below = await asked('info', 'warning');
    expect(below.events).toEqual([]);
  });

  it('fails a call whose backend needs a capability the client did not declare with -32021', async () => {
    const { gw } = await gateway();
    const reply = await postModern(gw.mcpUrl, 'tools/call', {
      name: 'sample',
      arguments: { prompt: 'hello' },
    });
    expectError(reply, 400, -32021, 1);
    expect(reply.json.error?.data).toEqual({ requiredCapabilities: { sampling: {} } });
    const roots = await postModern(gw.mcpUrl, 'tools/call', { name: 'roots', arguments: {} });
    expect(roots.json.error?.data).toEqual({ requiredCapabilities: { roots: {} } });
  });

  it('tells the backend a declared capability cannot be relayed statelessly', async () => {
    const { gw } = await gateway();
    const reply = await postModern(
      gw.mcpUrl,
      'tools/call',
      { name: 'sample', arguments: { prompt: 'hello' } },
      { meta: modernMeta({ sampling: {} }) },
    );
    // The backend's sampling request failed; the fixture reports that as a tool error.
    expect(reply.status).toBe(200);
    expect(reply.json.result).toMatchObject({ isError: true });
    expect(textOf(reply.json.result)).toContain('cannot be relayed to a stateless');
  });

  it('cancels the backend call when the client closes its request', async () => {
    const { gw, backend } = await gateway();
    const controller = new AbortController();
    const pending = postModern(
      gw.mcpUrl,
      'tools/call',
      { name: 'slow', arguments: { ms: 30_000, label: 'stateless' } },
      { signal: controller.signal },
    ).catch((e: unknown) => e);
    await waitFor(
      () => gw.executions.some((e) => e.method === 'tools/call'),
      5000,
      'request chain',
    );
    await new Promise((r) => setTimeout(r, 100));
    controller.abort();
    await pending;
    await waitFor(
      () => backend.state.cancellations.some((c) => c.label === 'stateless'),
      5000,
      'backend cancellation',
    );
  });
});

describe('JSON-RPC envelopes', () => {
  it('keeps id 0 in both revisions, results and errors alike', async () => {
    const { gw } = await gateway();
    const stateless = await postModern(gw.mcpUrl, 'tools/call', ECHO, { id: 0 });
    expect(stateless.json).toMatchObject({ jsonrpc: '2.0', id: 0, result: {} });
    const init = await rawPost(gw.mcpUrl, {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'r', version: '1' },
      },
    });
    expect(init.json).toMatchObject({ jsonrpc: '2.0', id: 0, result: {} });
    const headers = {
      'mcp-session-id': String(init.headers['mcp-session-id']),
      'mcp-protocol-version': '2025-11-25',
    };
    const call = await rawPost(
      gw.mcpUrl,
      { jsonrpc: '2.0', id: 0, method: 'tools/call', params: ECHO },
      headers,
    );
    expect(call.json).toMatchObject({ jsonrpc: '2.0', id: 0, result: {} });
    const unknown = await rawPost(gw.mcpUrl, { jsonrpc: '2.0', id: 0, method: 'no/such' }, headers);
    expect(unknown.json).toMatchObject({ jsonrpc: '2.0', id: 0, error: { code: -32601 } });
  });

  it('omits the id of an error when the request has no valid one (never null)', async () => {
    const { gw } = await gateway();
    const parse = await rawPost(gw.mcpUrl, '{"jsonrpc":');
    expectError(parse, 400, -32700);
    const { body, headers } = {
      body: { jsonrpc: '2.0', id: { not: 'an id' }, method: 'tools/list', params: { _meta: {} } },
      headers: { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/list' },
    };
    const invalid = await rawPost(gw.mcpUrl, body, headers);
    expectError(invalid, 400, -32602);
    const fractional = await rawPost(gw.mcpUrl, { ...body, id: 1.5 }, headers);
    expectError(fractional, 400, -32602);
    const unknownSession = await rawPost(
      gw.mcpUrl,
      { jsonrpc: '2.0', id: 4, method: 'tools/list' },
      { 'mcp-session-id': 'nope' },
    );
    expectError(unknownSession, 404, -32600, 4);
  });
});

describe('stateless request properties', () => {
  it('any header or version value gets a result or a specific 400, never a session reading', async () => {
    const { gw, backend } = await gateway();
    const value = fc.oneof(
      fc.constantFrom(MODERN, '2025-11-25', 'tools/call', 'bump', '=?base64?YnVtcA==?=', ''),
      fc.string({ maxLength: 12 }).filter((s) => /^[\x21-\x7e]*$/.test(s)),
    );
    const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
    await fc.assert(
      fc.asyncProperty(
        maybe(value),
        maybe(value),
        maybe(value),
        maybe(value),
        async (versionHeader, methodHeader, nameHeader, bodyVersion) => {
          const headers: Record<string, string> = {};
          if (versionHeader !== undefined) headers['mcp-protocol-version'] = versionHeader;
          if (methodHeader !== undefined) headers['mcp-method'] = methodHeader;
          if (nameHeader !== undefined) headers['mcp-name'] = nameHeader;
          const meta =
            bodyVersion === undefined
              ? { 'io.modelcontextprotocol/clientCapabilities': {} }
              : modernMeta({}, { 'io.modelcontextprotocol/protocolVersion': bodyVersion });
          const before = backend.state.counter;
          const reply = await rawPost(
            gw.mcpUrl,
            {
              jsonrpc: '2.0',
              id: 'p',
              method: 'tools/call',
              params: { name: 'bump', arguments: {}, _meta: meta },
            },
            headers,
          );
          expect(reply.json.jsonrpc).toBe('2.0');
          expect(reply.json.id).toBe('p');
          const consistent =
            bodyVersion === MODERN &&
            versionHeader === MODERN &&
            methodHeader === 'tools/call' &&
            (nameHeader === 'bump' || nameHeader === '=?base64?YnVtcA==?=');
          if (consistent) {
            expect(reply.status).toBe(200);
            expect(backend.state.counter).toBe(before + 1);
          } else {
            expect(reply.status).toBe(400);
            expect([-32602, -32020, -32022]).toContain(reply.json.error?.code);
            expect(backend.state.counter).toBe(before);
          }
        },
      ),
      { numRuns: 80 },
    );
  });
});
