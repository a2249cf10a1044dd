/**
 * A kit-built interceptor server answers a client written directly with the MCP SDK (no
 * kit code on the client side), over real HTTP and over stdio.
 */
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { allow, defineMutator, defineValidator, deny, modified, unchanged } from '../src/index.ts';
import { defer, serveInterceptors } from './helpers.ts';

const AnyResult = z.object({}).passthrough();

const interceptors = [
  defineValidator({
    name: 'no-secrets',
    description: 'Blocks arguments that contain "secret"',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: (payload) =>
      JSON.stringify(payload).includes('secret')
        ? deny('argument contains a secret', { path: 'arguments' })
        : allow(),
  }),
  defineMutator({
    name: 'upper',
    hooks: [
      { events: ['tools/*'], phase: 'request' },
      { events: ['tools/*'], phase: 'response' },
    ],
    priorityHint: { request: -5 },
    handler: (payload) => {
      const p = payload as { arguments?: { note?: string } };
      if (typeof p.arguments?.note !== 'string') return unchanged();
      return modified(
        { ...p, arguments: { ...p.arguments, note: p.arguments.note.toUpperCase() } },
        { changed: 1 },
      );
    },
  }),
  defineValidator({
    name: 'explodes',
    hooks: [{ events: ['*'], phase: 'request' }],
    handler: () => {
      throw new Error('kaboom');
    },
  }),
  defineValidator({
    name: 'sleepy',
    hooks: [{ events: ['*'], phase: 'request' }],
    handler: (_payload, { signal }) =>
      new Promise((resolve) => {
        const timer = setTimeout(() => resolve(allow()), 5000);
        signal.addEventListener('abort', () => clearTimeout(timer));
      }),
  }),
];

async function sdkClient(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'stock-sdk-client', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }),
  );
  defer(() => client.close());
  return client;
}

async function rpcError(promise: Promise<unknown>): Promise<McpError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(McpError);
    return error as McpError;
  }
  throw new Error('expected a JSON-RPC error');
}

describe('kit server with a stock MCP SDK client over Streamable HTTP', () => {
  it('declares the interceptors capability under extensions and experimental', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    const capabilities = client.getServerCapabilities() as Record<string, Record<string, unknown>>;
    const expected = { supportedEvents: ['*', 'tools/*', 'tools/call'] };
    expect(capabilities.extensions?.['io.modelcontextprotocol/interceptors']).toEqual(expected);
    expect(capabilities.experimental?.['io.modelcontextprotocol/interceptors']).toEqual(expected);
    expect(client.getServerVersion()?.name).toBe('test-interceptors');
  });

  it('lists interceptors, filtered by event with wildcard hooks honoured', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    const all = await client.request({ method: 'interceptors/list', params: {} }, AnyResult);
    expect((all.interceptors as Array<{ name: string }>).map((i) => i.name)).toEqual([
      'no-secrets',
      'upper',
      'explodes',
      'sleepy',
    ]);
    const list = await client.request(
      { method: 'interceptors/list', params: { event: 'tools/list' } },
      AnyResult,
    );
    expect((list.interceptors as Array<{ name: string }>).map((i) => i.name)).toEqual([
      'upper',
      'explodes',
      'sleepy',
    ]);
    const none = await client.request(
      { method: 'interceptors/list', params: { event: 'prompts/get' } },
      AnyResult,
    );
    expect((none.interceptors as Array<{ name: string }>).map((i) => i.name)).toEqual([
      'explodes',
      'sleepy',
    ]);
    const upper = (all.interceptors as Array<Record<string, unknown>>)[1];
    expect(upper).toEqual({
      name: 'upper',
      type: 'mutation',
      hooks: [
        { events: ['tools/*'], phase: 'request' },
        { events: ['tools/*'], phase: 'response' },
      ],
      priorityHint: { request: -5 },
    });
  });

  it('rejects a wildcard as the list event filter with -32602', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    const error = await rpcError(
      client.request({ method: 'interceptors/list', params: { event: '*' } }, AnyResult),
    );
    expect(error.code).toBe(-32602);
  });

  it('invokes a validator and a mutator', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    const denied = await client.request(
      {
        method: 'interceptor/invoke',
        params: {
          name: 'no-secrets',
          event: 'tools/call',
          phase: 'request',
          payload: { name: 'x', arguments: { a: 'my secret' } },
        },
      },
      AnyResult,
    );
    expect(denied).toMatchObject({
      interceptor: 'no-secrets',
      type: 'validation',
      phase: 'request',
      valid: false,
      severity: 'error',
      messages: [{ path: 'arguments', message: 'argument contains a secret', severity: 'error' }],
    });
    expect(typeof denied.durationMs).toBe('number');
    const mutated = await client.request(
      {
        method: 'interceptor/invoke',
        params: {
          name: 'upper',
          event: 'tools/call',
          phase: 'response',
          payload: { arguments: { note: 'hi' } },
        },
      },
      AnyResult,
    );
    expect(mutated).toMatchObject({
      interceptor: 'upper',
      type: 'mutation',
      modified: true,
      payload: { arguments: { note: 'HI' } },
      info: { changed: 1 },
    });
    const same = await client.request(
      {
        method: 'interceptor/invoke',
        params: { name: 'upper', event: 'tools/list', phase: 'request', payload: { cursor: 'c' } },
      },
      AnyResult,
    );
    expect(same).toMatchObject({ modified: false, payload: { cursor: 'c' } });
  });

  it('answers malformed params with -32602 naming the field', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    const error = await rpcError(
      client.request(
        {
          method: 'interceptor/invoke',
          params: { name: 'upper', event: 'tools/call', phase: 'sideways', payload: {} },
        },
        AnyResult,
      ),
    );
    expect(error.code).toBe(-32602);
    expect(error.data).toMatchObject({
      name: 'upper',
      issues: [expect.objectContaining({ path: 'phase' })],
    });
  });

  it('answers an unknown name with -32602, data.name and data.reason "unknown_interceptor"', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    const error = await rpcError(
      client.request(
        {
          method: 'interceptor/invoke',
          params: { name: 'ghost', event: 'tools/call', phase: 'request', payload: {} },
        },
        AnyResult,
      ),
    );
    expect(error.code).toBe(-32602);
    // The reason tells a gateway its registry is out of date, not that the params are bad.
    expect(error.data).toEqual({ name: 'ghost', reason: 'unknown_interceptor' });
  });

  it('answers a hook the interceptor does not advertise with -32602', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    const error = await rpcError(
      client.request(
        {
          method: 'interceptor/invoke',
          params: { name: 'no-secrets', event: 'tools/call', phase: 'response', payload: {} },
        },
        AnyResult,
      ),
    );
    expect(error.code).toBe(-32602);
    expect(error.data).toMatchObject({
      name: 'no-secrets',
      event: 'tools/call',
      phase: 'response',
      advertisedHooks: [{ events: ['tools/call'], phase: 'request' }],
    });
  });

  it('answers a throwing handler with -32603 {interceptor, reason}', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    const error = await rpcError(
      client.request(
        {
          method: 'interceptor/invoke',
          params: { name: 'explodes', event: 'tools/call', phase: 'request', payload: {} },
        },
        AnyResult,
      ),
    );
    expect(error.code).toBe(-32603);
    expect(error.data).toEqual({ interceptor: 'explodes', reason: 'kaboom' });
  });

  it('answers a handler slower than timeoutMs with -32603 {reason: timeout}', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    const started = Date.now();
    const error = await rpcError(
      client.request(
        {
          method: 'interceptor/invoke',
          params: {
            name: 'sleepy',
            event: 'tools/call',
            phase: 'request',
            payload: {},
            timeoutMs: 100,
          },
        },
        AnyResult,
      ),
    );
    expect(error.code).toBe(-32603);
    expect(error.data).toEqual({
      interceptor: 'sleepy',
      reason: 'timeout',
      timeoutMs: 100,
      phase: 'request',
    });
    expect(Date.now() - started).toBeLessThan(4000);
  });

  it('answers ping and rejects unknown methods', async () => {
    const { url } = await serveInterceptors(interceptors);
    const client = await sdkClient(url);
    await expect(client.ping()).resolves.toBeDefined();
    const error = await rpcError(client.request({ method: 'tools/list', params: {} }, AnyResult));
    expect(error.code).toBe(-32601);
  });

  it('requires the bearer token when one is configured', async () => {
    const { url } = await serveInterceptors(interceptors, { token: 's3cret' });
    await expect(sdkClient(url)).rejects.toThrow();
    await expect(sdkClient(url, { authorization: 'Bearer wrong' })).rejects.toThrow();
    const client = await sdkClient(url, { authorization: 'Bearer s3cret' });
    const list = await client.request({ method: 'interceptors/list', params: {} }, AnyResult);
    expect(list.interceptors).toHaveLength(4);
  });
});

describe('kit server over stdio with a stock MCP SDK client', () => {
  it('lists and invokes', async () => {
    const script = fileURLToPath(new URL('./fixtures/stdio-server.ts', import.meta.url));
    const tsx = fileURLToPath(new URL('../../../node_modules/.bin/tsx', import.meta.url));
    const transport = new StdioClientTransport({
      command: tsx,
      args: ['--conditions=@fleet/source', script],
      stderr: 'pipe',
    });
    const client = new Client({ name: 'stock-sdk-client', version: '1.0.0' });
    await client.connect(transport);
    defer(() => client.close());
    const caps = client.getServerCapabilities() as Record<string, Record<string, unknown>>;
    expect(caps.extensions?.['io.modelcontextprotocol/interceptors']).toEqual({
      supportedEvents: ['tools/call'],
    });
    const list = await client.request({ method: 'interceptors/list', params: {} }, AnyResult);
    expect((list.interceptors as Array<{ name: string }>).map((i) => i.name)).toEqual(['shout']);
    const result = await client.request(
      {
        method: 'interceptor/invoke',
        params: { name: 'shout', event: 'tools/call', phase: 'request', payload: { text: 'hey' } },
      },
      AnyResult,
    );
    expect(result).toMatchObject({ modified: true, payload: { text: 'HEY' } });
    const error = await rpcError(
      client.request(
        {
          method: 'interceptor/invoke',
          params: { name: 'nope', event: 'tools/call', phase: 'request', payload: {} },
        },
        AnyResult,
      ),
    );
    expect([error.code, error.data]).toEqual([
      -32602,
      { name: 'nope', reason: 'unknown_interceptor' },
    ]);
  });
});
