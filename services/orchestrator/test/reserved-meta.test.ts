/**
 * Reserved `_meta` keys (`io.modelcontextprotocol/...` and the other MCP prefixes) are
 * stripped where a message crosses the gateway, in both directions: a client's never reach
 * a backend, a backend's never reach a client as if the gateway had said them. Progress
 * tokens, W3C trace context and custom keys pass; the gateway adds its own serverInfo to
 * stateless results.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, startGateway, waitFor } from './harness.ts';
import { startMirrorBackend } from './mirror-backend.ts';
import { modernMeta, postModern } from './raw-http.ts';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
// Reserved keys a session request may carry (other io.modelcontextprotocol/ keys would make
// it a stateless request, see stateless.test.ts).
const CLIENT_META = {
  'io.modelcontextprotocol/related-task': { taskId: 'client-task' },
  'modelcontextprotocol.io/x': 1,
  'mcp.dev/claim': true,
  traceparent: TRACEPARENT,
  tracestate: 'vendor=1',
  baggage: 'tenant=acme',
  'com.example/custom': 'kept',
};

async function setup() {
  const backend = await startMirrorBackend();
  const gateway = await startGateway(`backends:\n  - {id: mirror, url: "${backend.url}"}\n`, {
    redis: false,
  });
  return { backend, gateway };
}

describe('reserved _meta keys, client → backend', () => {
  it('strips them from a session request and keeps progress, trace context and custom keys', async () => {
    const { gateway, backend } = await setup();
    const client = await connectClient(gateway.mcpUrl);
    await client.callTool({ name: 'meta', arguments: {}, _meta: CLIENT_META }, undefined, {
      onprogress: () => undefined,
    });
    expect(backend.calls[0]?.meta).toEqual({
      progressToken: expect.anything(),
      traceparent: TRACEPARENT,
      tracestate: 'vendor=1',
      baggage: 'tenant=acme',
      'com.example/custom': 'kept',
    });
  });

  it('strips a stateless request’s protocol metadata before the backend', async () => {
    const { gateway, backend } = await setup();
    const reply = await postModern(
      gateway.mcpUrl,
      'tools/call',
      { name: 'meta', arguments: {} },
      { meta: { traceparent: TRACEPARENT, 'com.example/custom': 'kept' } },
    );
    expect(reply.status).toBe(200);
    expect(backend.calls[0]?.meta).toEqual({
      traceparent: TRACEPARENT,
      'com.example/custom': 'kept',
    });
  });
});

describe('reserved _meta keys, backend → client', () => {
  it('strips them from results and notifications a session receives', async () => {
    const { gateway } = await setup();
    const client = await connectClient(gateway.mcpUrl);
    const logs: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logs.push(n.params._meta);
    });
    const progress: unknown[] = [];
    const result = await client.callTool({ name: 'meta', arguments: {} }, undefined, {
      onprogress: (p) => progress.push((p as { _meta?: unknown })._meta),
    });
    expect(result._meta).toEqual({ 'com.example/kept': 'yes' });
    await waitFor(() => logs.length === 1 && progress.length === 1, 2000, 'notifications');
    expect(logs).toEqual([{ 'com.example/kept': 'yes' }]);
    expect(progress).toEqual([{ 'com.example/kept': 'yes' }]);
  });

  it('gives a stateless client the gateway’s serverInfo, never the backend’s', async () => {
    const { gateway } = await setup();
    const reply = await postModern(
      gateway.mcpUrl,
      'tools/call',
      { name: 'meta', arguments: {} },
      { meta: { progressToken: 7, 'io.modelcontextprotocol/logLevel': 'debug' } },
    );
    expect(reply.json.result?._meta).toEqual({
      'com.example/kept': 'yes',
      'io.modelcontextprotocol/serverInfo': { name: 'interceptor-fleet', version: '0.1.0' },
    });
    const notifications = reply.events.filter((e) => e.method !== undefined);
    expect(notifications.map((e) => [e.method, e.params?._meta])).toEqual([
      ['notifications/message', { 'com.example/kept': 'yes' }],
      ['notifications/progress', { 'com.example/kept': 'yes' }],
    ]);
  });

  it('strips them from a backend’s sampling request, and from the client’s answer', async () => {
    const { gateway } = await setup();
    const client = new Client(
      { name: 'sampler', version: '1' },
      { capabilities: { sampling: {} } },
    );
    const asked: unknown[] = [];
    client.setRequestHandler(CreateMessageRequestSchema, (request) => {
      asked.push(request.params._meta);
      return {
        role: 'assistant',
        model: 'm',
        content: { type: 'text', text: 'ok' },
        _meta: { 'io.modelcontextprotocol/related-task': { taskId: 'c' }, 'com.example/a': 1 },
      };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(gateway.mcpUrl)));
    defer(() => client.close());
    const result = await client.callTool({ name: 'ask', arguments: {} });
    expect(asked).toEqual([{ 'com.example/kept': 'yes' }]);
    expect(result.structuredContent).toEqual({ answerMeta: { 'com.example/a': 1 } });
  });
});

describe('stateless requests carry their metadata only to the gateway', () => {
  it('accepts reserved keys the client sends with the required ones, and forwards none', async () => {
    const { gateway, backend } = await setup();
    const reply = await postModern(
      gateway.mcpUrl,
      'tools/call',
      { name: 'meta', arguments: {} },
      { meta: { ...modernMeta({ roots: {} }), 'io.modelcontextprotocol/unknown': 1 } },
    );
    expect(reply.status).toBe(200);
    expect(backend.calls[0]?.meta).toBeUndefined();
  });
});
