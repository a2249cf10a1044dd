/**
 * `HttpBackendTransport.call`, the gateway's own path for backend requests, against a real
 * HTTP server speaking Streamable HTTP: results and errors, progress routed to the call (and
 * restarting its timeout), other messages to the SDK client, cancellation told to the
 * backend on abort and on timeout, per-call headers and trace context on the POST.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { ErrorCode, type JSONRPCMessage, McpError } from '@modelcontextprotocol/sdk/types.js';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  type TextMapPropagator,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { createBackendAgent, HttpBackendTransport } from '../src/backend-transport.ts';
import { defer, listenLoopback } from './harness.ts';

interface Received {
  message: { id?: unknown; method?: string; params?: Record<string, unknown> };
  headers: IncomingMessage['headers'];
}

const sse = (res: ServerResponse, message: unknown) =>
  res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);

/** A scripted backend: what it answers depends on the method. */
async function scriptedBackend(maxMessageBytes?: number) {
  const received: Received[] = [];
  /** Requests whose response the client ended before the server did, by method. */
  const dropped: string[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c) => {
      text += c;
    });
    req.on('end', () => {
      const message = JSON.parse(text) as Received['message'];
      received.push({ message, headers: req.headers });
      const { id, method } = message;
      res.on('close', () => {
        if (!res.writableFinished) dropped.push(String(method));
      });
      if (id === undefined) {
        res.writeHead(202).end();
        return;
      }
      const json = (body: unknown): void => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      const token = (message.params?._meta as { progressToken?: unknown } | undefined)
        ?.progressToken;
      switch (method) {
        case 'echo':
          return json({ jsonrpc: '2.0', id, result: { echoed: message.params } });
        case 'fail':
          return json({
            jsonrpc: '2.0',
            id,
            error: { code: -32042, message: 'no', data: { x: 1 } },
          });
        case 'number':
          return json({ jsonrpc: '2.0', id, result: 42 });
        case 'big-json':
          return json({ jsonrpc: '2.0', id, result: { text: 'b'.repeat(200_000) } });
        case 'big-chunked': {
          // No content-length: the limit has to be found while reading.
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"text":"`);
          for (let i = 0; i < 20; i++) res.write('c'.repeat(10_000));
          return void res.end('"}}');
        }
        case 'big-event':
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          sse(res, {
            jsonrpc: '2.0',
            method: 'notifications/message',
            params: { level: 'info', data: 'before the big one' },
          });
          // One event written in pieces, never ended: the backend would go on for ever.
          res.write('event: message\ndata: {"jsonrpc":"2.0","result":{"text":"');
          for (let i = 0; i < 20; i++) res.write('d'.repeat(10_000));
          return;
        case 'stream':
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          sse(res, {
            jsonrpc: '2.0',
            method: 'notifications/progress',
            params: { progressToken: token, progress: 1, total: 2 },
          });
          sse(res, {
            jsonrpc: '2.0',
            method: 'notifications/message',
            params: { level: 'info', data: 'hi' },
          });
          sse(res, {
            jsonrpc: '2.0',
            method: 'notifications/progress',
            params: { progressToken: 'someone-else', progress: 9 },
          });
          sse(res, { jsonrpc: '2.0', id, result: { done: true } });
          return void res.end();
        case 'slow-progress': {
          // Progress every 60 ms for 4 rounds, then silence: longer than the 150 ms budget
          // in all, within it between two progress events.
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          let n = 0;
          const timer = setInterval(() => {
            if (++n > 4 || res.destroyed) return clearInterval(timer);
            sse(res, {
              jsonrpc: '2.0',
              method: 'notifications/progress',
              params: { progressToken: token, progress: n },
            });
          }, 60);
          res.on('close', () => clearInterval(timer));
          return;
        }
        case 'hang-json':
          // Never answers, not even with headers (as a backend answering in JSON would not
          // answer a call it was told is cancelled).
          return;
        default: // hang
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.flushHeaders();
      }
    });
  });
  const base = await listenLoopback(server);
  const agent = createBackendAgent();
  defer(() => agent.close());
  const transport = new HttpBackendTransport(new URL(`${base}/mcp`), {
    headers: { 'x-configured': 'yes' },
    dispatcher: agent,
    maxMessageBytes,
  });
  const others: JSONRPCMessage[] = [];
  transport.onmessage = (m) => others.push(m);
  await transport.start();
  defer(() => transport.close());
  const cancelled = () =>
    received
      .filter((r) => r.message.method === 'notifications/cancelled')
      .map((r) => r.message.params?.requestId);
  return { transport, received, others, cancelled, dropped };
}

describe('HttpBackendTransport.call', () => {
  it('resolves results, rejects JSON-RPC errors and non-object results', async () => {
    const { transport, received } = await scriptedBackend();
    const result = await transport.call('echo', { a: 1 }, { timeoutMs: 5_000 });
    expect(result).toEqual({ echoed: { a: 1 } });
    expect(received[0]?.message.id).toMatch(/^fleet-\d+$/);
    const error = await transport.call('fail', undefined, { timeoutMs: 5_000 }).catch((e) => e);
    expect(error).toBeInstanceOf(McpError);
    expect(error).toMatchObject({ code: -32042, data: { x: 1 } });
    await expect(transport.call('number', undefined, { timeoutMs: 5_000 })).rejects.toMatchObject({
      code: ErrorCode.InternalError,
    });
  });

  it('carries many concurrent calls without a listener-leak warning', async () => {
    const { transport } = await scriptedBackend();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    defer(async () => {
      process.off('warning', onWarning);
    });
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => transport.call('echo', { i }, { timeoutMs: 5_000 })),
    );
    expect(results.map((r) => (r as { echoed: { i: number } }).echoed.i)).toEqual(
      Array.from({ length: 40 }, (_, i) => i),
    );
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });

  it('routes its own progress to the call and everything else to the SDK client', async () => {
    const { transport, others, received } = await scriptedBackend();
    const progress: unknown[] = [];
    const result = await transport.call(
      'stream',
      { _meta: { custom: 1 } },
      { timeoutMs: 5_000, onprogress: (p) => progress.push(p) },
    );
    expect(result).toEqual({ done: true });
    expect(progress).toEqual([{ progress: 1, total: 2 }]);
    // The request carried the call's own token, next to the caller's _meta.
    const sent = received[0]?.message.params?._meta as Record<string, unknown>;
    expect(sent).toEqual({ custom: 1, progressToken: received[0]?.message.id });
    expect(others.map((m) => (m as { method?: string }).method)).toEqual([
      'notifications/message',
      'notifications/progress',
    ]);
  });

  it('times out (progress restarts the budget) and tells the backend', async () => {
    const { transport, cancelled, received } = await scriptedBackend();
    const started = performance.now();
    const progress: unknown[] = [];
    const error = await transport
      .call('slow-progress', {}, { timeoutMs: 150, onprogress: (p) => progress.push(p) })
      .catch((e) => e);
    const elapsed = performance.now() - started;
    expect(error).toMatchObject({ code: ErrorCode.RequestTimeout, data: { timeout: 150 } });
    expect(progress).toHaveLength(4);
    expect(elapsed).toBeGreaterThanOrEqual(240 + 150 - 20); // 4 progress events, then the budget
    await expect.poll(cancelled).toEqual([received[0]?.message.id]);
  });

  it('rejects at once when its signal aborts, and tells the backend', async () => {
    const { transport, cancelled, received } = await scriptedBackend();
    const controller = new AbortController();
    setTimeout(() => controller.abort('client gave up'), 50);
    const error = await transport
      .call('hang', {}, { timeoutMs: 5_000, signal: controller.signal })
      .catch((e) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).message).toContain('client gave up');
    await expect.poll(cancelled).toEqual([received[0]?.message.id]);
    const gone = new AbortController();
    gone.abort('gone');
    await expect(
      transport.call('echo', {}, { timeoutMs: 5_000, signal: gone.signal }),
    ).rejects.toBeInstanceOf(McpError);
    expect(received.filter((r) => r.message.method === 'echo')).toEqual([]);
  });

  it("ends a cancelled or timed-out call's POST, which the backend will not answer", async () => {
    const { transport, cancelled, received, dropped, others } = await scriptedBackend();
    const errors: Error[] = [];
    transport.onerror = (e) => errors.push(e);
    const controller = new AbortController();
    const calls = [
      transport.call('hang', {}, { timeoutMs: 5_000, signal: controller.signal }),
      transport.call('hang-json', {}, { timeoutMs: 5_000, signal: controller.signal }),
      transport.call('hang', {}, { timeoutMs: 100 }),
    ];
    await expect.poll(() => received.length).toBe(3);
    controller.abort('client gave up');
    for (const call of calls) await expect(call).rejects.toBeInstanceOf(McpError);
    await expect.poll(cancelled).toHaveLength(3);
    // The server saw each response ended by the client: no connection held for it.
    await expect.poll(() => [...dropped].sort()).toEqual(['hang', 'hang', 'hang-json']);
    // Ended on purpose: neither reported as a failure nor handed to the SDK client.
    expect(errors).toEqual([]);
    expect(others).toEqual([]);
    // And the transport carries on.
    await expect(transport.call('echo', { a: 2 }, { timeoutMs: 5_000 })).resolves.toEqual({
      echoed: { a: 2 },
    });
  });

  it("sends the call's headers and trace context with the configured ones", async () => {
    // A minimal W3C injector: what matters is which context the transport injects.
    const w3c: TextMapPropagator = {
      inject(ctx, carrier, setter) {
        const sc = trace.getSpanContext(ctx);
        if (sc)
          setter.set(carrier, 'traceparent', `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags & 1}`);
      },
      extract: (ctx) => ctx,
      fields: () => ['traceparent'],
    };
    propagation.setGlobalPropagator(w3c);
    defer(async () => propagation.disable());
    const { transport, received } = await scriptedBackend();
    const span = trace.wrapSpanContext({
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      traceFlags: TraceFlags.SAMPLED,
    });
    await transport.call(
      'echo',
      {},
      {
        timeoutMs: 5_000,
        headers: { 'mcp-param-region': 'eu' },
        trace: trace.setSpan(ROOT_CONTEXT, span),
      },
    );
    const headers = received[0]?.headers ?? {};
    expect(headers['mcp-param-region']).toBe('eu');
    expect(headers['x-configured']).toBe('yes');
    expect(headers.traceparent).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    expect(context.active()).toBe(ROOT_CONTEXT);
  });

  it('fails a call whose answer is over maxMessageBytes (JSON, chunked, one event)', async () => {
    const { transport, others } = await scriptedBackend(64 * 1024);
    for (const method of ['big-json', 'big-chunked', 'big-event']) {
      const error = await transport.call(method, undefined, { timeoutMs: 5_000 }).catch((e) => e);
      expect(error, method).toBeInstanceOf(McpError);
      expect(error, method).toMatchObject({
        code: ErrorCode.InternalError,
        data: { reason: 'limit_exceeded', limit: 'maxBackendMessageBytes', max: 65536 },
      });
      expect(error.message).toContain('more than 65536 bytes');
    }
    // What came before the oversized event still arrived; the transport goes on serving.
    expect(others).toContainEqual(
      expect.objectContaining({ params: { level: 'info', data: 'before the big one' } }),
    );
    expect(await transport.call('echo', { a: 2 }, { timeoutMs: 5_000 })).toEqual({
      echoed: { a: 2 },
    });
  });
});
