/**
 * A session request the client cancels (`notifications/cancelled`), through a real gateway
 * and a real backend: its POST ends at once without a JSON-RPC message (an empty SSE stream,
 * or the end of the stream it already had), its id is free again, the backend hears of it,
 * an answer the backend still sends is dropped quietly, and the SDK client, cancelling with
 * an AbortSignal, neither errors nor holds one more socket per cancelled call.
 */
import { serveMcpOverHttp } from '@fleet/test-fixtures';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  CancelledNotificationSchema,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, startGateway, textOf, waitFor } from './harness.ts';
import { openRawSession, type RawReply, rawPost } from './raw-http.ts';

/**
 * A backend whose `hold` calls answer (with their `label`) only when the test releases them:
 * a cancellation is recorded and changes nothing, so an answer can come after it. `echo`
 * answers at once.
 */
async function startHoldBackend() {
  const state = {
    /** Labels of the `hold` calls that reached the backend, in order. */
    arrived: [] as string[],
    /** Request ids (the backend's) named by the cancellations it received. */
    cancelled: [] as Array<string | number>,
    /** Labels of the `hold` calls the backend answered. */
    answered: [] as string[],
  };
  const waiting = new Map<string, () => void>();
  const served = await serveMcpOverHttp({
    create: () => {
      const server = new Server(
        { name: 'hold', version: '1.0.0' },
        { capabilities: { tools: {} } },
      );
      const tool = (name: string) => ({ name, inputSchema: { type: 'object' as const } });
      server.setRequestHandler(ListToolsRequestSchema, () => ({
        tools: [tool('hold'), tool('echo')],
      }));
      // In place of the SDK's handler, which would abort the call and never answer it.
      server.setNotificationHandler(CancelledNotificationSchema, (notification) => {
        if (notification.params.requestId !== undefined)
          state.cancelled.push(notification.params.requestId);
      });
      server.setRequestHandler(CallToolRequestSchema, async (request) => {
        const label = String(request.params.arguments?.label ?? '');
        if (request.params.name === 'echo') return { content: [{ type: 'text', text: label }] };
        state.arrived.push(label);
        await new Promise<void>((resolve) => waiting.set(label, resolve));
        state.answered.push(label);
        return { content: [{ type: 'text', text: label }] };
      });
      return server;
    },
  });
  defer(() => served.close());
  /** Let `label`'s `hold` call answer (every waiting one when no label is given). */
  const release = (label?: string) => {
    for (const [key, resolve] of waiting)
      if (label === undefined || key === label) {
        waiting.delete(key);
        resolve();
      }
  };
  defer(async () => release());
  return { url: served.url, state, release };
}

/** A gateway in front of {@link startHoldBackend}, logging warnings and errors into `logged`. */
async function gatewayWithHold(limits = '{}') {
  const backend = await startHoldBackend();
  const logged: unknown[] = [];
  const record = (obj: unknown, msg: unknown) => {
    logged.push({ obj, msg });
  };
  const gateway = await startGateway(
    `backends:\n  - {id: hold, url: "${backend.url}"}\nlimits: ${limits}\n`,
    {
      redis: false,
      log: { debug: () => undefined, info: () => undefined, warn: record, error: record },
    },
  );
  return { gateway, backend, logged };
}

/** `reply`, or a failure naming `what` when it has not ended within `ms`. */
function within<T>(reply: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not end within ${ms} ms`)), ms);
  });
  return Promise.race([reply, late]).finally(() => clearTimeout(timer));
}

/**
 * A gateway in front of {@link startHoldBackend} and a raw session on it, with ways to call a
 * tool, to hold a call at the backend and to cancel a request.
 */
async function heldSession(limits?: string) {
  const { gateway, backend, logged } = await gatewayWithHold(limits);
  const url = gateway.mcpUrl;
  const headers = await openRawSession(url);
  const call = (id: number, name: string, label: string) =>
    rawPost(
      url,
      { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: { label } } },
      headers,
    );
  /** Call `hold` as request `id`: once the backend has the call, the reply to come. */
  const hold = async (id: number, label: string) => {
    const reply = call(id, 'hold', label);
    await waitFor(() => backend.state.arrived.includes(label), 5000, `${label} at the backend`);
    return { reply };
  };
  /** Cancel request `id` (accepted: 202). */
  const cancel = async (requestId: number) => {
    const accepted = await rawPost(
      url,
      {
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId, reason: 'the client gave up' },
      },
      headers,
    );
    expect(accepted.status).toBe(202);
  };
  return { backend, logged, headers, call, hold, cancel };
}

/** An HTTP 200 SSE reply that carries no message. */
function expectEndedUnanswered(reply: RawReply): void {
  expect(reply.status).toBe(200);
  expect(reply.headers['content-type']).toBe('text/event-stream');
  expect(reply.events).toEqual([]);
  expect(reply.text).not.toContain('data:');
}

describe('a request cancelled with notifications/cancelled', () => {
  it('ends its POST at once with an empty SSE stream, and the backend hears of it', async () => {
    const session = await heldSession();
    const { reply } = await session.hold(7, 'one');

    await session.cancel(7);
    const ended = await within(reply, 2000, 'the cancelled POST');
    expectEndedUnanswered(ended);
    expect(ended.headers['mcp-session-id']).toBe(session.headers['mcp-session-id']);
    await waitFor(
      () => session.backend.state.cancelled.length === 1,
      5000,
      'the backend cancellation',
    );
  });

  it('ends the SSE stream it was already answered on, with no message', async () => {
    // Keep-alive comments turn an unanswered request into an SSE stream after two ticks.
    const session = await heldSession('{sseKeepAliveMs: 50}');
    const { reply } = await session.hold(7, 'one');
    await new Promise((r) => setTimeout(r, 300));

    await session.cancel(7);
    const ended = await within(reply, 2000, 'the cancelled POST');
    expectEndedUnanswered(ended);
    expect(ended.text).toContain(': keepalive');
  });

  it('frees its id at once: a new request with the same id gets its own answer', async () => {
    const session = await heldSession();
    const { reply } = await session.hold(7, 'one');
    await session.cancel(7);

    const again = await session.call(7, 'echo', 'two');
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ jsonrpc: '2.0', id: 7 });
    expect(textOf(again.json.result)).toBe('two');
    expectEndedUnanswered(await within(reply, 2000, 'the cancelled POST'));
  });

  it('drops an answer the backend sends after the cancellation, without a log line, even when its id is in use again', async () => {
    const session = await heldSession();
    const { backend } = session;
    const first = await session.hold(7, 'late');
    await session.cancel(7);
    expectEndedUnanswered(await within(first.reply, 2000, 'the cancelled POST'));

    // The same id again, held at the backend while the cancelled call's answer comes back.
    const second = await session.hold(7, 'fresh');
    backend.release('late');
    await waitFor(() => backend.state.answered.includes('late'), 5000, 'the late answer sent');
    await new Promise((r) => setTimeout(r, 200));
    backend.release('fresh');

    const reply = await within(second.reply, 5000, 'the second call');
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ jsonrpc: '2.0', id: 7 });
    expect(textOf(reply.json.result)).toBe('fresh');
    expect(reply.text).not.toContain('late');
    expect(session.logged).toEqual([]);
  });
});

describe('the SDK client cancelling with an AbortSignal', () => {
  it('goes on on the same session without a transport error, and holds no socket per cancelled call', async () => {
    const { gateway, backend } = await gatewayWithHold();
    let gets = 0;
    gateway.server.on('request', (req: { method?: string }) => {
      if (req.method === 'GET') gets++;
    });
    const client = await connectClient(gateway.mcpUrl);
    const errors: unknown[] = [];
    client.onerror = (error) => {
      errors.push(error);
    };
    const openSockets = () =>
      new Promise<number>((resolve, reject) =>
        gateway.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
      );

    for (let i = 0; i < 20; i++) {
      const controller = new AbortController();
      const call = client.callTool({ name: 'hold', arguments: { label: `call-${i}` } }, undefined, {
        signal: controller.signal,
      });
      await waitFor(() => backend.state.arrived.includes(`call-${i}`), 5000, `call ${i}`);
      controller.abort('timed out');
      await expect(call).rejects.toThrow(/timed out/);
      const result = await client.callTool({ name: 'echo', arguments: { label: `after-${i}` } });
      expect(textOf(result)).toBe(`after-${i}`);
    }
    await waitFor(() => backend.state.cancelled.length === 20, 5000, 'every cancellation');

    // The standalone GET stream and the few POST connections the client's pool reuses (4
    // here): bounded by how many requests the client has open at once, not by how many it
    // cancelled (23 while each cancelled POST stayed open).
    expect(await openSockets()).toBeLessThanOrEqual(8);
    // Each cancelled POST ended as a finished stream: nothing to resume, no reconnection.
    expect(gets).toBe(1);
    expect(errors).toEqual([]);
  });
});
