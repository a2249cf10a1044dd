/**
 * A client that stops reading its SSE stream while a backend goes on talking, through a real
 * gateway and a real backend: past `limits.maxClientBacklogBytes` the gateway closes that
 * client's standalone (GET) stream, so what the backend broadcasts does not pile up in the
 * gateway's memory, while a client that reads gets every message, and the stalled client can
 * open a new stream; on a request's own stream, notifications are dropped and the answer
 * still arrives.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { serveMcpOverHttp, startHttpBackend } from '@fleet/test-fixtures';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { defer, recordingLogger, startGateway, waitFor } from './harness.ts';
import { openRawSession, rawPost } from './raw-http.ts';

const LIMIT = 1_048_576;
// 32 MB in all: far more than the kernel's socket buffers take for a stalled client (a few
// MB on loopback), in lines far under the limit.
const COUNT = 2000;
const BYTES = 16_000;

/**
 * One turn of the event loop. The backend, the gateway and the clients share this process:
 * a backend that wrote all its lines in one go (each send resolves at once) would let none
 * of the others read until it was done, and a reading client would look stalled.
 */
const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A backend whose `broadcast` answers at once and then sends `count` log lines of `bytes`
 * each, outside any request (the gateway gives them to every session), and whose `chatty`
 * sends them on its own request's stream before answering.
 */
async function startTalkativeBackend() {
  let chattyDone = false;
  const served = await serveMcpOverHttp({
    create: () => {
      const server = new Server(
        { name: 'talkative', version: '1.0.0' },
        { capabilities: { tools: {}, logging: {} } },
      );
      const tool = (name: string) => ({
        name,
        inputSchema: {
          type: 'object' as const,
          properties: { count: { type: 'number' }, bytes: { type: 'number' } },
        },
      });
      server.setRequestHandler(ListToolsRequestSchema, () => ({
        tools: [tool('broadcast'), tool('chatty')],
      }));
      server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
        const { count, bytes } = request.params.arguments as { count: number; bytes: number };
        const line = (i: number) => ({
          method: 'notifications/message' as const,
          params: { level: 'info' as const, data: `${i} ${'b'.repeat(bytes)}` },
        });
        if (request.params.name === 'chatty') {
          for (let i = 0; i < count; i++) {
            await extra.sendNotification(line(i));
            await turn();
          }
          chattyDone = true;
          return { content: [{ type: 'text', text: 'done' }] };
        }
        setTimeout(async () => {
          for (let i = 0; i < count; i++) {
            await server.notification(line(i));
            await turn();
          }
        }, 100);
        return { content: [{ type: 'text', text: 'broadcasting' }] };
      });
      return server;
    },
  });
  defer(() => served.close());
  return { url: served.url, chattyDone: () => chattyDone };
}

/**
 * An HTTP exchange whose response is held unread (paused) until `read()`, which reads it to
 * its end (or until the connection drops) and returns what came.
 */
function heldExchange(
  url: string,
  options: { method: 'GET' | 'POST'; headers: Record<string, string>; body?: unknown },
): Promise<{ response: IncomingMessage; read(): Promise<string> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: options.method,
      headers: {
        accept:
          options.method === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream',
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...options.headers,
      },
    });
    req.on('error', reject);
    req.on('response', (response) => {
      response.pause();
      resolve({
        response,
        read: () =>
          new Promise((done) => {
            let text = '';
            response.on('data', (chunk: Buffer) => {
              text += chunk.toString('utf8');
            });
            // A stream the gateway closed mid-event ends with an error, not 'end'.
            response.on('end', () => done(text));
            response.on('error', () => done(text));
            response.on('close', () => done(text));
            response.resume();
          }),
      });
    });
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

const eventsIn = (text: string) => text.split('event: message').length - 1;

describe('a client that does not read its stream', () => {
  it('loses its standalone stream past maxClientBacklogBytes, while a reading client gets every message', async () => {
    const backend = await startTalkativeBackend();
    const log = recordingLogger();
    const gateway = await startGateway(
      `backends:\n  - {id: talk, url: "${backend.url}"}\nlimits: {maxClientBacklogBytes: ${LIMIT}}\n`,
      { redis: false, log },
    );
    // The reading client takes its stream as fast as it comes (raw, so that parsing never
    // makes it the slower side: lines far under the limit, a reader far faster than the
    // gateway's writing, so its own backlog stays near zero).
    const readerHeaders = await openRawSession(gateway.mcpUrl);
    const reading = await heldExchange(gateway.mcpUrl, { method: 'GET', headers: readerHeaders });
    const seen: string[] = [];
    let unread = '';
    reading.response.on('data', (chunk: Buffer) => {
      const events = (unread + chunk.toString('utf8')).split('\n\n');
      unread = events.pop() ?? '';
      for (const event of events) {
        const data = event.split('\n').find((line) => line.startsWith('data: '));
        if (data === undefined) continue;
        const message = JSON.parse(data.slice(6)) as { params?: { data?: string } };
        seen.push(String(message.params?.data).split(' ')[0] as string);
      }
    });
    reading.response.resume();
    defer(async () => {
      reading.response.destroy();
    });
    const headers = await openRawSession(gateway.mcpUrl);
    const stalled = await heldExchange(gateway.mcpUrl, { method: 'GET', headers });
    expect(stalled.response.statusCode).toBe(200);

    const broadcast = (count: number, bytes: number) =>
      rawPost(
        gateway.mcpUrl,
        {
          jsonrpc: '2.0',
          id: count,
          method: 'tools/call',
          params: { name: 'broadcast', arguments: { count, bytes } },
        },
        readerHeaders,
      );
    await broadcast(COUNT, BYTES);
    await waitFor(() => seen.length === COUNT, 30_000, `the reading client's ${COUNT} log lines`);
    expect(seen).toEqual(Array.from({ length: COUNT }, (_, i) => String(i)));

    // The stalled stream was closed: reading it now ends it, short of the whole broadcast.
    const got = await stalled.read();
    expect(eventsIn(got)).toBeLessThan(COUNT);
    expect(log.warnings).toContainEqual({
      obj: expect.objectContaining({ action: 'stream-closed', maxBytes: LIMIT }),
      msg: "closed a client's SSE stream it was not reading (limits.maxClientBacklogBytes)",
    });

    // Its session lives on: a new stream gets the next broadcast.
    const again = await heldExchange(gateway.mcpUrl, { method: 'GET', headers });
    let received = '';
    again.response.on('data', (chunk: Buffer) => {
      received += chunk.toString('utf8');
    });
    again.response.resume();
    defer(async () => {
      again.response.destroy();
    });
    await broadcast(1, 10);
    await waitFor(() => eventsIn(received) === 1, 10_000, 'the next broadcast on a new stream');
  }, 60_000);

  it("drops a stalled request stream's notifications, and the answer still arrives", async () => {
    const backend = await startTalkativeBackend();
    const gateway = await startGateway(
      `backends:\n  - {id: talk, url: "${backend.url}"}\nlimits: {maxClientBacklogBytes: ${LIMIT}}\n`,
      { redis: false },
    );
    const headers = await openRawSession(gateway.mcpUrl);
    const call = await heldExchange(gateway.mcpUrl, {
      method: 'POST',
      headers,
      body: {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'chatty', arguments: { count: COUNT, bytes: BYTES } },
      },
    });
    expect(call.response.headers['content-type']).toBe('text/event-stream');
    await waitFor(backend.chattyDone, 30_000, 'the backend to send every line');
    await new Promise((r) => setTimeout(r, 300));
    const text = await call.read();
    const messages = text
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map(
        (line) => JSON.parse(line.slice(6)) as { id?: number; method?: string; result?: unknown },
      );
    const lines = messages.filter((m) => m.method === 'notifications/message');
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThan(COUNT);
    expect(messages.at(-1)).toEqual({
      jsonrpc: '2.0',
      id: 7,
      result: { content: [{ type: 'text', text: 'done' }] },
    });
  });
});

describe('a client that does not read its answer', () => {
  /** More than the kernel's socket buffers take in, so that the gateway holds the rest. */
  const ANSWER = 24 * 1024 * 1024;
  const STALL_MS = 1000;

  async function gatewayWithLongAnswers() {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const log = recordingLogger();
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}
limits: {maxResponseBytes: ${2 * ANSWER}, requestTimeoutMs: ${STALL_MS}}\n`,
      { redis: false, log },
    );
    const headers = await openRawSession(gateway.mcpUrl);
    const call = (id: number) =>
      heldExchange(gateway.mcpUrl, {
        method: 'POST',
        headers,
        body: {
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'many', arguments: { n: 1, size: ANSWER } },
        },
      });
    return { log, call };
  }

  it('loses the connection once it has taken none of it for limits.requestTimeoutMs', async () => {
    const { log, call } = await gatewayWithLongAnswers();
    const stalled = await call(7);
    // Before, the gateway held what the client did not take for as long as the connection
    // stayed open (30 such clients: +590 MB of heap, never released).
    await waitFor(
      () =>
        log.warnings.some((w) => (w.obj as { action?: unknown }).action === 'connection-closed'),
      STALL_MS * 10,
      'the gateway to give up on the answer',
    );
    expect(log.warnings).toContainEqual({
      obj: expect.objectContaining({ action: 'connection-closed', stallMs: STALL_MS }),
      msg: 'closed the connection of a client that took none of its answer for limits.requestTimeoutMs',
    });
    // What was already on its way arrives; the rest never does.
    const got = await stalled.read();
    expect(got.length).toBeGreaterThan(0);
    expect(got.length).toBeLessThan(ANSWER);
  }, 30_000);

  it('is sent whole to a client that reads it slowly, pausing for less than that', async () => {
    const { log, call } = await gatewayWithLongAnswers();
    const slow = await call(8);
    const { response } = slow;
    const chunks: Buffer[] = [];
    let sincePause = 0;
    response.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      sincePause += chunk.length;
      // Read 4 MiB, then nothing for half the budget.
      if (sincePause < 4 * 1024 * 1024) return;
      sincePause = 0;
      response.pause();
      setTimeout(() => response.resume(), STALL_MS / 2);
    });
    await new Promise((resolve) => response.once('end', resolve).resume());
    const answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      id: number;
      result: { content: Array<{ text: string }> };
    };
    expect(answer.id).toBe(8);
    expect(answer.result.content[0]?.text.length).toBe(ANSWER);
    expect(log.warnings).toEqual([]);
  }, 60_000);
});
