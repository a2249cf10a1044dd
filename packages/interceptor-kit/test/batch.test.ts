/**
 * `fleet/interceptor/invokeBatch`: a kit service declares it and answers each invocation of a
 * batch as if it had come alone (in order, errors per item); a RemoteService sends the
 * batchable invocations of one event-loop turn as one batch, the others one by one, and
 * falls back to single invocations against a server that does not declare the capability.
 */
import { request as httpRequest, type IncomingMessage, type RequestListener } from 'node:http';
import {
  InterceptorMethod,
  type InvokeParams,
  MAX_INVOKE_BATCH,
  ProtocolError,
  parseInterceptorInfo,
  planChain,
  resolveService,
  runChain,
} from '@fleet/core';
import { describe, expect, it } from 'vitest';
import {
  allow,
  createInterceptorHost,
  createInterceptorHttpApp,
  createRemoteService,
  defineValidator,
  deny,
  listen,
} from '../src/index.ts';
import { defer } from './helpers.ts';

const params = (name: string, text = 'hi'): InvokeParams => ({
  name,
  event: 'tools/call',
  phase: 'request',
  payload: { name: 'echo', arguments: { text } },
  context: { timestamp: new Date().toISOString() },
});

/** A kit service with one audit-mode validator; `posts()` counts the HTTP POSTs it got. */
async function countingService() {
  const host = createInterceptorHost([
    defineValidator({
      name: 'observer',
      mode: 'audit',
      hooks: [{ events: ['*'], phase: 'request' }],
      handler: async (payload) => {
        const text = (payload as { arguments?: { text?: string } }).arguments?.text;
        if (text === 'slow') await new Promise((resolve) => setTimeout(resolve, 400));
        return text === 'bad' ? deny('bad text') : allow();
      },
    }),
  ]);
  const { listener } = createInterceptorHttpApp(host, { name: 'batch-test' });
  const listening = await listen(listener, { service: 'batch-test', announce: false });
  defer(() => listening.close(100));
  let posts = 0;
  const traceparents: Array<string | undefined> = [];
  listening.server.on('request', (req: IncomingMessage) => {
    if (req.method !== 'POST') return;
    posts++;
    traceparents.push(req.headers.traceparent as string | undefined);
  });
  return { url: `${listening.url}/mcp`, posts: () => posts, traceparents };
}

/** A {@link countingService} and a connected RemoteService for it. */
async function connectedService() {
  const counting = await countingService();
  const service = createRemoteService({ url: counting.url });
  defer(() => service.close());
  const handshake = await service.connect();
  return { ...counting, service, handshake };
}

/**
 * An interceptor server from elsewhere: plain MCP over HTTP (JSON answers), the interceptors
 * extension but no batch capability; it records the method of each message it gets. With
 * `refuseBatches` it declares the batch capability but answers every batch request as a whole
 * with -32602 (as a server with a smaller limit than it declares would).
 */
async function foreignService({ refuseBatches = false } = {}) {
  const methods: string[] = [];
  const listener: RequestListener = (req, res) => {
    let text = '';
    req.on('data', (c) => {
      text += c;
    });
    req.on('end', () => {
      const message = JSON.parse(text) as { id?: number; method: string };
      methods.push(message.method);
      if (message.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      const experimental: Record<string, unknown> = { 'io.modelcontextprotocol/interceptors': {} };
      if (refuseBatches) experimental['io.fleet/invokeBatch'] = { maxItems: 8 };
      const result =
        message.method === 'initialize'
          ? {
              protocolVersion: '2025-11-25',
              serverInfo: { name: 'foreign', version: '1' },
              capabilities: { experimental },
            }
          : { valid: true };
      const answer =
        message.method === InterceptorMethod.INVOKE_BATCH
          ? {
              jsonrpc: '2.0',
              id: message.id,
              error: { code: -32602, message: 'Invalid params: too many invocations' },
            }
          : { jsonrpc: '2.0', id: message.id, result };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  };
  const listening = await listen(listener, { service: 'foreign', announce: false });
  defer(() => listening.close(100));
  return { url: `${listening.url}/mcp`, methods };
}

function postJson(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = httpRequest(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
      },
      (res) => {
        let data = '';
        res.on('data', (c) => {
          data += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(data) }));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

describe('fleet/interceptor/invokeBatch', () => {
  it('is declared in initialize and answers each invocation in order, errors per item', async () => {
    const { url, handshake } = await connectedService();
    expect(handshake.invokeBatchLimit).toBe(MAX_INVOKE_BATCH);

    const reply = await postJson(url, {
      jsonrpc: '2.0',
      id: 7,
      method: InterceptorMethod.INVOKE_BATCH,
      params: {
        invocations: [params('observer'), params('missing'), params('observer', 'bad')],
      },
    });
    expect(reply.status).toBe(200);
    const { results } = (reply.json as { result: { results: unknown[] } }).result;
    expect(results).toHaveLength(3);
    expect(results[0]).toMatchObject({ result: { valid: true } });
    expect(results[1]).toMatchObject({
      error: { code: -32602, data: { name: 'missing', reason: 'unknown_interceptor' } },
    });
    expect(results[2]).toMatchObject({ result: { valid: false } });
  });

  it('refuses a batch that is not a non-empty array or is too long, naming "invocations"', async () => {
    const { url } = await countingService();
    for (const invocations of [undefined, [], 'x', Array(MAX_INVOKE_BATCH + 1).fill({})]) {
      const reply = await postJson(url, {
        jsonrpc: '2.0',
        id: 1,
        method: InterceptorMethod.INVOKE_BATCH,
        params: { invocations },
      });
      const error = (reply.json as { error: { code: number; message: string } }).error;
      expect(error.code).toBe(-32602);
      expect(error.message).toContain('"invocations"');
    }
  });

  it('sends to an idle service what one burst of code starts, without waiting for the turn to end', async () => {
    const { service, posts } = await connectedService();
    const signal = AbortSignal.timeout(5_000);
    const invoke = (text: string) =>
      service.invoke(params('observer', text), { signal, batchable: true });
    // Two callbacks of one event-loop turn, each starting invocations.
    const twoCallbacks = () =>
      new Promise<unknown[]>((resolve) => {
        const started: Array<Promise<unknown>> = [];
        setImmediate(() => started.push(invoke('a'), invoke('c')));
        setImmediate(() => {
          started.push(invoke('bad'));
          resolve(Promise.all(started));
        });
      });
    // Idle: the first callback's two go as one batch as soon as it has run; the third
    // finds that batch in flight and goes a turn later, alone.
    let before = posts();
    const idle = await twoCallbacks();
    expect(posts() - before).toBe(2);
    expect(idle).toMatchObject([{ valid: true }, { valid: true }, { valid: false }]);
    // Busy (an invocation in flight): all three wait for the end of the turn, one batch.
    before = posts();
    const busy = invoke('slow');
    await new Promise((resolve) => setImmediate(resolve));
    const during = await twoCallbacks();
    expect(during).toMatchObject([{ valid: true }, { valid: true }, { valid: false }]);
    expect(await busy).toMatchObject({ valid: true });
    expect(posts() - before).toBe(2);
  });

  it('sends the batchable invocations of one turn as one request while the service is busy, the others alone', async () => {
    const { service, posts } = await connectedService();
    const before = posts();
    const signal = AbortSignal.timeout(5_000);
    // In flight while the next turn's invocations arrive.
    const busy = service.invoke(params('observer', 'slow'), { signal, batchable: true });
    await new Promise((resolve) => setImmediate(resolve));
    const results = await Promise.all([
      service.invoke(params('observer', 'a'), { signal, batchable: true }),
      service.invoke(params('observer', 'bad'), { signal, batchable: true }),
      service.invoke(params('observer', 'c'), { signal, batchable: true }),
      service.invoke(params('observer', 'd'), { signal }),
      service.invoke(params('missing'), { signal, batchable: true }).catch((e: unknown) => e),
    ]);
    // The busy one, the four batchable ones in one POST, the fifth alone.
    expect(await busy).toMatchObject({ valid: true });
    expect(posts() - before).toBe(3);
    expect(results[0]).toMatchObject({ valid: true });
    expect(results[1]).toMatchObject({ valid: false });
    expect(results[2]).toMatchObject({ valid: true });
    expect(results[3]).toMatchObject({ valid: true });
    expect(results[4]).toBeInstanceOf(ProtocolError);
    expect((results[4] as ProtocolError).code).toBe(-32602);
  });

  it('drops an invocation aborted before its batch goes out; a sent one settles with its batch', async () => {
    const { service, posts } = await connectedService();
    const signal = AbortSignal.timeout(5_000);
    // Aborted in the same turn, before the flush: refused, and not sent.
    const early = new AbortController();
    const before = posts();
    const dropped = service
      .invoke(params('observer', 'a'), { signal: early.signal, batchable: true })
      .catch((e: unknown) => e);
    const kept = service.invoke(params('observer', 'c'), { signal, batchable: true });
    early.abort(new Error('caller gave up'));
    expect(await dropped).toMatchObject({ message: 'caller gave up' });
    expect(await kept).toMatchObject({ valid: true });
    expect(posts() - before).toBe(1); // the survivor went alone
    // Aborted after the batch went out: it settles when the batch answers. (A batch forms
    // only while the service is busy: `busy` is in flight meanwhile.)
    const beforeBusy = posts();
    const busy = service.invoke(params('observer', 'slow'), { signal, batchable: true });
    await new Promise((resolve) => setImmediate(resolve));
    const late = new AbortController();
    const started = performance.now();
    const slow = service.invoke(params('observer', 'slow'), { signal, batchable: true });
    const mate = service.invoke(params('observer', 'a'), { signal: late.signal, batchable: true });
    setTimeout(() => late.abort(new Error('too late')), 50);
    expect(await mate).toMatchObject({ valid: true });
    expect(await slow).toMatchObject({ valid: true });
    expect(performance.now() - started).toBeGreaterThanOrEqual(390);
    expect(await busy).toMatchObject({ valid: true });
    expect(posts() - beforeBusy).toBe(2); // busy alone, then slow and mate as one batch
    // Already aborted: refused without a request.
    const gone = new AbortController();
    gone.abort(new Error('gone'));
    await expect(
      service.invoke(params('observer', 'a'), { signal: gone.signal, batchable: true }),
    ).rejects.toThrow('gone');
  });

  it('sends a lone batchable invocation as interceptor/invoke with its trace headers', async () => {
    const { service, traceparents } = await connectedService();
    traceparents.length = 0;
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const result = await service.invoke(params('observer', 'a'), {
      signal: AbortSignal.timeout(5_000),
      batchable: true,
      traceHeaders: { traceparent },
    });
    expect(result).toMatchObject({ valid: true });
    expect(traceparents).toEqual([traceparent]);
  });

  it('invokes one by one a server that does not declare the capability', async () => {
    const { url, methods } = await foreignService();
    const service = createRemoteService({ url });
    defer(() => service.close());
    expect((await service.connect()).invokeBatchLimit).toBe(0);
    methods.length = 0;
    const signal = AbortSignal.timeout(5_000);
    const results = await Promise.all(
      ['a', 'b', 'c'].map((t) =>
        service.invoke(params('observer', t), { signal, batchable: true }),
      ),
    );
    expect(methods).toEqual([
      InterceptorMethod.INVOKE,
      InterceptorMethod.INVOKE,
      InterceptorMethod.INVOKE,
    ]);
    for (const r of results) expect(r).toMatchObject({ valid: true });
  });

  it('fails every invocation of a batch the service refused as a whole with -32602, never rejected', async () => {
    const { url, methods } = await foreignService({ refuseBatches: true });
    const service = createRemoteService({ url });
    defer(() => service.close());
    expect((await service.connect()).invokeBatchLimit).toBe(8);
    // Three chains of one validator of that service, coalesced: one batch request.
    const [validator] = resolveService(
      'foreign',
      [
        parseInterceptorInfo({
          name: 'observer',
          type: 'validation',
          hooks: [{ events: ['tools/call'], phase: 'request' }],
        }),
      ],
      service,
    );
    if (!validator) throw new Error('no interceptor resolved');
    const plan = planChain([validator], 'tools/call', 'request');
    methods.length = 0;
    const results = await Promise.all(
      ['a', 'b', 'c'].map((text) =>
        runChain(plan, { payload: { name: 'echo', arguments: { text } } }, { coalesce: true }),
      ),
    );
    expect(methods).toEqual([InterceptorMethod.INVOKE_BATCH]);
    for (const result of results) {
      expect(result.status).toBe('validation_failed');
      expect(result.results).toEqual([
        expect.objectContaining({
          interceptor: 'observer',
          outcome: 'failed',
          error: { reason: 'batch_refused', code: -32602 },
        }),
      ]);
    }
    // What each item was rejected with says so, and carries the service's answer.
    const error = await Promise.all(
      ['a', 'b'].map((t) =>
        service.invoke(params('observer', t), {
          signal: AbortSignal.timeout(5_000),
          batchable: true,
        }),
      ),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as ProtocolError).data).toEqual({
      reason: 'batch_refused',
      items: 2,
      error: { code: -32602, message: 'Invalid params: too many invocations' },
    });
  });
});
