/**
 * A backend's JSON-RPC error reaches the client as the backend sent it: same code, same
 * message, same data — the gateway adds nothing to the message on the way through. A
 * backend whose event stream ends before the answer fails the call at once.
 */
import { createServer } from 'node:http';
import { startHttpBackend } from '@fleet/test-fixtures';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, listenLoopback, startGateway } from './harness.ts';

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

  it('fails a call at once when the backend ends its event stream before answering', async () => {
    // A backend speaking plain Streamable HTTP by hand: its tools/call stream sends one
    // progress notification and ends (or is cut) without the result.
    const server = createServer((req, res) => {
      let text = '';
      req.on('data', (c) => {
        text += c;
      });
      req.on('end', () => {
        if (req.method !== 'POST') {
          res.writeHead(405).end();
          return;
        }
        const message = JSON.parse(text) as {
          id?: number;
          method: string;
          params?: { name?: string; _meta?: { progressToken?: unknown } };
        };
        const reply = (result: unknown) => {
          res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' });
          res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
        };
        if (message.id === undefined) res.writeHead(202).end();
        else if (message.method === 'initialize')
          reply({
            protocolVersion: '2025-11-25',
            capabilities: { tools: {} },
            serverInfo: { name: 'vanishing', version: '1' },
          });
        else if (message.method === 'tools/list')
          reply({
            tools: ['ends', 'cut'].map((name) => ({ name, inputSchema: { type: 'object' } })),
          });
        else if (message.method === 'tools/call') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(
            `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'working' } })}\n\n`,
          );
          if (message.params?.name === 'cut') setTimeout(() => res.destroy(), 20);
          else setTimeout(() => res.end(), 20);
        } else reply({});
      });
    });
    const url = `${await listenLoopback(server)}/mcp`;
    const gateway = await startGateway(
      `backends:\n  - {id: vanishing, url: "${url}", resilience: {timeoutMs: 60000}}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    for (const name of ['ends', 'cut']) {
      const started = Date.now();
      const error = await client.callTool({ name, arguments: {} }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).message).toMatch(/closed|failed/);
      // Not after the 60 s backend timeout: the end of the stream itself fails the call.
      expect(Date.now() - started).toBeLessThan(15_000);
    }
    // The backend connection is still usable for the next call.
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['ends', 'cut']);
  });
});
