/**
 * Task-augmented requests (MCP 2025-11-25, Tasks). The gateway declares no `tasks`
 * capability, and "receivers that do not declare the task capability for a request type
 * MUST process requests of that type normally, ignoring any task-augmentation metadata".
 * So a `tools/call` carrying `params.task` is answered with the tool's result, on every
 * ingress path (session over HTTP, stateless HTTP, the SDK server used by stdio), and the
 * `task` member reaches neither the interceptors nor the backend (the fixture backend's SDK
 * server declares no tasks either and would refuse it).
 */
import { allow, defineValidator } from '@fleet/interceptor-kit';
import { startHttpBackend } from '@fleet/test-fixtures';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createClientSession } from '../src/mcp-session.ts';
import { defer, serveInterceptors, startGateway, waitFor } from './harness.ts';
import { postModern, rawPost, SESSION_INIT, SESSION_VERSION } from './raw-http.ts';

const TASK_CALL = { name: 'echo', arguments: { text: 'hi' }, task: { ttl: 60_000 } };

async function setup() {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const seen: Array<Record<string, unknown>> = [];
  const recorder = defineValidator({
    name: 'recorder',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: (payload) => {
      seen.push(payload as Record<string, unknown>);
      return allow();
    },
  });
  const service = await serveInterceptors([recorder]);
  const gw = await startGateway(
    `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${service.url}"\n`,
    { redis: false },
  );
  return { gw, seen };
}

function expectPlainResult(result: unknown): void {
  expect(result).toMatchObject({ content: [{ type: 'text', text: '[fx] hi' }] });
  expect(result).not.toHaveProperty('task');
}

describe('task-augmented requests to a gateway without tasks', () => {
  it('answers a session tools/call normally; the task reaches neither interceptors nor backend', async () => {
    const { gw, seen } = await setup();
    const init = await rawPost(gw.mcpUrl, SESSION_INIT);
    expect(init.json.result?.capabilities).not.toHaveProperty('tasks');
    const headers = {
      'mcp-session-id': String(init.headers['mcp-session-id']),
      'mcp-protocol-version': SESSION_VERSION,
    };
    await rawPost(gw.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
    const reply = await rawPost(
      gw.mcpUrl,
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: TASK_CALL },
      headers,
    );
    expect(reply.status).toBe(200);
    expect(reply.json.error).toBeUndefined();
    expectPlainResult(reply.json.result);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ name: 'echo', arguments: { text: 'hi' } });
    expect(seen[0]).not.toHaveProperty('task');
  });

  it('answers a stateless tools/call normally', async () => {
    const { gw, seen } = await setup();
    const reply = await postModern(gw.mcpUrl, 'tools/call', TASK_CALL, { id: 3 });
    expect(reply.status).toBe(200);
    expect(reply.json.error).toBeUndefined();
    expectPlainResult(reply.json.result);
    expect(seen[0]).not.toHaveProperty('task');
  });

  it('answers through the SDK server (the stdio path) normally', async () => {
    const { gw, seen } = await setup();
    const session = createClientSession(gw.orchestrator.gateway, gw.orchestrator.registry);
    const [client, server] = InMemoryTransport.createLinkedPair();
    const received: JSONRPCMessage[] = [];
    client.onmessage = (message) => received.push(message);
    await session.server.connect(server);
    defer(() => session.server.close());
    await client.start();
    await client.send(SESSION_INIT);
    await client.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await client.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: TASK_CALL });
    await waitFor(() => received.some((m) => 'id' in m && m.id === 2), 10_000, 'the answer');
    const answer = received.find((m) => 'id' in m && m.id === 2) as {
      result?: unknown;
      error?: unknown;
    };
    expect(answer.error).toBeUndefined();
    expectPlainResult(answer.result);
    expect(seen[0]).not.toHaveProperty('task');
  });
});
