import { connect } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  allow,
  createInterceptorHost,
  createInterceptorHttpApp,
  defineValidator,
  listen,
} from '../src/index.ts';
import { expectErrorReply, findGc, rawPost, SESSION_INIT, startSlowLoris } from '../src/testing.ts';
import { defer } from './helpers.ts';

const INVOKE = {
  jsonrpc: '2.0',
  id: 3,
  method: 'interceptor/invoke',
  params: {
    name: 'v',
    event: 'tools/call',
    phase: 'request',
    payload: { name: 'echo' },
    config: {},
    timeoutMs: 1000,
    context: {},
    _meta: {},
  },
};
const LIST = { jsonrpc: '2.0', id: 0, method: 'interceptors/list', params: {} };
const LIMIT = 4 * 1024 * 1024;

/** A kit service with one validator, on a free loopback port; idle sockets time out fast. */
async function serve() {
  const host = createInterceptorHost([
    defineValidator({
      name: 'v',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: () => allow(),
    }),
  ]);
  const { listener } = createInterceptorHttpApp(host, { name: 'hostile', maxBodyBytes: LIMIT });
  const listening = await listen(listener, { service: 'hostile', announce: false });
  listening.server.timeout = 1000;
  defer(async () => {
    listening.server.closeAllConnections();
    await listening.close(0);
  });
  return { url: `${listening.url}/mcp`, listening };
}

async function expectHealthy(url: string): Promise<void> {
  const reply = await rawPost(url, JSON.stringify(INVOKE));
  expect(reply.status).toBe(200);
  expect(reply.json).toMatchObject({ jsonrpc: '2.0', id: 3, result: { valid: true } });
}

const deep = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const invokeWith = (params: Record<string, unknown>, id: unknown = 3) =>
  JSON.stringify({ ...INVOKE, id, params: { ...INVOKE.params, ...params } });

describe('kit service under hostile input', () => {
  const corpus: Array<[string, () => string | Buffer, number, number, unknown?]> = [
    ['truncated JSON', () => '{"jsonrpc":', 400, -32700],
    ['an empty body', () => '', 400, -32700],
    ['garbage bytes', () => Buffer.from([0, 1, 2, 0xff, 0x7b]), 400, -32700],
    [
      'invalid UTF-8 inside a string',
      () =>
        Buffer.concat([
          Buffer.from(invokeWith({ name: 'v' }).replace('"v"', '"v')),
          Buffer.from([0xc3, 0x28]),
        ]),
      400,
      -32700,
    ],
    [
      'invalid UTF-8 in a valid-looking message',
      () => {
        const text = invokeWith({ payload: 'AB' });
        const at = text.indexOf('AB');
        const bytes = Buffer.from(text);
        bytes[at] = 0xff;
        bytes[at + 1] = 0xfe;
        return bytes;
      },
      400,
      -32700,
    ],
    ['a JSON number', () => '42', 400, -32600],
    ['a batch', () => JSON.stringify([LIST, LIST]), 400, -32600],
    ['10,000-deep arrays', () => deep(10_000), 400, -32600],
    ['jsonrpc 1.0', () => JSON.stringify({ ...INVOKE, jsonrpc: '1.0' }), 400, -32600, 3],
    ['an empty object', () => '{}', 400, -32600],
    ['a null-id ping', () => '{"jsonrpc":"2.0","id":null,"method":"ping"}', 400, -32600],
    ['a numeric method', () => JSON.stringify({ ...INVOKE, method: 9 }), 400, -32600, 3],
    [
      'an initialize with string params',
      () => '{"jsonrpc":"2.0","id":"i","method":"initialize","params":"x"}',
      400,
      -32600,
      'i',
    ],
    ['a null id', () => JSON.stringify({ ...INVOKE, id: null }), 400, -32600],
    ['an object id', () => JSON.stringify({ ...INVOKE, id: { a: 1 } }), 400, -32600],
    [
      '10,000-deep nesting as the id',
      () => JSON.stringify({ ...INVOKE, id: 'X' }).replace('"X"', deep(10_000)),
      400,
      -32600,
    ],
    ['string params', () => JSON.stringify({ ...INVOKE, params: 'x' }), 200, -32602, 3],
    ['an unknown interceptor', () => invokeWith({ name: 'nope' }), 200, -32602, 3],
    ['an unadvertised hook', () => invokeWith({ phase: 'response' }), 200, -32602, 3],
    ['a 3 MiB interceptor name', () => invokeWith({ name: 'n'.repeat(3 << 20) }), 200, -32602, 3],
    [
      '10,000-deep nesting as the interceptor name',
      () => invokeWith({ name: 'X' }).replace('"X"', deep(10_000)),
      200,
      -32602,
      3,
    ],
    [
      'an unknown method',
      () => JSON.stringify({ jsonrpc: '2.0', id: 'u', method: 'no/such/method' }),
      200,
      -32601,
      'u',
    ],
    [
      'interceptors/list with a numeric event',
      () => JSON.stringify({ ...LIST, params: { event: 7 } }),
      200,
      -32602,
      0,
    ],
  ];

  it.each(corpus)('%s gets a specific error', async (_what, body, status, code, id) => {
    const { url } = await serve();
    expectErrorReply(await rawPost(url, body()), status, code, id);
    await expectHealthy(url);
  });

  it('refuses bodies over the limit, declared or streamed, with 413', async () => {
    const { url } = await serve();
    const big = invokeWith({ payload: 'x'.repeat(LIMIT + 10) });
    expectErrorReply(await rawPost(url, big), 413, -32600);
    expectErrorReply(await rawPost(url, big, { 'transfer-encoding': 'chunked' }), 413, -32600);
    await expectHealthy(url);
  });

  it('takes a 3 MiB payload and refuses 10,000-deep payloads without a heap blow-up', async () => {
    const { url } = await serve();
    const gc = findGc();
    gc?.();
    const before = process.memoryUsage().heapUsed;
    const huge = 'y'.repeat(3 * 1024 * 1024);
    for (let i = 0; i < 5; i++) {
      const big = await rawPost(url, invokeWith({ payload: huge }, 10 + i));
      expect(big.json).toMatchObject({ id: 10 + i, result: { valid: true } });
      const nested = await rawPost(
        url,
        invokeWith({ payload: 'X' }, 20 + i).replace('"X"', deep(10_000)),
      );
      // Past the kit's nesting limit: refused before the handler, naming the limit.
      expectErrorReply(nested, 200, -32602, 20 + i);
      expect(nested.json.error?.data).toMatchObject({ name: 'v', limit: 'maxDepth' });
    }
    await expectHealthy(url);
    if (gc) {
      gc();
      expect(process.memoryUsage().heapUsed - before).toBeLessThan(256 * 1024 * 1024);
    }
  });

  it('treats /mcp/ and /MCP as /mcp: same body limit, no batches, no null ids', async () => {
    const host = createInterceptorHost([
      defineValidator({
        name: 'v',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => allow(),
      }),
    ]);
    const { listener } = createInterceptorHttpApp(host, { name: 'aliases', maxBodyBytes: 1024 });
    const listening = await listen(listener, { service: 'aliases', announce: false });
    defer(() => listening.close(0));
    for (const path of ['/mcp/', '/MCP', '/Mcp/?x=1']) {
      const url = `${listening.url}${path}`;
      // express routes these to /mcp too; they used to reach the SDK transport, which took
      // 4 MiB bodies and JSON-RPC batches and answered a malformed message with "id": null.
      const big = invokeWith({ payload: 'x'.repeat(2048) });
      expectErrorReply(await rawPost(url, big), 413, -32600);
      const batch = JSON.stringify([LIST, { ...LIST, id: 1 }]);
      expectErrorReply(await rawPost(url, batch), 400, -32600);
      expectErrorReply(await rawPost(url, '{"id":1,"method":"ping"}'), 400, -32600, 1);
      const reply = await rawPost(url, JSON.stringify(INVOKE));
      expect(reply.json).toMatchObject({ jsonrpc: '2.0', id: 3, result: { valid: true } });
    }
  });

  it("keeps a timeoutMs past setTimeout's 32-bit range as a long budget, not 1 ms", async () => {
    const host = createInterceptorHost([
      defineValidator({
        name: 'slow',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: async () => {
          await new Promise((resolve) => setTimeout(resolve, 50));
          return allow();
        },
      }),
    ]);
    const { listener } = createInterceptorHttpApp(host, { name: 'long-budget' });
    const listening = await listen(listener, { service: 'long-budget', announce: false });
    defer(() => listening.close(0));
    for (const timeoutMs of [2 ** 31 - 1, 2 ** 31, 3_000_000_000, Number.MAX_SAFE_INTEGER]) {
      const reply = await rawPost(`${listening.url}/mcp`, invokeWith({ name: 'slow', timeoutMs }));
      // Node runs a setTimeout over 2^31-1 ms after 1 ms: this used to time out at once.
      expect(reply.json).toMatchObject({ id: 3, result: { interceptor: 'slow', valid: true } });
    }
  });

  it('reads Content-Type and Accept media types in any case, and application/* as JSON', async () => {
    const { url } = await serve();
    // RFC 9110 §8.3.1: type and subtype are case-insensitive; these were answered 415 / 406.
    const variants: Array<Record<string, string>> = [
      { 'content-type': 'Application/JSON' },
      { 'content-type': 'APPLICATION/JSON; charset=UTF-8' },
      { accept: 'Application/Json' },
      { accept: 'application/*' },
    ];
    // Accept without text/event-stream: the kit answers JSON, so JSON alone is enough.
    for (const headers of [...variants, { accept: 'application/json' }]) {
      const reply = await rawPost(url, JSON.stringify(INVOKE), headers);
      expect(reply.json).toMatchObject({ id: 3, result: { valid: true } });
      // initialize and ping go through the SDK's transport, which read these headers
      // case-sensitively and wanted text/event-stream (415 / 406).
      const init = await rawPost(url, JSON.stringify(SESSION_INIT), headers);
      expect(init.status).toBe(200);
      expect(init.json).toMatchObject({ id: 1, result: { protocolVersion: '2025-11-25' } });
      const ping = await rawPost(url, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }), {
        ...headers,
        'mcp-protocol-version': '2025-11-25',
      });
      expect(ping.json).toEqual({ jsonrpc: '2.0', id: 2, result: {} });
    }
    expectErrorReply(
      await rawPost(url, JSON.stringify(INVOKE), { 'content-type': 'text/plain' }),
      415,
      -32600,
    );
    expectErrorReply(
      await rawPost(url, JSON.stringify(INVOKE), { accept: 'text/html' }),
      406,
      -32600,
    );
  });

  it('answers concurrent requests that reuse one id, each on its own', async () => {
    const { url } = await serve();
    const replies = await Promise.all([1, 2, 3].map(() => rawPost(url, JSON.stringify(INVOKE))));
    for (const reply of replies)
      expect(reply.json).toMatchObject({ id: 3, result: { valid: true } });
  });

  it('serves others while a slow-loris body stalls, then drops the stalled socket', async () => {
    const { url } = await serve();
    const target = new URL(url);
    const socket = connect(Number(target.port), target.hostname);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let closed = false;
    socket.on('close', () => {
      closed = true;
    });
    socket.on('error', () => undefined);
    socket.write(
      `POST /mcp HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\n` +
        'content-length: 1000\r\n\r\n{"jsonrpc":',
    );
    for (let i = 0; i < 3; i++) await expectHealthy(url);
    // The server's idle timeout (1 s here) closes the stalled socket.
    const deadline = Date.now() + 10_000;
    while (!closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(true);
    await expectHealthy(url);
  });

  it('answers a body that keeps dripping past requestTimeoutMs with 408 and closes it', async () => {
    const host = createInterceptorHost([
      defineValidator({
        name: 'v',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => allow(),
      }),
    ]);
    const { listener } = createInterceptorHttpApp(host, { name: 'drip' });
    const listening = await listen(listener, {
      service: 'drip',
      announce: false,
      requestTimeoutMs: 800,
      headersTimeoutMs: 400,
    });
    defer(async () => {
      listening.server.closeAllConnections();
      await listening.close(0);
    });
    const loris = await startSlowLoris(listening.url);
    defer(async () => loris.stop());
    await expectHealthy(`${listening.url}/mcp`);
    expect(await loris.untilClosed(10_000)).toBe(true);
    expect(loris.received()).toMatch(/^HTTP\/1\.1 408 /);
    await expectHealthy(`${listening.url}/mcp`);
  });
});

/** Mutate `value` at `path`, returning a copy. */
function mutateAt(value: unknown, path: string[], replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path as [string, ...string[]];
  const copy = { ...(value as Record<string, unknown>) };
  copy[head] = mutateAt(copy[head], rest, replacement);
  return copy;
}

type Kind = 'string' | 'object' | 'posint' | 'id' | 'phase';

/** A JSON value that is not of `kind`. */
function wrongType(kind: Kind): fc.Arbitrary<unknown> {
  const all: Array<[string, fc.Arbitrary<unknown>]> = [
    ['string', fc.string({ maxLength: 8 })],
    ['integer', fc.integer({ min: -1000, max: 0 })],
    [
      'fraction',
      fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Number.isInteger(n)),
    ],
    ['boolean', fc.boolean()],
    ['null', fc.constant(null)],
    ['array', fc.array(fc.integer(), { maxLength: 3 })],
    ['object', fc.dictionary(fc.string({ maxLength: 4 }), fc.integer(), { maxKeys: 2 })],
  ];
  const excluded: Record<Kind, string[]> = {
    string: ['string'],
    object: ['object'],
    posint: [],
    id: ['string', 'integer', 'fraction'],
    phase: [],
  };
  return fc.oneof(...all.filter(([k]) => !excluded[kind].includes(k)).map(([, a]) => a));
}

describe('kit service properties', () => {
  // Every field of the message and of the params, with its type and the code a wrong type earns.
  const fields: Array<[string[], Kind, number, number]> = [
    [['jsonrpc'], 'string', 400, -32600],
    [['id'], 'id', 400, -32600],
    [['method'], 'string', 400, -32600],
    [['params'], 'object', 200, -32602],
    [['params', 'name'], 'phase', 200, -32602],
    [['params', 'event'], 'phase', 200, -32602],
    [['params', 'phase'], 'phase', 200, -32602],
    [['params', 'config'], 'object', 200, -32602],
    [['params', 'timeoutMs'], 'posint', 200, -32602],
    [['params', 'context'], 'object', 200, -32602],
    [['params', '_meta'], 'object', 200, -32602],
  ];

  it('interceptor/invoke with a wrong type at any field gets a specific error', async () => {
    const { url } = await serve();
    await fc.assert(
      fc.asyncProperty(
        fc
          .constantFrom(...fields)
          .chain((field) => fc.tuple(fc.constant(field), wrongType(field[1]))),
        async ([[path, , status, code], replacement]) => {
          const reply = await rawPost(url, JSON.stringify(mutateAt(INVOKE, path, replacement)));
          // The id is echoed whenever it is itself valid.
          expectErrorReply(reply, status, code, path[0] === 'id' ? undefined : 3);
        },
      ),
      { numRuns: 80 },
    );
    await expectHealthy(url);
  });

  it('arbitrary JSON values and bytes never go unanswered', async () => {
    const { url } = await serve();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.json().map((text) => Buffer.from(text)),
          fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
        ),
        async (body) => {
          const reply = await rawPost(url, body);
          expect(reply.status).toBeGreaterThanOrEqual(400);
          expect(reply.json.jsonrpc).toBe('2.0');
          expect(reply.json.error?.code).toBeLessThan(-32000);
          expect(reply.json.id).not.toBeNull();
        },
      ),
      { numRuns: 60 },
    );
    await expectHealthy(url);
  });
});
