/**
 * The kit's remote client against a stock MCP SDK server (no kit code on the server side):
 * stateful sessions, SSE responses, trace context; plus the lean path's handling of
 * hostile HTTP input.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FleetError, ProtocolError } from '@fleet/core';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  allow,
  createRemoteService,
  defineValidator,
  formatTraceparent,
  parseTraceparent,
} from '../src/index.ts';
import { defer, serveInterceptors } from './helpers.ts';

interface Seen {
  headers: IncomingMessage['headers'];
  params: Record<string, unknown>;
}

/** A stateful MCP SDK server that answers SSE (enableJsonResponse off) and records what it saw. */
async function stockStatefulServer(seen: Seen[]) {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const build = () => {
    const server = new Server(
      { name: 'stock', version: '1.0.0' },
      {
        capabilities: {
          experimental: {
            'io.modelcontextprotocol/interceptors': { supportedEvents: ['tools/call'] },
          },
        },
      },
    );
    let current: IncomingMessage | undefined;
    server.setRequestHandler(
      z.object({ method: z.literal('interceptors/list'), params: z.unknown().optional() }),
      async () => ({
        // Go-style descriptor: singular hook, phase both, mode "".
        interceptors: [
          {
            name: 'go-style',
            type: 'validation',
            hook: { events: ['tools/call'], phase: 'both' },
            mode: '',
            priorityHint: 0,
          },
        ],
      }),
    );
    server.setRequestHandler(
      z.object({
        method: z.literal('interceptor/invoke'),
        params: z.record(z.string(), z.unknown()),
      }),
      async (request) => {
        seen.push({ headers: current?.headers ?? {}, params: request.params });
        // Go-style nested result.
        return {
          interceptor: 'go-style',
          type: 'validation',
          phase: request.params.phase,
          durationMs: 0,
          validation: {
            valid: false,
            severity: 'warn',
            messages: [{ message: 'hm', severity: 'warn' }],
          },
        };
      },
    );
    return {
      server,
      setCurrent: (req: IncomingMessage) => {
        current = req;
      },
    };
  };
  const http = createServer(async (req, res) => {
    const sid = req.headers['mcp-session-id'];
    let transport = typeof sid === 'string' ? transports.get(sid) : undefined;
    if (!transport) {
      if (typeof sid === 'string') {
        res.writeHead(404).end();
        return;
      }
      const { server, setCurrent } = build();
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          if (transport) transports.set(id, transport);
        },
      });
      (transport as unknown as { setCurrent: typeof setCurrent }).setCurrent = setCurrent;
      await server.connect(transport);
    }
    (transport as unknown as { setCurrent: (r: IncomingMessage) => void }).setCurrent(req);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  defer(async () => {
    for (const t of transports.values()) await t.close();
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  });
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, transports };
}

describe('remote client against a stock stateful SDK server', () => {
  it('handshakes, keeps the session, reads Go-style shapes from SSE responses and sends trace context', async () => {
    const seen: Seen[] = [];
    const { url, transports } = await stockStatefulServer(seen);
    const service = createRemoteService({ url });
    defer(() => service.close());
    const handshake = await service.connect();
    expect(handshake.interceptorsCapability).toBe(true);
    expect(handshake.sessionId).toBeDefined();
    expect(handshake.serverInfo?.name).toBe('stock');

    const { interceptors } = await service.list('tools/call');
    expect(interceptors).toEqual([
      {
        name: 'go-style',
        type: 'validation',
        priorityHint: 0,
        hooks: [
          { events: ['tools/call'], phase: 'request' },
          { events: ['tools/call'], phase: 'response' },
        ],
      },
    ]);

    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const raw = await service.invoke(
      {
        name: 'go-style',
        event: 'tools/call',
        phase: 'request',
        payload: {},
        context: { traceId, spanId: '00f067aa0ba902b7' },
      },
      { signal: AbortSignal.timeout(5000) },
    );
    expect(raw).toMatchObject({ validation: { valid: false } });
    expect(seen).toHaveLength(1);
    const first = seen[0];
    if (first === undefined) throw new Error('the server saw no invoke');
    const header = parseTraceparent(first.headers.traceparent);
    expect(header?.traceId).toBe(traceId);
    expect((first.params._meta as { traceparent?: string }).traceparent).toBe(
      formatTraceparent(traceId, '00f067aa0ba902b7'),
    );
    expect((first.params.context as { timestamp?: string }).timestamp).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(seen[0]?.headers['mcp-session-id']).toBe(handshake.sessionId);
    expect(seen[0]?.headers['mcp-protocol-version']).toBe(handshake.protocolVersion);

    // The server forgets the session: the client handshakes again and retries once.
    for (const t of transports.values()) await t.close();
    transports.clear();
    await service.invoke(
      { name: 'go-style', event: 'tools/call', phase: 'request', payload: {} },
      { signal: AbortSignal.timeout(5000) },
    );
    expect(seen).toHaveLength(2);
    expect(seen[1]?.headers['mcp-session-id']).not.toBe(handshake.sessionId);
  });

  it('reports a server that is not an MCP server', async () => {
    const http = createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html>hi</html>'),
    );
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    defer(async () => {
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    });
    const service = createRemoteService({
      url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    });
    defer(() => service.close());
    const error = await service.connect().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FleetError);
    expect((error as FleetError).code).toBe('NOT_AN_INTERCEPTOR_SERVER');
  });

  it('surfaces JSON-RPC errors as ProtocolError and bad credentials as UNAUTHORIZED', async () => {
    const { url } = await serveInterceptors(
      [
        defineValidator({
          name: 'v',
          hooks: [{ events: ['*'], phase: 'request' }],
          handler: () => allow(),
        }),
      ],
      { token: 't0ken' },
    );
    const good = createRemoteService({ url, token: 't0ken' });
    const bad = createRemoteService({ url, token: 'nope' });
    defer(() => good.close());
    defer(() => bad.close());
    const error = await good
      .invoke(
        { name: 'missing', event: 'tools/call', phase: 'request', payload: {} },
        { signal: AbortSignal.timeout(5000) },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProtocolError);
    expect([(error as ProtocolError).code, (error as ProtocolError).data]).toEqual([
      -32602,
      { name: 'missing', reason: 'unknown_interceptor' },
    ]);
    const denied = await bad.connect().catch((e: unknown) => e);
    expect((denied as FleetError).code).toBe('UNAUTHORIZED');
  });

  it('cancels an in-flight invocation when the signal aborts', async () => {
    let sawAbort = false;
    const { url } = await serveInterceptors([
      defineValidator({
        name: 'hang',
        hooks: [{ events: ['*'], phase: 'request' }],
        handler: (_p, { signal }) =>
          new Promise((resolve) => {
            signal.addEventListener('abort', () => {
              sawAbort = true;
              resolve(allow());
            });
          }),
      }),
    ]);
    const service = createRemoteService({ url });
    defer(() => service.close());
    await service.connect();
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('caller gave up')), 50);
    await expect(
      service.invoke(
        { name: 'hang', event: 'tools/call', phase: 'request', payload: {} },
        { signal: controller.signal },
      ),
    ).rejects.toThrow('caller gave up');
    await new Promise((r) => setTimeout(r, 100));
    expect(sawAbort).toBe(true);
  });
});

describe('lean path with hostile HTTP input', () => {
  async function post(base: string, body: string, headers: Record<string, string> = {}) {
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body,
    });
    return {
      status: res.status,
      body: (await res.json()) as {
        jsonrpc: string;
        id?: unknown;
        error?: { code: number; message: string };
      },
    };
  }
  const list = JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'interceptors/list', params: {} });

  it.each([
    ['invalid JSON', '{"jsonrpc":', {}, 400, -32700],
    ['a batch', `[${list}]`, {}, 400, -32600],
    ['a non-object message', '42', {}, 400, -32600],
    [
      'a wrong jsonrpc version',
      JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'interceptors/list' }),
      {},
      400,
      -32600,
    ],
    ['a wrong content type', list, { 'content-type': 'text/plain' }, 415, -32600],
    [
      'an unsupported protocol version',
      list,
      { 'mcp-protocol-version': '1999-01-01' },
      400,
      -32022,
    ],
    [
      'an oversized body',
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'interceptor/invoke',
        params: { payload: 'x'.repeat(70_000) },
      }),
      {},
      413,
      -32600,
    ],
  ])('%s gets HTTP %#', async (_what, body, headers, status, code) => {
    const { base } = await serveInterceptors([], { maxBodyBytes: 65_536 });
    const res = await post(base, body, headers);
    expect(res.status).toBe(status);
    expect(res.body.jsonrpc).toBe('2.0');
    expect(res.body.error?.code).toBe(code);
    expect(res.body).not.toHaveProperty('id', null);
    // The service still answers the next good request.
    const ok = await post(base, list);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ jsonrpc: '2.0', id: 0, result: { interceptors: [] } });
  });

  it('serves health and readiness', async () => {
    let ready = false;
    const { base } = await serveInterceptors([], { ready: () => ready });
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(503);
    ready = true;
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
  });
});
