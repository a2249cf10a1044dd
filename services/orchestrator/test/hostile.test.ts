/**
 * Hostile input against the gateway's HTTP ingress: a corpus of nasty messages and
 * fast-check properties that mutate valid messages at random paths. Every case must get a
 * specific error (HTTP status and JSON-RPC code, an `id` that is never null), the gateway
 * must keep serving, and the heap must not balloon.
 */
import { connect } from 'node:net';
import { expectErrorReply, findGc, rawPost } from '@fleet/interceptor-kit/testing';
import { startHttpBackend } from '@fleet/test-fixtures';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, startGateway, type TestGateway, textOf } from './harness.ts';
import { openRawSession, SESSION_INIT, SESSION_VERSION } from './raw-http.ts';

const VERSION = SESSION_VERSION;
const INIT = SESSION_INIT;
const CALL = {
  jsonrpc: '2.0',
  id: 5,
  method: 'tools/call',
  params: { name: 'echo', arguments: { text: 'hi' } },
};

/** A deep nest of arrays, as raw text. */
const deep = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

/** An invalid UTF-8 sequence spliced into otherwise valid JSON. */
function withBadUtf8(json: string, inString: boolean): Buffer {
  const marker = inString ? '"hi"' : '"params"';
  const [before, after] = json.split(marker) as [string, string];
  return inString
    ? Buffer.concat([
        Buffer.from(`${before}"h`),
        Buffer.from([0xc3, 0x28, 0xff]),
        Buffer.from(`i"${after}`),
      ])
    : Buffer.concat([
        Buffer.from(before),
        Buffer.from([0xfe, 0xff]),
        Buffer.from(`"params"${after}`),
      ]);
}

let gw: TestGateway;
let sessionHeaders: Record<string, string>;

/** The next good request (a tools/call through the session) succeeds. */
async function expectHealthy(): Promise<void> {
  const reply = await rawPost(gw.mcpUrl, JSON.stringify(CALL), sessionHeaders);
  expect(reply.status).toBe(200);
  expect(reply.json).toMatchObject({
    jsonrpc: '2.0',
    id: 5,
    result: { content: [{ text: '[fx] hi' }] },
  });
}

describe('gateway ingress under hostile input', () => {
  async function setup(extra = '') {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    gw = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n${extra}`, {
      redis: false,
    });
    sessionHeaders = await openRawSession(gw.mcpUrl);
  }

  const inSession = true;
  const fresh = false;
  const corpus: Array<[string, () => string | Buffer, boolean, number, number, unknown?]> = [
    ['truncated JSON', () => '{"jsonrpc":', inSession, 400, -32700],
    ['an empty body', () => '', fresh, 400, -32700],
    ['garbage bytes', () => Buffer.from([0, 1, 2, 0xff, 0x7b]), inSession, 400, -32700],
    ['trailing garbage', () => `${JSON.stringify(CALL)}}`, inSession, 400, -32700],
    [
      'invalid UTF-8 inside a string',
      () => withBadUtf8(JSON.stringify(CALL), true),
      inSession,
      400,
      -32700,
    ],
    [
      'invalid UTF-8 between tokens',
      () => withBadUtf8(JSON.stringify(CALL), false),
      inSession,
      400,
      -32700,
    ],
    ['a JSON string', () => '"tools/call"', inSession, 400, -32600],
    ['null', () => 'null', inSession, 400, -32600],
    ['a batch', () => JSON.stringify([CALL, CALL]), inSession, 400, -32600],
    ['an empty batch', () => '[]', inSession, 400, -32600],
    ['10,000-deep arrays', () => deep(10_000), inSession, 400, -32600],
    [
      '10,000-deep nesting as the tool name',
      () => JSON.stringify({ ...CALL, params: { name: 'X' } }).replace('"X"', deep(10_000)),
      inSession,
      200,
      -32602,
      5,
    ],
    [
      '10,000-deep nesting as the id',
      () => JSON.stringify({ ...CALL, id: 'X' }).replace('"X"', deep(10_000)),
      inSession,
      400,
      -32600,
    ],
    ['jsonrpc 1.0', () => JSON.stringify({ ...CALL, jsonrpc: '1.0' }), inSession, 400, -32600],
    ['no jsonrpc', () => JSON.stringify({ id: 5, method: 'tools/list' }), inSession, 400, -32600],
    ['a null id', () => JSON.stringify({ ...CALL, id: null }), inSession, 400, -32600],
    ['a fractional id', () => JSON.stringify({ ...CALL, id: 1.5 }), inSession, 400, -32600],
    ['an object id', () => JSON.stringify({ ...CALL, id: { a: 1 } }), inSession, 400, -32600],
    ['a numeric method', () => JSON.stringify({ ...CALL, method: 7 }), inSession, 400, -32600, 5],
    ['an extra member', () => JSON.stringify({ ...CALL, evil: true }), inSession, 400, -32600, 5],
    [
      'neither request nor response',
      () => JSON.stringify({ jsonrpc: '2.0', id: 9 }),
      inSession,
      400,
      -32600,
      9,
    ],
    // A session's request with bad params is answered like any failed request: HTTP 200.
    ['string params', () => JSON.stringify({ ...CALL, params: 'x' }), inSession, 200, -32602, 5],
    [
      'a numeric tool name',
      () => JSON.stringify({ ...CALL, params: { name: 1 } }),
      inSession,
      200,
      -32602,
      5,
    ],
    [
      'array arguments',
      () => JSON.stringify({ ...CALL, params: { name: 'echo', arguments: [1] } }),
      inSession,
      200,
      -32602,
      5,
    ],
    [
      'a bad progress token',
      () => JSON.stringify({ ...CALL, params: { ...CALL.params, _meta: { progressToken: {} } } }),
      inSession,
      200,
      -32602,
      5,
    ],
    [
      'an unknown method',
      () => JSON.stringify({ jsonrpc: '2.0', id: 'u1', method: 'no/such/method' }),
      inSession,
      200,
      -32601,
      'u1',
    ],
    [
      'a 3 MiB method name',
      () => JSON.stringify({ jsonrpc: '2.0', id: 'u2', method: 'x'.repeat(3 * 1024 * 1024) }),
      inSession,
      200,
      -32601,
      'u2',
    ],
    [
      'initialize with a numeric protocol version',
      () => JSON.stringify({ ...INIT, params: { ...INIT.params, protocolVersion: 2025 } }),
      fresh,
      400,
      -32602,
      1,
    ],
    [
      'initialize without clientInfo',
      () => JSON.stringify({ ...INIT, params: { protocolVersion: VERSION, capabilities: {} } }),
      fresh,
      400,
      -32602,
      1,
    ],
    ['a second initialize', () => JSON.stringify(INIT), inSession, 400, -32600, 1],
    [
      'tools/list before initialize',
      () => JSON.stringify({ ...CALL, method: 'tools/list' }),
      fresh,
      400,
      -32600,
      5,
    ],
  ];

  it('gives an SDK session client McpError -32602 for malformed params, not a failed POST', async () => {
    await setup();
    const client = await connectClient(gw.mcpUrl);
    const error = await client
      .request(
        { method: 'tools/call', params: { name: 'echo', arguments: [1] as never } },
        CallToolResultSchema,
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32602);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'ok' } }))).toBe(
      '[fx] ok',
    );
  });

  it('refuses params nested deeper than limits.maxDepth with -32602 naming the path', async () => {
    await setup('limits: {maxDepth: 40}\n');
    const body = JSON.stringify({
      ...CALL,
      params: { name: 'echo', arguments: { text: 'x', extra: 'X' } },
    }).replace('"X"', deep(300));
    const reply = await rawPost(gw.mcpUrl, body, sessionHeaders);
    expectErrorReply(reply, 200, -32602, 5);
    expect(reply.json.error?.data).toMatchObject({
      reason: 'limit_exceeded',
      limit: 'maxDepth',
      max: 40,
      path: expect.stringMatching(/^params\.arguments\.extra(\[0\])+$/),
    });
    // Just within the limit is served.
    const within = JSON.stringify({
      ...CALL,
      params: { name: 'echo', arguments: { text: 'x', extra: 'X' } },
    }).replace('"X"', deep(37));
    expect((await rawPost(gw.mcpUrl, within, sessionHeaders)).json.result).toBeDefined();
  });

  it.each(corpus)('%s gets a specific error', async (_what, body, session, status, code, id) => {
    await setup();
    const reply = await rawPost(gw.mcpUrl, body(), session ? sessionHeaders : {});
    expectErrorReply(reply, status, code, id);
    await expectHealthy();
  });
});

/** Mutate `value` at `path` (a list of keys), returning a copy. */
function mutateAt(value: unknown, path: string[], replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path as [string, ...string[]];
  const copy = { ...(value as Record<string, unknown>) };
  copy[head] = mutateAt(copy[head], rest, replacement);
  return copy;
}

/** A JSON value that is not of `kind`. */
function wrongType(kind: 'string' | 'object' | 'integer' | 'id'): fc.Arbitrary<unknown> {
  const all: Array<[string, fc.Arbitrary<unknown>]> = [
    ['string', fc.string({ maxLength: 8 })],
    ['integer', fc.integer()],
    [
      'fraction',
      fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Number.isInteger(n)),
    ],
    ['boolean', fc.boolean()],
    ['null', fc.constant(null)],
    ['array', fc.array(fc.integer(), { maxLength: 3 })],
    ['object', fc.dictionary(fc.string({ maxLength: 4 }), fc.integer(), { maxKeys: 2 })],
  ];
  const excluded: Record<string, string[]> = {
    string: ['string'],
    object: ['object'],
    integer: ['integer'],
    id: ['string', 'integer'],
  };
  return fc.oneof(...all.filter(([k]) => !excluded[kind]?.includes(k)).map(([, a]) => a));
}

describe('gateway ingress properties', () => {
  async function setup() {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    gw = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n`, { redis: false });
    sessionHeaders = await openRawSession(gw.mcpUrl);
  }

  // Each field of the message and of the params, with the type it must have and the code a
  // wrong type earns: envelope fields are -32600 with HTTP 400 (id unknown), params fields
  // -32602 with HTTP 200 (id kept: the session's request is answered, not the POST refused).
  const callFields: Array<[string[], 'string' | 'object' | 'integer' | 'id', number]> = [
    [['jsonrpc'], 'string', -32600],
    [['id'], 'id', -32600],
    [['method'], 'string', -32600],
    [['params'], 'object', -32602],
    [['params', 'name'], 'string', -32602],
    [['params', 'arguments'], 'object', -32602],
    [['params', '_meta'], 'object', -32602],
  ];

  it('tools/call with a wrong type at any field gets a specific error', async () => {
    await setup();
    await fc.assert(
      fc.asyncProperty(
        fc
          .constantFrom(...callFields)
          .chain((field) => fc.tuple(fc.constant(field), wrongType(field[1]))),
        async ([[path, , code], replacement]) => {
          const message = mutateAt(CALL, path, replacement);
          const reply = await rawPost(gw.mcpUrl, JSON.stringify(message), sessionHeaders);
          const envelope = path[0] === 'jsonrpc' || path[0] === 'id';
          expectErrorReply(reply, code === -32602 ? 200 : 400, code, envelope ? undefined : 5);
        },
      ),
      { numRuns: 60 },
    );
    await expectHealthy();
  });

  const initFields: Array<[string[], 'string' | 'object' | 'integer' | 'id']> = [
    [['params'], 'object'],
    [['params', 'protocolVersion'], 'string'],
    [['params', 'capabilities'], 'object'],
    [['params', 'clientInfo'], 'object'],
    [['params', 'clientInfo', 'name'], 'string'],
    [['params', 'clientInfo', 'version'], 'string'],
  ];

  it('initialize with a wrong type at any params field gets -32602 and opens no session', async () => {
    await setup();
    const before = gw.orchestrator;
    await fc.assert(
      fc.asyncProperty(
        fc
          .constantFrom(...initFields)
          .chain((field) => fc.tuple(fc.constant(field), wrongType(field[1]))),
        async ([[path], replacement]) => {
          const reply = await rawPost(gw.mcpUrl, JSON.stringify(mutateAt(INIT, path, replacement)));
          expectErrorReply(reply, 400, -32602, 1);
          expect(reply.headers['mcp-session-id']).toBeUndefined();
        },
      ),
      { numRuns: 40 },
    );
    expect(before).toBe(gw.orchestrator);
    await expectHealthy();
  });

  it('arbitrary JSON values and arbitrary bytes never go unanswered', async () => {
    await setup();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.json().map((text) => Buffer.from(text)),
          fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
        ),
        async (body) => {
          const reply = await rawPost(gw.mcpUrl, body, sessionHeaders);
          expect(reply.status).toBeGreaterThanOrEqual(400);
          expect([-32700, -32600, -32602]).toContain(reply.json.error?.code);
          expect(reply.json.id).not.toBeNull();
        },
      ),
      { numRuns: 60 },
    );
    await expectHealthy();
  });
});

describe('gateway ingress under load-shaped abuse', () => {
  async function setup(extra = '') {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    gw = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n${extra}`, {
      redis: false,
    });
    sessionHeaders = await openRawSession(gw.mcpUrl);
  }

  it('refuses the same id twice at once in one session, and answers the first', async () => {
    await setup();
    const slow = JSON.stringify({
      jsonrpc: '2.0',
      id: 'dup',
      method: 'tools/call',
      params: { name: 'slow', arguments: { ms: 300 } },
    });
    const [a, b] = await Promise.all([
      rawPost(gw.mcpUrl, slow, sessionHeaders),
      new Promise((r) => setTimeout(r, 50)).then(() => rawPost(gw.mcpUrl, slow, sessionHeaders)),
    ]);
    expect(a.status).toBe(200);
    expect(a.json).toMatchObject({
      id: 'dup',
      result: { content: [{ text: '[fx] waited 300 ms' }] },
    });
    expectErrorReply(b, 400, -32600, 'dup');
    await expectHealthy();
  });

  it('refuses a body over the limit with 413 (declared or streamed)', async () => {
    await setup('limits: {maxBodyBytes: 1048576}\n');
    const big = JSON.stringify({
      ...CALL,
      params: { name: 'echo', arguments: { text: 'x'.repeat(2 * 1024 * 1024) } },
    });
    expectErrorReply(await rawPost(gw.mcpUrl, big, sessionHeaders), 413, -32600);
    // A lying content-length: the parser counts what arrives.
    expectErrorReply(
      await rawPost(gw.mcpUrl, big, { ...sessionHeaders, 'transfer-encoding': 'chunked' }),
      413,
      -32600,
    );
    await expectHealthy();
  });

  it('takes huge strings and deep nesting without a heap blow-up', async () => {
    await setup();
    const gc = findGc();
    gc?.();
    const before = process.memoryUsage().heapUsed;
    const huge = 'y'.repeat(3 * 1024 * 1024);
    for (let i = 0; i < 5; i++) {
      // A 3 MiB argument within the 4 MiB limit is served (the result may be clamped).
      const reply = await rawPost(
        gw.mcpUrl,
        JSON.stringify({
          ...CALL,
          id: 100 + i,
          params: { name: 'echo', arguments: { text: huge } },
        }),
        sessionHeaders,
      );
      expect(reply.status).toBe(200);
      expect(reply.json.id).toBe(100 + i);
      expectErrorReply(await rawPost(gw.mcpUrl, deep(10_000), sessionHeaders), 400, -32600);
      const nested = JSON.stringify({
        ...CALL,
        id: 200 + i,
        params: { name: 'echo', arguments: { text: 'X' } },
      });
      // A deep object where the tool's schema wants a string: -32602 naming the path.
      const bad = await rawPost(
        gw.mcpUrl,
        nested.replace('"X"', `{"a":${deep(10_000)}}`),
        sessionHeaders,
      );
      expect([200, 400]).toContain(bad.status);
      expect(bad.json).toMatchObject({ jsonrpc: '2.0', id: 200 + i, error: { code: -32602 } });
    }
    await expectHealthy();
    if (gc) {
      gc();
      expect(process.memoryUsage().heapUsed - before).toBeLessThan(256 * 1024 * 1024);
    }
  });

  it('keeps serving others while a slow-loris body stalls', async () => {
    await setup();
    const url = new URL(gw.mcpUrl);
    const socket = connect(Number(url.port), url.hostname);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let closed = false;
    socket.on('close', () => {
      closed = true;
    });
    socket.on('error', () => undefined);
    socket.write(
      `POST /mcp HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\n` +
        `accept: application/json, text/event-stream\r\nmcp-session-id: ${sessionHeaders['mcp-session-id']}\r\n` +
        'content-length: 1000\r\n\r\n{"jsonrpc":',
    );
    // Others are served while the body stalls.
    for (let i = 0; i < 3; i++) await expectHealthy();
    expect(closed).toBe(false);
    socket.destroy();
    await expectHealthy();
  });
});
