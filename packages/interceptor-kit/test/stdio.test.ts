/**
 * The kit's stdio server transport on real Node streams: messages split across writes,
 * CRLF and blank lines, and each kind of bad line answered with its JSON-RPC error (the id
 * of an oversized line found at either end) while the session goes on.
 */
import { PassThrough } from 'node:stream';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { BoundedStdioServerTransport } from '../src/index.ts';

const MAX = 1024;

async function open() {
  const input = new PassThrough();
  const output = new PassThrough();
  const transport = new BoundedStdioServerTransport(MAX, input, output);
  const received: JSONRPCMessage[] = [];
  transport.onmessage = (m) => received.push(m);
  await transport.start();
  let written = '';
  output.on('data', (chunk: Buffer) => {
    written += chunk.toString('utf8');
  });
  /** Write `chunks` one by one, then let the streams deliver them. */
  const feed = async (...chunks: string[]) => {
    for (const chunk of chunks) input.write(chunk);
    await new Promise((r) => setImmediate(r));
  };
  const answers = () =>
    written
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as unknown);
  return { transport, input, received, feed, answers };
}

const ping = (id: number | string) => ({ jsonrpc: '2.0', id, method: 'ping' });

describe('BoundedStdioServerTransport', () => {
  it('delivers messages split across writes, with CRLF and blank lines between them', async () => {
    const { received, feed, answers } = await open();
    const text = JSON.stringify(ping(1));
    await feed(text.slice(0, 5), text.slice(5), '\r\n\n  \n', `${JSON.stringify(ping('b'))}\n`);
    expect(received).toEqual([ping(1), ping('b')]);
    expect(answers()).toEqual([]);
  });

  it('answers each bad line with its JSON-RPC error and serves the next', async () => {
    const { received, feed, answers } = await open();
    const big = (head: boolean) =>
      head
        ? JSON.stringify({
            jsonrpc: '2.0',
            id: 7,
            method: 'tools/call',
            params: { x: 'y'.repeat(MAX) },
          })
        : JSON.stringify({
            method: 'tools/call',
            params: { x: 'y'.repeat(MAX) },
            jsonrpc: '2.0',
            id: 'last',
          });
    await feed(
      'not json\n',
      `${JSON.stringify([ping(2)])}\n`,
      `${JSON.stringify({ jsonrpc: '2.0', id: 3 })}\n`,
      `${big(true).slice(0, 600)}`,
      `${big(true).slice(600)}\n`,
      `${big(false)}\n`,
      `${JSON.stringify(ping(9))}\n`,
    );
    const limit = { reason: 'limit_exceeded', limit: 'maxBodyBytes', max: MAX };
    expect(answers()).toEqual([
      { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: line is not valid JSON' } },
      { jsonrpc: '2.0', error: { code: -32600, message: 'JSON-RPC batches are not supported' } },
      {
        jsonrpc: '2.0',
        id: 3,
        error: { code: -32600, message: 'Invalid Request: expected a JSON-RPC message object' },
      },
      {
        jsonrpc: '2.0',
        id: 7,
        error: { code: -32600, message: `Request exceeds ${MAX} bytes`, data: limit },
      },
      {
        jsonrpc: '2.0',
        id: 'last',
        error: { code: -32600, message: `Request exceeds ${MAX} bytes`, data: limit },
      },
    ]);
    expect(received).toEqual([ping(9)]);
  });

  it('stops reading on close and says so', async () => {
    const { transport, input, received, feed } = await open();
    let closed = false;
    transport.onclose = () => {
      closed = true;
    };
    await transport.close();
    expect(closed).toBe(true);
    await feed(`${JSON.stringify(ping(1))}\n`);
    expect(received).toEqual([]);
    expect(input.isPaused()).toBe(true);
  });
});
