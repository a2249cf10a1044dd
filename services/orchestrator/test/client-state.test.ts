/**
 * What a client can make the gateway keep on its behalf is bounded: through a real gateway
 * and a real fixture backend, over raw HTTP, a client that asks for more than a bound gets a
 * named JSON-RPC error and the gateway (and its backend) keep nothing more.
 */
import { createServer } from 'node:http';
import { startHttpBackend } from '@fleet/test-fixtures';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import {
  MAX_METHOD_LENGTH,
  MAX_SUBSCRIBED_URI_CHARACTERS,
  MAX_SUBSCRIPTION_URI_LENGTH,
  MAX_SUBSCRIPTIONS_PER_SESSION,
} from '../src/gateway.ts';
import { MAX_INITIALIZE_PARAMS_BYTES } from '../src/session-transport.ts';
import { connectClient, defer, listenLoopback, startGateway, waitFor } from './harness.ts';
import { openRawSession, type RawReply, rawPost, SESSION_INIT } from './raw-http.ts';

async function gatewayWithBackend() {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const gateway = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n`, {
    redis: false,
  });
  /** Every URI the backend holds a subscription to, over all its sessions. */
  const backendSubscriptions = () =>
    [...backend.state.sessions].reduce((n, s) => n + s.subscriptions.size, 0);
  return { gateway, backend, backendSubscriptions };
}

/** A raw session on `url` and a way to send it one request. */
async function rawSession(url: string) {
  const headers = await openRawSession(url);
  let nextId = 100;
  const send = (method: string, params: Record<string, unknown>): Promise<RawReply> =>
    rawPost(url, { jsonrpc: '2.0', id: nextId++, method, params }, headers);
  return { headers, send };
}

function expectLimit(reply: RawReply, data: Record<string, unknown>): void {
  expect(reply.status).toBe(200);
  expect(reply.json.error?.code).toBe(-32602);
  expect(reply.json.error?.data).toEqual({ reason: 'limit_exceeded', ...data });
}

describe('initialize', () => {
  it(`takes params of at most ${MAX_INITIALIZE_PARAMS_BYTES} bytes, which its session keeps`, async () => {
    const { gateway } = await gatewayWithBackend();
    const initialize = (name: string, experimental: Record<string, unknown> = {}) =>
      rawPost(gateway.mcpUrl, {
        ...SESSION_INIT,
        params: {
          ...SESSION_INIT.params,
          clientInfo: { name, version: '1' },
          capabilities: { experimental },
        },
      });
    // 50 sessions opened with 3 MiB of clientInfo and capabilities each used to hold +163 MB
    // of heap until they expired: 32 GB at the 10,000-session cap.
    for (const [name, experimental] of [
      ['x'.repeat(MAX_INITIALIZE_PARAMS_BYTES), {}],
      ['client', { padding: { text: 'y'.repeat(3 * 1024 * 1024) } }],
    ] as const) {
      const refused = await initialize(name, experimental);
      expect(refused.status).toBe(400);
      expect(refused.json).toMatchObject({ id: 1, error: { code: -32602 } });
      expect(refused.json.error?.data).toEqual({
        reason: 'limit_exceeded',
        limit: 'initializeParamsBytes',
        max: MAX_INITIALIZE_PARAMS_BYTES,
      });
      expect(refused.headers['mcp-session-id']).toBeUndefined();
    }
    expect(gateway.orchestrator.gateway.sessions.size).toBe(0);
    const opened = await initialize('a real client', { 'io.example/feature': { on: true } });
    expect(opened.status).toBe(200);
    expect(gateway.orchestrator.gateway.sessions.size).toBe(1);
  });
});

describe('a method name', () => {
  it(`of more than ${MAX_METHOD_LENGTH} characters is not found, naming the limit`, async () => {
    const { gateway } = await gatewayWithBackend();
    const { send } = await rawSession(gateway.mcpUrl);
    // The longest passes to the backend, which knows no such method either.
    const longest = await send(`x/${'m'.repeat(MAX_METHOD_LENGTH - 2)}`, {});
    expect(longest.json.error?.code).toBe(-32601);
    expect(longest.json.error?.data).toBeUndefined();
    // 100 made-up methods of 3 MiB each used to leave +631 MB of heap behind: the registry's
    // chain plans (1,024 event names of any length) until the next registry change.
    for (const method of [`x/${'m'.repeat(MAX_METHOD_LENGTH - 1)}`, 'y'.repeat(3 * 1024 * 1024)]) {
      const refused = await send(method, {});
      expect(refused.status).toBe(200);
      expect(refused.json.error?.code).toBe(-32601);
      expect(refused.json.error?.data).toEqual({
        reason: 'limit_exceeded',
        limit: 'methodLength',
        max: MAX_METHOD_LENGTH,
      });
      expect(refused.json.error?.message.length).toBeLessThan(300);
    }
  });
});

describe('resource subscriptions of one session', () => {
  it(`are at most ${MAX_SUBSCRIPTIONS_PER_SESSION}: the next distinct URI is refused, naming the limit`, async () => {
    const { gateway, backendSubscriptions } = await gatewayWithBackend();
    const { send } = await rawSession(gateway.mcpUrl);
    const uri = (i: number) => `fixture://items/${i}`;
    // 25 at a time: within the session's limits.maxInFlightPerSession (32 by default).
    for (let i = 0; i < MAX_SUBSCRIPTIONS_PER_SESSION; i += 25) {
      const batch = Array.from({ length: 25 }, (_, j) =>
        send('resources/subscribe', { uri: uri(i + j) }),
      );
      for (const reply of await Promise.all(batch)) expect(reply.json.result).toEqual({});
    }
    expect(backendSubscriptions()).toBe(MAX_SUBSCRIPTIONS_PER_SESSION);

    const over = await send('resources/subscribe', { uri: 'fixture://items/one-too-many' });
    expectLimit(over, { limit: 'subscriptionsPerSession', max: MAX_SUBSCRIPTIONS_PER_SESSION });
    expect(over.json.error?.message).toContain(`at most ${MAX_SUBSCRIPTIONS_PER_SESSION}`);
    // The backend never heard of it.
    expect(backendSubscriptions()).toBe(MAX_SUBSCRIPTIONS_PER_SESSION);

    // Subscribing again to a URI the session holds is no new subscription.
    expect((await send('resources/subscribe', { uri: uri(7) })).json.result).toEqual({});
    // Unsubscribing makes room.
    expect((await send('resources/unsubscribe', { uri: uri(7) })).json.result).toEqual({});
    const fits = await send('resources/subscribe', { uri: 'fixture://items/one-too-many' });
    expect(fits.json.result).toEqual({});
  }, 60_000);

  it(`take URIs of at most ${MAX_SUBSCRIPTION_URI_LENGTH} characters`, async () => {
    const { gateway, backendSubscriptions } = await gatewayWithBackend();
    const { send } = await rawSession(gateway.mcpUrl);
    const prefix = 'fixture://items/';
    const longest = prefix + 'a'.repeat(MAX_SUBSCRIPTION_URI_LENGTH - prefix.length);
    expect((await send('resources/subscribe', { uri: longest })).json.result).toEqual({});

    // A 3 MiB URI (within the body limit) used to be held for as long as the session lived.
    for (const uri of [`${longest}b`, prefix + 'c'.repeat(3 * 1024 * 1024)]) {
      const refused = await send('resources/subscribe', { uri });
      expectLimit(refused, {
        limit: 'subscriptionUriLength',
        max: MAX_SUBSCRIPTION_URI_LENGTH,
        field: 'uri',
      });
    }
    expect(backendSubscriptions()).toBe(1);
  });

  it(`take URIs of at most ${MAX_SUBSCRIBED_URI_CHARACTERS} characters in all`, async () => {
    const { gateway, backendSubscriptions } = await gatewayWithBackend();
    const { send } = await rawSession(gateway.mcpUrl);
    // Under the two bounds above alone, a session could hold 1,000 URIs of 8,192 characters.
    const count = MAX_SUBSCRIBED_URI_CHARACTERS / MAX_SUBSCRIPTION_URI_LENGTH;
    const uri = (i: number) => {
      const head = `fixture://items/${i}/`;
      return head + 'a'.repeat(MAX_SUBSCRIPTION_URI_LENGTH - head.length);
    };
    for (let i = 0; i < count; i++)
      expect((await send('resources/subscribe', { uri: uri(i) })).json.result).toEqual({});
    const over = await send('resources/subscribe', { uri: 'fixture://items/x' });
    expectLimit(over, { limit: 'subscribedUriCharacters', max: MAX_SUBSCRIBED_URI_CHARACTERS });
    expect(backendSubscriptions()).toBe(count);
    await send('resources/unsubscribe', { uri: uri(0) });
    expect((await send('resources/subscribe', { uri: 'fixture://items/x' })).json.result).toEqual(
      {},
    );
  });

  it('are released at the backend when the session that held them ends', async () => {
    const { gateway, backendSubscriptions } = await gatewayWithBackend();
    const { headers, send } = await rawSession(gateway.mcpUrl);
    for (let i = 0; i < 20; i++) await send('resources/subscribe', { uri: `fixture://items/${i}` });
    expect(backendSubscriptions()).toBe(20);
    const ended = await rawPost(gateway.mcpUrl, '', headers, { method: 'DELETE' });
    expect(ended.status).toBe(200);
    // Before, the backend kept every subscription of every session that ever ended.
    await waitFor(() => backendSubscriptions() === 0, 5000, 'the backend to drop them');
  });

  it("of two sessions to one URI: one unsubscribing or ending leaves the other's in force", async () => {
    const { gateway, backendSubscriptions } = await gatewayWithBackend();
    const counter = 'fixture://counter';
    const leaving = await rawSession(gateway.mcpUrl);
    const staying = await connectClient(gateway.mcpUrl, { name: 'staying' });
    const updates: string[] = [];
    staying.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    await staying.subscribeResource({ uri: counter });
    expect((await leaving.send('resources/subscribe', { uri: counter })).json.result).toEqual({});
    // The backend sees one client, the gateway: one unsubscribe used to end it for both.
    expect((await leaving.send('resources/unsubscribe', { uri: counter })).json.result).toEqual({});
    await staying.callTool({ name: 'bump', arguments: {} });
    await waitFor(() => updates.length === 1, 5000, 'an update after the other unsubscribed');

    await leaving.send('resources/subscribe', { uri: counter });
    await rawPost(gateway.mcpUrl, '', leaving.headers, { method: 'DELETE' });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(backendSubscriptions()).toBe(1);
    await staying.callTool({ name: 'bump', arguments: {} });
    await waitFor(() => updates.length === 2, 5000, 'an update after the other session ended');
  });

  it("of two sessions to one URI: a subscribe that fails after the other session unsubscribed releases the backend's subscription", async () => {
    // The backend held the URI for the leaving session; the arriving one's subscribe, in
    // flight, kept the leaving one's unsubscribe local; then it failed: nobody held the
    // backend's subscription any more, and nothing used to release it.
    const { gateway, backend, backendSubscriptions } = await gatewayWithBackend();
    const counter = 'fixture://counter';
    const leaving = await rawSession(gateway.mcpUrl);
    const arriving = await rawSession(gateway.mcpUrl);
    expect((await leaving.send('resources/subscribe', { uri: counter })).json.result).toEqual({});
    expect(backendSubscriptions()).toBe(1);
    backend.state.subscribeDelayMs = 300;
    backend.state.failSubscribe = true;
    const failing = arriving.send('resources/subscribe', { uri: counter });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await leaving.send('resources/unsubscribe', { uri: counter })).json.result).toEqual({});
    expect((await failing).json.error?.code).toBe(-32603);
    await waitFor(() => backendSubscriptions() === 0, 5000, 'the backend to be unsubscribed');
  });

  it('of two sessions to one URI: the last holder unsubscribing and another subscribing reach the backend in that order', async () => {
    // The backend serves requests concurrently and takes 300 ms over an unsubscribe: the other
    // session's subscribe, sent meanwhile, used to be done first, and the unsubscribe then ended
    // the backend's subscription under the session that had just made it.
    const { gateway, backend, backendSubscriptions } = await gatewayWithBackend();
    backend.state.unsubscribeDelayMs = 300;
    const counter = 'fixture://counter';
    const leaving = await rawSession(gateway.mcpUrl);
    const arriving = await connectClient(gateway.mcpUrl, { name: 'arriving' });
    const updates: string[] = [];
    arriving.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    expect((await leaving.send('resources/subscribe', { uri: counter })).json.result).toEqual({});
    const unsubscribed = leaving.send('resources/unsubscribe', { uri: counter });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await arriving.subscribeResource({ uri: counter });
    expect((await unsubscribed).json.result).toEqual({});
    expect(backendSubscriptions()).toBe(1);
    await arriving.callTool({ name: 'bump', arguments: {} });
    await waitFor(() => updates.length === 1, 5000, 'an update for the session that subscribed');
    expect(updates).toEqual([counter]);
  });
});

/**
 * A minimal MCP backend over HTTP that takes `ackMs` to accept each notification (a busy
 * server): it counts the `notifications/roots/list_changed` it was sent and how many it had
 * at once.
 */
async function slowNotificationBackend(ackMs: number) {
  const seen = { total: 0, open: 0, mostOpen: 0, last: 0 };
  const server = createServer((req, res) => {
    if (req.method !== 'POST') return void res.writeHead(405).end();
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    req.on('end', () => {
      const message = JSON.parse(body) as { id?: number; method?: string };
      if (message.method === 'initialize') {
        const result = {
          protocolVersion: '2025-11-25',
          capabilities: {},
          serverInfo: { name: 'slow', version: '1' },
        };
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' });
        return void res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
      }
      if (message.method !== 'notifications/roots/list_changed')
        return void res.writeHead(202).end();
      seen.total++;
      seen.open++;
      seen.mostOpen = Math.max(seen.mostOpen, seen.open);
      setTimeout(() => {
        seen.open--;
        seen.last = performance.now();
        res.writeHead(202).end();
      }, ackMs);
    });
  });
  return { url: `${await listenLoopback(server)}/mcp`, seen };
}

describe("a client's notifications/roots/list_changed", () => {
  it('reach a busy backend one at a time, however many the client sends', async () => {
    const ACK_MS = 200;
    const SENT = 1000;
    const backend = await slowNotificationBackend(ACK_MS);
    const gateway = await startGateway(`backends:\n  - {id: slow, url: "${backend.url}"}\n`, {
      redis: false,
    });
    const { headers } = await rawSession(gateway.mcpUrl);
    const changed = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' });
    for (let i = 0; i < SENT; i += 50) {
      const batch = Array.from({ length: 50 }, () => rawPost(gateway.mcpUrl, changed, headers));
      for (const reply of await Promise.all(batch)) expect(reply.status).toBe(202);
    }
    const sentAt = performance.now();
    // The backend hears of the change after the client's last notification, and the gateway
    // holds none: it used to queue one POST per notification (each waiting for the backend).
    await waitFor(
      () => backend.seen.open === 0 && backend.seen.last > sentAt,
      10_000,
      'the last one',
    );
    expect(backend.seen.mostOpen).toBe(1);
    expect(backend.seen.total).toBeLessThan(SENT / 10);
  });
});
