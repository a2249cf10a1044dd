/**
 * A backend that restarts (a new process behind the same URL, which no longer knows the
 * gateway's MCP session) gets back, on the gateway's new connection, what the live sessions
 * hold there: their resource subscriptions and the log level. Through a real gateway and real
 * fixture backends over HTTP.
 */
import { startHttpBackend } from '@fleet/test-fixtures';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
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
  });
});
