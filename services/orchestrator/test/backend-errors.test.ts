/**
 * A backend's JSON-RPC error reaches the client as the backend sent it: same code, same
 * message, same data — the gateway adds nothing to the message on the way through.
 */
import { startHttpBackend } from '@fleet/test-fixtures';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, startGateway } from './harness.ts';

describe('backend JSON-RPC errors', () => {
  it('pass through with their code and message unchanged', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gateway = await startGateway(`backends:\n  - {id: fx, url: "${backend.url}"}\n`, {
      redis: false,
    });
    const client = await connectClient(gateway.mcpUrl);

    // What a client connected straight to the backend sees.
    const direct = await connectClient(backend.url);
    const expected = await direct
      .callTool({ name: 'throw', arguments: { code: -32050, message: 'custom failure' } })
      .catch((e: unknown) => e);
    expect(expected).toBeInstanceOf(McpError);
    expect((expected as McpError).message).toBe('MCP error -32050: custom failure');

    const error = await client
      .callTool({ name: 'throw', arguments: { code: -32050, message: 'custom failure' } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32050);
    // The SDK client prefixes "MCP error <code>: " once; a second prefix means the gateway
    // forwarded the backend client's already-prefixed message.
    expect((error as McpError).message).toBe((expected as McpError).message);
  });
});
