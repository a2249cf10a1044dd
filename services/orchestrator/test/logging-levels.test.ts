/**
 * `logging/setLevel` per session through a real gateway and a real fixture backend: the one
 * backend connection all sessions share is asked for the most verbose level any session set,
 * and each session gets only the log lines at its own level and above.
 */
import { startHttpBackend } from '@fleet/test-fixtures';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, startGateway, textOf, waitFor } from './harness.ts';

async function loggingClient(url: string) {
  const client = await connectClient(url);
  const lines: string[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    lines.push(String(n.params.data));
  });
  const log = async (level: string, message: string) =>
    textOf(await client.callTool({ name: 'log', arguments: { level, message } }));
  return { client, lines, log };
}

describe('logging/setLevel', () => {
  it("keeps each session's level: the backend sends the most verbose, each session gets its own", async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gateway = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n`, {
      redis: false,
    });
    const verbose = await loggingClient(gateway.mcpUrl);
    const quiet = await loggingClient(gateway.mcpUrl);
    await verbose.client.setLoggingLevel('debug');
    // Set last: the backend used to take this level for everyone.
    await quiet.client.setLoggingLevel('error');

    // The backend still sends info lines (a verbose session wants them)...
    expect(await verbose.log('info', 'v-info')).toBe('logged info');
    await waitFor(
      () => verbose.lines.includes('v-info'),
      5000,
      'the verbose session its info line',
    );
    // ...but the quiet session gets only error and above.
    expect(await quiet.log('info', 'q-info')).toBe('logged info');
    expect(await quiet.log('error', 'q-error')).toBe('logged error');
    await waitFor(() => quiet.lines.includes('q-error'), 5000, 'the quiet session its error line');
    expect(quiet.lines).toEqual(['q-error']);
    expect(verbose.lines).toEqual(['v-info']);
  });

  it('asks the backend for a less verbose level once the most verbose session has ended', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gateway = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n`, {
      redis: false,
    });
    const backendLevels = () => [...backend.state.sessions].map((s) => s.logLevel);
    const verbose = await loggingClient(gateway.mcpUrl);
    const quiet = await loggingClient(gateway.mcpUrl);
    await verbose.client.setLoggingLevel('debug');
    await quiet.client.setLoggingLevel('warning');
    expect(backendLevels()).toEqual(['debug']);
    // The quiet session ending changes nothing: the verbose one still wants debug.
    const other = await loggingClient(gateway.mcpUrl);
    await other.client.setLoggingLevel('error');
    await (other.client.transport as StreamableHTTPClientTransport).terminateSession();
    await (verbose.client.transport as StreamableHTTPClientTransport).terminateSession();
    // The backend used to be left at debug for as long as the gateway's connection lived.
    await waitFor(
      () => backendLevels()[0] === 'warning',
      5000,
      'the backend to be asked for warning',
    );
    expect(backendLevels()).toEqual(['warning']);
    expect(await quiet.log('warning', 'q-warning')).toBe('logged warning');
    await waitFor(() => quiet.lines.includes('q-warning'), 5000, 'the warning line');
  });

  // The gateway keeps the level it is given: one that is not an MCP level never reaches it.
  it('refuses a level that is not an MCP logging level, naming the field', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gateway = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n`, {
      redis: false,
    });
    const { client } = await loggingClient(gateway.mcpUrl);
    const error = await client
      .request(
        { method: 'logging/setLevel', params: { level: 'verbose' } } as never,
        LoggingMessageNotificationSchema.shape.params as never,
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32602);
    expect((error as McpError).data).toMatchObject({
      issues: [expect.objectContaining({ path: 'params.level' })],
    });
  });
});
