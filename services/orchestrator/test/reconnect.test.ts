/**
 * A backend that restarts (a new process behind the same URL, which no longer knows the
 * gateway's MCP session) gets back, on the gateway's new connection, what the live sessions
 * hold there: their resource subscriptions and the log level. Through a real gateway and real
 * fixture backends over HTTP.
 */
import { freePort, startHttpBackend } from '@fleet/test-fixtures';
import {
  PromptListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, startGateway, textOf, waitFor } from './harness.ts';

describe('a backend that restarts', () => {
  it('is subscribed again to the URIs sessions hold and asked for their log level again', async () => {
    const first = await startHttpBackend({ name: 'fx' });
    let firstClosed = false;
    defer(async () => {
      if (!firstClosed) await first.close();
    });
    const gateway = await startGateway(`backends:\n  - {id: fx, url: "${first.url}"}\n`, {
      redis: false,
    });
    const client = await connectClient(gateway.mcpUrl);
    const updates: string[] = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    let toolListChanges = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      toolListChanges++;
    });
    const counter = 'fixture://counter';
    await client.subscribeResource({ uri: counter });
    await client.setLoggingLevel('debug');
    const held = (backend: typeof first) =>
      [...backend.state.sessions].map((s) => ({
        subscriptions: [...s.subscriptions],
        logLevel: s.logLevel,
      }));
    expect(held(first)).toEqual([{ subscriptions: [counter], logLevel: 'debug' }]);

    // The backend restarts on the same port: a new process that knows no session.
    await first.close();
    firstClosed = true;
    const second = await startHttpBackend({ name: 'fx', port: first.port });
    defer(() => second.close());
    // The next call reaches it (the gateway connects again, once it finds its session gone).
    await waitFor(
      async () => {
        const answer = await client
          .callTool({ name: 'echo', arguments: { text: 'again' } })
          .then(textOf, () => '');
        return answer.endsWith('again');
      },
      10_000,
      'a call to reach the restarted backend',
    );
    // It used to hold nothing: the session's subscription was silently gone.
    await waitFor(
      () => second.state.sessions.size === 1 && held(second)[0]?.subscriptions.length === 1,
      5000,
      'the subscription to be made again',
    );
    expect(held(second)).toEqual([{ subscriptions: [counter], logLevel: 'debug' }]);
    await client.callTool({ name: 'bump', arguments: {} });
    await waitFor(() => updates.length === 1, 5000, 'an update from the restarted backend');
    expect(updates).toEqual([counter]);
    // Its tools may have changed with it: the session is told to list them again.
    await waitFor(() => toolListChanges > 0, 5000, 'tools/list_changed');
  });

  it('that came up after a session started: the session is told its lists changed', async () => {
    const port = await freePort();
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "http://127.0.0.1:${port}/mcp"}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    // Declared although no backend says so yet: the gateway will say when they change.
    expect(client.getServerCapabilities()?.tools).toEqual({ listChanged: true });
    const changed: string[] = [];
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => {
      changed.push(n.method);
    });
    client.setNotificationHandler(PromptListChangedNotificationSchema, (n) => {
      changed.push(n.method);
    });
    await expect(client.listTools()).rejects.toThrow(/unavailable/);

    const backend = await startHttpBackend({ name: 'fx', port });
    defer(() => backend.close());
    // The gateway's next attempt (backoff from 0.5 s) connects; the session used to be left
    // with its empty list.
    await waitFor(
      () => changed.includes('notifications/tools/list_changed'),
      10_000,
      'tools/list_changed once the backend is up',
    );
    expect(changed).toContain('notifications/prompts/list_changed');
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('echo');
  });
});
