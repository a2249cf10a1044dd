import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import {
  allow,
  createRemoteService,
  defineMutator,
  defineValidator,
  ExchangeTimeout,
  modified,
  postBuffered,
  ResponseTooLarge,
} from '../src/index.ts';
import { defer, serveInterceptors } from './helpers.ts';

/** A node:http server on a free loopback port that counts requests and answers via `handle`. */
async function server(handle: (req: IncomingMessage, res: ServerResponse) => void) {
  const seen: string[] = [];
  const closed: string[] = [];
  const srv = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      seen.push(body);
      res.on('close', () => closed.push(body));
      handle(req, res);
    });
  });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  defer(async () => {
    srv.closeAllConnections();
    await new Promise((resolve) => srv.close(resolve));
  });
  const pool = new Pool(`http://127.0.0.1:${(srv.address() as AddressInfo).port}`, {
    connections: 1,
  });
  defer(() => pool.close());
  return { pool, seen, closed };
}

const post = (
  body: string,
  extra: { signal?: AbortSignal; maxBytes?: number; timeoutMs?: number } = {},
) => ({
  path: '/x?y=1',
  headers: { 'content-type': 'application/json', 'x-probe': 'p' },
  body,
  ...extra,
});

/**
 * A one-connection pool whose connection is held by a first request (answered 'done' on
 * `release()`; later requests get 'ok'), so the next request waits in the queue.
 */
async function occupied() {
  let release: (() => void) | undefined;
  const { pool, seen } = await server((_req, res) => {
    if (release) res.end('ok');
    else release = () => res.end('done');
  });
  const first = postBuffered(pool, post('first'));
  await expect.poll(() => seen).toEqual(['first']);
  return { pool, seen, first, release: () => release?.() };
}

describe('postBuffered', () => {
  it('resolves with the status, lower-case headers and the whole body sent in chunks', async () => {
    const { pool, seen } = await server((req, res) => {
      res.writeHead(201, {
        'X-Echo': String(req.headers['x-probe']),
        'content-type': 'text/plain',
      });
      res.write('é'.repeat(40_000)); // multi-byte characters split across chunks
      setTimeout(() => res.end(`${req.url}`), 10);
    });
    const answer = await postBuffered(pool, post('{"a":1}'));
    expect(answer.status).toBe(201);
    expect(answer.headers['x-echo']).toBe('p');
    expect(answer.text).toBe(`${'é'.repeat(40_000)}/x?y=1`);
    expect(seen).toEqual(['{"a":1}']);
  });

  it('rejects with the signal reason mid-exchange and drops the connection', async () => {
    const { pool, closed } = await server(() => {
      // Never answers.
    });
    const controller = new AbortController();
    const pending = postBuffered(pool, post('held', { signal: controller.signal }));
    await expect.poll(() => pool.stats.running).toBe(1);
    controller.abort(new Error('caller gave up'));
    await expect(pending).rejects.toThrow('caller gave up');
    await expect.poll(() => closed).toEqual(['held']);
  });

  it('rejects at once when aborted while queued for a connection, and never sends it', async () => {
    const { pool, seen, first, release } = await occupied();
    const controller = new AbortController();
    const queued = postBuffered(pool, post('queued', { signal: controller.signal }));
    controller.abort(new Error('not any more'));
    await expect(queued).rejects.toThrow('not any more');
    release();
    expect((await first).text).toBe('done');
    // The one connection is free again and the aborted request was never written to it.
    expect((await postBuffered(pool, post('after'))).status).toBe(200);
    expect(seen).toEqual(['first', 'after']);
  });

  it('rejects an already-aborted signal without sending anything', async () => {
    const { pool, seen } = await server((_req, res) => res.end('x'));
    await expect(
      postBuffered(pool, post('never', { signal: AbortSignal.abort(new Error('early')) })),
    ).rejects.toThrow('early');
    expect((await postBuffered(pool, post('later'))).text).toBe('x');
    expect(seen).toEqual(['later']);
  });

  it('stops reading past maxBytes with ResponseTooLarge', async () => {
    const { pool, closed } = await server((_req, res) => {
      res.write('a'.repeat(600));
      res.write('b'.repeat(600)); // kept open: the caller must not wait for the end
    });
    const error = await postBuffered(pool, post('big', { maxBytes: 1000 })).catch((e) => e);
    expect(error).toBeInstanceOf(ResponseTooLarge);
    expect((error as ResponseTooLarge).limit).toBe(1000);
    await expect.poll(() => closed).toEqual(['big']);
  });

  it('gives up after timeoutMs with ExchangeTimeout and drops the connection', async () => {
    const { pool, closed } = await server((_req, res) => {
      res.write('partial'); // headers and a first chunk, then silence
    });
    const started = performance.now();
    const error = await postBuffered(pool, post('slow', { timeoutMs: 150 })).catch((e) => e);
    expect(error).toBeInstanceOf(ExchangeTimeout);
    expect((error as ExchangeTimeout).timeoutMs).toBe(150);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    await expect.poll(() => closed).toEqual(['slow']);
  });

  it("waits out a timeoutMs past setTimeout's 32-bit range instead of giving up after 1 ms", async () => {
    const { pool } = await server((_req, res) => {
      setTimeout(() => res.end('late'), 50);
    });
    const answer = await postBuffered(pool, post('long', { timeoutMs: 3_000_000_000 }));
    expect(answer.text).toBe('late');
  });

  it('times out a request still queued for a connection without ever sending it', async () => {
    const { pool, seen, first, release } = await occupied();
    await expect(postBuffered(pool, post('queued', { timeoutMs: 50 }))).rejects.toBeInstanceOf(
      ExchangeTimeout,
    );
    release();
    await first;
    expect((await postBuffered(pool, post('after'))).text).toBe('ok');
    expect(seen).toEqual(['first', 'after']);
  });

  it("passes on undici's error when nothing listens", async () => {
    const pool = new Pool('http://127.0.0.1:1');
    defer(() => pool.close());
    await expect(postBuffered(pool, post('x'))).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});

describe('remote service answer size', () => {
  it('turns an answer over maxResponseBytes into a transport error naming the service', async () => {
    const { url } = await serveInterceptors([
      defineMutator({
        name: 'inflate',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => modified({ name: 'echo', arguments: { text: 'x'.repeat(5000) } }),
      }),
      defineValidator({
        name: 'small',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => allow(),
      }),
    ]);
    const remote = createRemoteService({ url, maxResponseBytes: 4096 });
    defer(() => remote.close());
    const params = (name: string) => ({
      name,
      event: 'tools/call',
      phase: 'request' as const,
      payload: { name: 'echo', arguments: { text: 'hi' } },
    });
    const signal = AbortSignal.timeout(5000);
    await expect(remote.invoke(params('inflate'), { signal })).rejects.toMatchObject({
      code: 'TRANSPORT_ERROR',
      message: `${url} answered with more than 4096 bytes`,
    });
    // The service and the connection pool stay usable.
    await expect(remote.invoke(params('small'), { signal })).resolves.toMatchObject({
      valid: true,
    });
  });
});
