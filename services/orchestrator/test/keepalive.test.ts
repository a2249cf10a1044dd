/**
 * SSE keep-alive comments (`limits.sseKeepAliveMs`) through a real gateway and a real fixture
 * backend: a session's GET stream gets one every interval, a call unanswered for one to two
 * intervals has its answer switched to SSE with comments before it (so a proxy's idle timeout
 * cannot cut it), a quick call stays plain JSON, and the SDK client reads through comments.
 */

import { request as httpRequest } from 'node:http';
import { startHttpBackend } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, startGateway, textOf, waitFor } from './harness.ts';
import { openRawSession, rawPost } from './raw-http.ts';

async function setup(keepAliveMs: number) {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const gateway = await startGateway(
    `backends:\n  - {id: fx, url: "${backend.url}"}\nlimits: {sseKeepAliveMs: ${keepAliveMs}}\n`,
    { redis: false },
  );
  return { gateway, headers: await openRawSession(gateway.mcpUrl) };
}

const call = (id: number, name: string, args: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});

const comments = (text: string) => text.split('\n').filter((line) => line === ': keepalive').length;

describe('SSE keep-alive', () => {
  it('writes a comment on the GET stream every interval', async () => {
    const { gateway, headers } = await setup(100);
    let text = '';
    const req = httpRequest(gateway.mcpUrl, {
      method: 'GET',
      headers: { accept: 'text/event-stream', ...headers },
    });
    req.on('response', (res) => {
      res.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8');
      });
    });
    req.end();
    defer(async () => {
      req.destroy();
    });
    await waitFor(() => comments(text) >= 3, 10_000, 'three keep-alive comments');
  });

  it('answers a long call as SSE with comments before its result; a quick call stays JSON', async () => {
    const { gateway, headers } = await setup(100);
    const slow = await rawPost(gateway.mcpUrl, call(2, 'slow', { ms: 800 }), headers);
    expect(slow.status).toBe(200);
    expect(slow.headers['content-type']).toBe('text/event-stream');
    expect(comments(slow.text)).toBeGreaterThanOrEqual(2);
    expect(slow.json).toMatchObject({
      id: 2,
      result: { content: [{ text: '[fx] waited 800 ms' }] },
    });

    const quick = await rawPost(gateway.mcpUrl, call(3, 'echo', { text: 'hi' }), headers);
    expect(quick.headers['content-type']).toBe('application/json');
    expect(quick.json).toMatchObject({ id: 3, result: { content: [{ text: '[fx] hi' }] } });
  });

  it('reaches the SDK client as the plain result', async () => {
    const { gateway } = await setup(100);
    const client = await connectClient(gateway.mcpUrl);
    const result = await client.callTool({ name: 'slow', arguments: { ms: 500 } });
    expect(textOf(result)).toBe('[fx] waited 500 ms');
  });

  it('writes none when turned off (sseKeepAliveMs: 0)', async () => {
    const { gateway, headers } = await setup(0);
    const slow = await rawPost(gateway.mcpUrl, call(2, 'slow', { ms: 400 }), headers);
    expect(slow.headers['content-type']).toBe('application/json');
    expect(comments(slow.text)).toBe(0);
  });
});
