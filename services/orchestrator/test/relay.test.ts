/**
 * What crosses the gateway besides request/response: progress (per caller, with its own
 * token), cancellation, logging and list-changed notifications, resource updates, and
 * server-to-client requests (sampling) relayed to the calling client.
 */
import { startHttpBackend } from '@fleet/test-fixtures';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, startGateway, textOf } from './harness.ts';

async function gatewayWithBackend() {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const gateway = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n`, {
    redis: false,
  });
  return { gateway, backend };
}

describe('relays', () => {
  it('delivers progress only to the caller, with its own token, when two clients use the same token', async () => {
    const { gateway } = await gatewayWithBackend();
    const one = await connectClient(gateway.mcpUrl, { name: 'one' });
    const two = await connectClient(gateway.mcpUrl, { name: 'two' });
    const seen: Record<string, Array<{ progress: number; total?: number }>> = { one: [], two: [] };
    const call = (client: typeof one, who: 'one' | 'two', steps: number) =>
      client.request(
        {
          method: 'tools/call',
          params: {
            name: 'progress',
            arguments: { steps, delayMs: 5 },
            _meta: { progressToken: 'same-token' },
          },
        },
        CallToolResultSchema,
        { onprogress: (p) => seen[who]?.push(p) },
      );
    // The SDK client sets the progress token to its request id, so both clients send the same
    // token here (both calls are their first request after initialize).
    const [a, b] = await Promise.all([call(one, 'one', 3), call(two, 'two', 5)]);
    expect(textOf(a)).toBe('done');
    expect(textOf(b)).toBe('done');
    expect(seen.one?.map((p) => p.progress)).toEqual([1, 2, 3]);
    expect(seen.two?.map((p) => p.progress)).toEqual([1, 2, 3, 4, 5]);
    expect(seen.one?.every((p) => p.total === 3)).toBe(true);
  });

  it('cancels the backend call when the client cancels', async () => {
    const { gateway, backend } = await gatewayWithBackend();
    const client = await connectClient(gateway.mcpUrl);
    const controller = new AbortController();
    const pending = client.callTool(
      { name: 'slow', arguments: { ms: 10_000, label: 'to-cancel' } },
      undefined,
      { signal: controller.signal },
    );
    await new Promise((r) => setTimeout(r, 200));
    controller.abort('user gave up');
    await expect(pending).rejects.toThrow();
    const deadline = Date.now() + 5000;
    while (backend.state.cancellations.length === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(backend.state.cancellations.map((c) => c.label)).toEqual(['to-cancel']);
  });

  it('relays logging messages and list-changed notifications to connected clients', async () => {
    const { gateway } = await gatewayWithBackend();
    const client = await connectClient(gateway.mcpUrl);
    const logs: unknown[] = [];
    const changes: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logs.push(n.params);
    });
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => {
      changes.push(n.method);
    });
    await client.callTool({ name: 'log', arguments: { level: 'warning', message: 'careful' } });
    await client.callTool({ name: 'touch_list', arguments: {} });
    const deadline = Date.now() + 5000;
    while ((logs.length === 0 || changes.length === 0) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(logs[0]).toMatchObject({ level: 'warning', data: 'careful' });
    expect(changes).toContain('notifications/tools/list_changed');
  });

  it('sends a log line written during a call to that call only, not to other sessions', async () => {
    const { gateway } = await gatewayWithBackend();
    const caller = await connectClient(gateway.mcpUrl, { name: 'caller' });
    const other = await connectClient(gateway.mcpUrl, { name: 'other' });
    const mine: unknown[] = [];
    const leaked: unknown[] = [];
    caller.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      mine.push(n.params);
    });
    other.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      leaked.push(n.params);
    });
    await caller.callTool({
      name: 'log',
      arguments: { level: 'error', message: 'private to the caller' },
    });
    const deadline = Date.now() + 5000;
    while (mine.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 200));
    expect(mine).toEqual([expect.objectContaining({ data: 'private to the caller' })]);
    expect(leaked).toEqual([]);
  });

  it('relays resource updates to subscribers only', async () => {
    const { gateway } = await gatewayWithBackend();
    const subscriber = await connectClient(gateway.mcpUrl, { name: 'sub' });
    const bystander = await connectClient(gateway.mcpUrl, { name: 'other' });
    const updates: string[] = [];
    const stray: string[] = [];
    subscriber.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    bystander.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      stray.push(n.params.uri);
    });
    await subscriber.subscribeResource({ uri: 'fixture://counter' });
    await bystander.callTool({ name: 'bump', arguments: {} });
    const deadline = Date.now() + 5000;
    while (updates.length === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(updates).toContain('fixture://counter');
    expect(stray).toEqual([]);
  });

  it('relays a sampling request to the client whose call caused it', async () => {
    const { gateway } = await gatewayWithBackend();
    const client = await connectClient(gateway.mcpUrl, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
      const first = request.params.messages[0]?.content;
      const asked = first && 'text' in first ? first.text : '';
      return {
        model: 'test-model',
        role: 'assistant',
        content: { type: 'text', text: `model says: ${asked}` },
      };
    });
    const result = await client.callTool({
      name: 'sample',
      arguments: { prompt: 'capital of France?' },
    });
    expect(textOf(result)).toBe('model says: capital of France?');
  });
});
