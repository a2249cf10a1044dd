/**
 * Nesting limits and unwritable answers: params nested past `maxDepth` are refused with
 * -32602 before any handler runs (single and batch, HTTP and the SDK server), and an answer
 * JSON.stringify cannot write is -32603 `{interceptor, reason}` plus a log line, never a bare
 * "Internal error".
 */

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  checkInvokeDepth,
  createInterceptorHost,
  createInterceptorMcpServer,
  DEFAULT_MAX_DEPTH,
  defineMutator,
  modified,
  unchanged,
} from '../src/index.ts';
import { expectErrorReply, rawPost } from '../src/testing.ts';
import { capturingLogger, defer, serveInterceptors } from './helpers.ts';

const nestedText = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const nested = (depth: number): unknown => JSON.parse(nestedText(depth));

/** An echoing mutator (its unchanged payload is written back) that counts its calls. */
function echo() {
  let calls = 0;
  const interceptor = defineMutator({
    name: 'echo',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: () => {
      calls++;
      return unchanged();
    },
  });
  return { interceptor, calls: () => calls };
}

const params = (fields: Record<string, unknown> = {}) => ({
  name: 'echo',
  event: 'tools/call',
  phase: 'request',
  payload: { name: 't', arguments: {} },
  ...fields,
});
const invoke = (p: unknown, id = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'interceptor/invoke',
  params: p,
});
/** `{"arguments":{"a":<depth-deep arrays>}}` as text: a recursive stringify would overflow. */
const deepInvokeText = (depth: number, id = 1) =>
  `{"jsonrpc":"2.0","id":${id},"method":"interceptor/invoke","params":{"name":"echo","event":"tools/call","phase":"request","payload":{"arguments":{"a":${nestedText(depth)}}}}}`;

describe('checkInvokeDepth', () => {
  it.each([
    ['a scalar payload', params({ payload: 'x' }), 1],
    ['{} at the limit', params({ payload: {} }), 1],
    ['[[1]] at the limit', params({ payload: [[1]] }), 2],
    ['deep config at the limit', params({ config: { a: { b: {} } } }), 3],
    ['non-object params', 'x', 1],
  ])('accepts %s', (_what, p, max) => {
    expect(() => checkInvokeDepth(p, max)).not.toThrow();
  });

  it.each([
    ['payload', params({ payload: [[1]] }), 1, 'payload[0]'],
    ['payload', params({ payload: { a: [{ 'b-c': {} }] } }), 3, 'payload.a[0]["b-c"]'],
    ['config', params({ config: { a: { b: {} } } }), 2, 'config.a.b'],
    [
      'context',
      params({ context: { principal: { claims: { x: [] } } } }),
      3,
      'context.principal.claims.x',
    ],
  ])('refuses %s past the limit with -32602 naming the path', (_field, p, max, path) => {
    let thrown: unknown;
    try {
      checkInvokeDepth(p, max);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({
      code: -32602,
      data: { name: 'echo', reason: 'limit_exceeded', limit: 'maxDepth', max, path },
    });
  });

  it('measures 100,000-deep nesting without recursion', () => {
    expect(() => checkInvokeDepth(params({ payload: nested(100_000) }))).toThrow(/maxDepth/);
  });
});

describe('nesting limit over HTTP', () => {
  it('refuses a 5,000-deep payload a handler does not walk with -32602, before the handler', async () => {
    const { interceptor, calls } = echo();
    const { url } = await serveInterceptors([interceptor]);
    const reply = await rawPost(url, deepInvokeText(5_000, 7));
    expectErrorReply(reply, 200, -32602, 7);
    expect(reply.json.error?.data).toMatchObject({
      name: 'echo',
      reason: 'limit_exceeded',
      limit: 'maxDepth',
      max: DEFAULT_MAX_DEPTH,
    });
    const path = String((reply.json.error?.data as { path?: string } | undefined)?.path);
    expect(path.startsWith('payload.arguments.a[0][0]')).toBe(true);
    expect(path).toBe(`payload.arguments.a${'[0]'.repeat(DEFAULT_MAX_DEPTH - 2)}`);
    expect(calls()).toBe(0);
    // Still serving, and a payload at the limit is echoed.
    const ok = await rawPost(url, invoke(params({ payload: nested(DEFAULT_MAX_DEPTH) })));
    expect(ok.json.result).toMatchObject({ interceptor: 'echo', modified: false });
    expect(calls()).toBe(1);
  });

  it('takes maxDepth from the HTTP options, for payload, config and context alike', async () => {
    const { interceptor, calls } = echo();
    const { url } = await serveInterceptors([interceptor], { maxDepth: 4 });
    for (const [field, value] of [
      ['payload', { a: [[[{}]]] }],
      ['config', { a: [[[{}]]] }],
      ['context', { principal: { type: 'user', claims: { a: [[]] } } }],
    ] as const) {
      const reply = await rawPost(url, invoke(params({ [field]: value })));
      expectErrorReply(reply, 200, -32602, 1);
      expect(reply.json.error?.data).toMatchObject({ name: 'echo', max: 4 });
      expect(reply.json.error?.data).toMatchObject({ path: expect.stringMatching(`^${field}`) });
    }
    expect(calls()).toBe(0);
    const ok = await rawPost(url, invoke(params({ payload: { a: [[1]] } })));
    expect(ok.json.result).toMatchObject({ modified: false, payload: { a: [[1]] } });
  });

  it('refuses a too-deep item of a batch on its own and answers the others', async () => {
    const { interceptor, calls } = echo();
    const { url } = await serveInterceptors([interceptor]);
    const shallow = JSON.stringify(params());
    const deep = `{"name":"echo","event":"tools/call","phase":"request","payload":${nestedText(5_000)}}`;
    const body = `{"jsonrpc":"2.0","id":"b","method":"fleet/interceptor/invokeBatch","params":{"invocations":[${shallow},${deep},${shallow}]}}`;
    const reply = await rawPost(url, body);
    expect(reply.status).toBe(200);
    const results = (reply.json.result as { results: Array<{ result?: unknown; error?: unknown }> })
      .results;
    expect(results).toHaveLength(3);
    expect(results[0]?.result).toMatchObject({ modified: false });
    expect(results[1]?.error).toMatchObject({
      code: -32602,
      data: {
        name: 'echo',
        reason: 'limit_exceeded',
        limit: 'maxDepth',
        path: expect.stringMatching(/^payload\[0\]/),
      },
    });
    expect(results[2]?.result).toMatchObject({ modified: false });
    expect(calls()).toBe(2);
  });

  it('refuses a bad maxDepth when the app is built', async () => {
    const { interceptor } = echo();
    await expect(serveInterceptors([interceptor], { maxDepth: 0 })).rejects.toThrow(RangeError);
  });
});

describe('answers that cannot be serialised', () => {
  /** A mutator whose result JSON.stringify cannot write: too deep, or a BigInt. */
  const unwritable = defineMutator({
    name: 'unwritable',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: (payload) => {
      const kind = (payload as { kind?: string }).kind;
      if (kind === 'deep') return modified(nested(20_000));
      if (kind === 'bigint') return unchanged({ n: 1n });
      return unchanged();
    },
  });
  const call = (kind: string) => params({ name: 'unwritable', payload: { kind } });

  it.each(['deep', 'bigint'])(
    'answers a %s result with -32603 {interceptor, reason} and logs it without the payload',
    async (kind) => {
      const { logger, lines } = capturingLogger();
      const { url } = await serveInterceptors([unwritable], { logger });
      const reply = await rawPost(url, invoke(call(kind), 5));
      expectErrorReply(reply, 200, -32603, 5);
      expect(reply.json.error?.data).toEqual({
        interceptor: 'unwritable',
        reason: 'the answer could not be serialised as JSON',
      });
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        level: 'error',
        obj: { interceptor: 'unwritable', method: 'interceptor/invoke' },
      });
      expect(JSON.stringify(lines[0]?.obj)).not.toContain(kind === 'deep' ? '[[' : '"n"');
      const fine = await rawPost(url, invoke(call('none'), 6));
      expect(fine.json.result).toMatchObject({ modified: false });
    },
  );

  it('fails only the batch items whose answer cannot be written', async () => {
    const { logger, lines } = capturingLogger();
    const { url } = await serveInterceptors([unwritable], { logger });
    const reply = await rawPost(url, {
      jsonrpc: '2.0',
      id: 'b',
      method: 'fleet/interceptor/invokeBatch',
      params: { invocations: [call('none'), call('deep'), call('bigint')] },
    });
    const results = (reply.json.result as { results: Array<{ result?: unknown; error?: unknown }> })
      .results;
    expect(results[0]?.result).toMatchObject({ interceptor: 'unwritable', modified: false });
    for (const answer of results.slice(1)) {
      expect(answer.error).toMatchObject({
        code: -32603,
        data: { interceptor: 'unwritable', reason: 'the answer could not be serialised as JSON' },
      });
    }
    expect(lines.filter((l) => l.level === 'error')).toHaveLength(2);
  });
});

describe('nesting limit on the MCP SDK server (stdio and the rest of HTTP)', () => {
  it('refuses too-deep invoke params with -32602, single and batched', async () => {
    const { interceptor, calls } = echo();
    const server = createInterceptorMcpServer(createInterceptorHost([interceptor]), {
      name: 'sdk',
      maxDepth: 3,
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const client = new Client({ name: 'limits-test', version: '0' });
    await server.connect(serverSide);
    await client.connect(clientSide);
    defer(async () => {
      await client.close();
      await server.close();
    });
    await expect(
      client.request(
        { method: 'interceptor/invoke', params: params({ payload: { a: [[[1]]] } }) },
        z.unknown(),
      ),
    ).rejects.toMatchObject({ code: -32602, data: { name: 'echo', path: 'payload.a[0][0]' } });
    const batch = (await client.request(
      {
        method: 'fleet/interceptor/invokeBatch',
        params: { invocations: [params(), params({ config: { a: { b: { c: {} } } } })] },
      },
      z.object({ results: z.array(z.record(z.string(), z.unknown())) }),
    )) as { results: Array<{ result?: unknown; error?: unknown }> };
    expect(batch.results[0]?.result).toMatchObject({ modified: false });
    expect(batch.results[1]?.error).toMatchObject({ code: -32602, data: { path: 'config.a.b.c' } });
    expect(calls()).toBe(1);
  });
});
