/**
 * Dispatch checks through a real gateway and a real fixture backend: tools/call arguments
 * validated against the tool's inputSchema before any interceptor or the backend sees them
 * (with the schema cache filled by the gateway's reading of the tools when the backend
 * connects and by tools/list, and refreshed on list_changed), and result
 * text clamped to `limits.maxResponseBytes` on a character boundary, and a backend message
 * over `limits.maxBackendMessageBytes` refused without being read whole.
 */
import { allow, defineValidator } from '@fleet/interceptor-kit';
import {
  createFixtureState,
  type FixtureState,
  startHttpBackend,
  stdioBackendCommand,
} from '@fleet/test-fixtures';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it, vi } from 'vitest';
import {
  connectClient,
  defer,
  type LoggedLine,
  recordingLogger,
  serveInterceptors,
  startGateway,
  textOf,
  waitFor,
} from './harness.ts';

async function setup(
  extra = '',
  withInterceptor = false,
  options: { state?: FixtureState; log?: ReturnType<typeof recordingLogger> } = {},
) {
  const backend = await startHttpBackend({
    name: 'fx',
    ...(options.state ? { state: options.state } : {}),
  });
  defer(() => backend.close());
  const seen: unknown[] = [];
  let interceptors = '';
  if (withInterceptor) {
    const recorder = defineValidator({
      name: 'recorder',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: (payload) => {
        seen.push(payload);
        return allow();
      },
    });
    const served = await serveInterceptors([recorder]);
    interceptors = `interceptors:\n  - url: "${served.url}"\n`;
  }
  const gateway = await startGateway(
    `backends:\n  - {id: fx, url: "${backend.url}"}\n${interceptors}${extra}`,
    { redis: false, ...(options.log ? { log: options.log } : {}) },
  );
  // From here on: the gateway has sent its reading of the backend's lists on connecting.
  const upstream = gateway.orchestrator.backends[0];
  if (!upstream) throw new Error('no backend');
  const requests = vi.spyOn(upstream, 'request');
  const calls = (method: string, tool?: string) =>
    requests.mock.calls.filter(([m, p]) => m === method && (tool === undefined || p?.name === tool))
      .length;
  const client = await connectClient(gateway.mcpUrl);
  return { backend, gateway, client, seen, calls };
}

async function rpcError(promise: Promise<unknown>): Promise<McpError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(McpError);
  return error as McpError;
}

describe('tools/call argument validation', () => {
  it('lets valid arguments through to the interceptors and the backend', async () => {
    const { client, seen, calls } = await setup('', true);
    const result = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
    expect(textOf(result)).toBe('5');
    expect(seen).toHaveLength(1);
    expect(calls('tools/call', 'add')).toBe(1);
  });

  it('answers -32602 listing each failing path, before any interceptor or the backend', async () => {
    const { client, seen, calls } = await setup('', true);
    const error = await rpcError(client.callTool({ name: 'add', arguments: { a: 'two' } }));
    expect(error.code).toBe(-32602);
    expect(error.message).toContain('add');
    const data = error.data as { tool: string; errors: Array<{ path: string; message: string }> };
    expect(data.tool).toBe('add');
    expect(data.errors.map((e) => e.path).sort()).toEqual(['/a', '/b']);
    for (const e of data.errors) expect(e.message).toBeTruthy();
    expect(seen).toHaveLength(0);
    expect(calls('tools/call')).toBe(0);

    // Missing arguments entirely: every required field is reported.
    const missing = await rpcError(client.callTool({ name: 'many', arguments: {} }));
    expect((missing.data as { errors: Array<{ path: string }> }).errors).toEqual([
      expect.objectContaining({ path: '/n' }),
    ]);
    expect(seen).toHaveLength(0);
    expect(calls('tools/call')).toBe(0);
  });

  it('leaves a tool the backend does not list to the backend (its own answer)', async () => {
    const { client, calls } = await setup();
    const result = await client.callTool({ name: 'zzz_nothing', arguments: { any: 1 } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('zzz_nothing');
    expect(calls('tools/call')).toBe(1);
  });

  it('keeps the error of a name no backend owns', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}", prefix: "fx_"}\n  - {id: fy, url: "${backend.url}", prefix: "fy_"}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    const error = await rpcError(client.callTool({ name: 'zzz_nothing', arguments: {} }));
    expect(error.code).toBe(-32602);
    expect(error.message).toContain('Unknown tool: zzz_nothing');
    const invalid = await rpcError(client.callTool({ name: 'fy_add', arguments: { a: 1 } }));
    expect(invalid.data).toEqual({
      tool: 'fy_add',
      errors: [expect.objectContaining({ path: '/b' })],
    });
  });

  it('fills the schema cache from tools/list and refreshes it after list_changed', async () => {
    const { client, calls, backend } = await setup();
    await client.listTools();
    expect(calls('tools/list')).toBe(1);
    // The listing that went through the gateway is enough: no extra listing for the call.
    await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } });
    await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    expect(calls('tools/list')).toBe(1);

    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      changed += 1;
    });
    await client.callTool({ name: 'touch_list', arguments: {} });
    await waitFor(() => changed > 0, 5000, 'tools/list_changed');
    expect(backend.state.dynamicTools).toEqual(['dynamic_1']);

    // The cache was dropped: the next call lists the backend's tools once more.
    const result = await client.callTool({ name: 'dynamic_1', arguments: {} });
    expect(textOf(result)).toContain('dynamic_1');
    expect(calls('tools/list')).toBe(2);
    await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } });
    expect(calls('tools/list')).toBe(2);
    const error = await rpcError(client.callTool({ name: 'add', arguments: { a: 1, b: '2' } }));
    expect((error.data as { errors: Array<{ path: string }> }).errors.map((e) => e.path)).toEqual([
      '/b',
    ]);
  });

  it('checks the first call against the tools read when the backend connected, listing nothing more', async () => {
    const { client, calls } = await setup();
    const error = await rpcError(client.callTool({ name: 'echo', arguments: { text: 7 } }));
    expect(error.code).toBe(-32602);
    // The gateway's reading on connecting filled the schema cache: it used to list the
    // backend's tools once more for this call.
    expect(calls('tools/list')).toBe(0);
    expect(calls('tools/call')).toBe(0);
    expect(textOf(await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } }))).toBe('3');
    expect(calls('tools/list')).toBe(0);
  });

  it('lists the backend on a cache miss when its tools could not be read on connecting', async () => {
    const state = createFixtureState('fx');
    state.failToolsList = true;
    const log = recordingLogger();
    const { client, calls } = await setup('', false, { state, log });
    const failed = (line: LoggedLine) =>
      line.msg === 'reading a backend list after connecting failed' &&
      (line.obj as { list?: unknown }).list === 'tools';
    await waitFor(() => log.warnings.some(failed), 5000, 'the reading of the tools to fail');
    state.failToolsList = false;

    const error = await rpcError(client.callTool({ name: 'echo', arguments: { text: 7 } }));
    expect(error.code).toBe(-32602);
    expect(calls('tools/list')).toBe(1);
    expect(calls('tools/call')).toBe(0);
    // That listing filled the cache.
    expect(textOf(await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } }))).toBe('3');
    expect(calls('tools/list')).toBe(1);
  });
});

describe('result clamping', () => {
  const limits = 'limits: {maxResponseBytes: 1000}\n';
  const textBytes = (result: unknown) =>
    ((result as { content: Array<{ type: string; text?: string }> }).content ?? [])
      .filter((c) => c.type === 'text')
      .reduce((n, c) => n + Buffer.byteLength(c.text ?? '', 'utf8'), 0);
  const NOTICE = /\n\[… truncated by the gateway: (\d+) of (\d+) bytes shown\]$/;

  it('clamps many text items to the byte limit with a notice', async () => {
    const { client } = await setup(limits);
    const result = (await client.callTool({ name: 'many', arguments: { n: 50, size: 100 } })) as {
      content: Array<{ type: string; text: string }>;
    };
    const last = result.content.at(-1)?.text ?? '';
    const notice = NOTICE.exec(last);
    expect(notice).not.toBeNull();
    expect(Number(notice?.[2])).toBe(5000);
    expect(Number(notice?.[1])).toBeLessThanOrEqual(1000);
    expect(textBytes(result) - Buffer.byteLength(notice?.[0] ?? '', 'utf8')).toBe(
      Number(notice?.[1]),
    );
    // 10 items fill the budget exactly: the 11th keeps only the notice, the rest are dropped.
    expect(result.content).toHaveLength(11);
    expect(last).toBe(notice?.[0]);
    expect(result.content[0]?.text).toBe('item 1 '.padEnd(100, 'x'));
  });

  it('never splits a multi-byte character', async () => {
    const { client } = await setup(limits);
    const result = await client.callTool({ name: 'echo', arguments: { text: '😀'.repeat(400) } });
    const text = textOf(result);
    const notice = NOTICE.exec(text);
    expect(notice).not.toBeNull();
    const kept = text.slice(0, notice?.index);
    expect(kept).toBe(`[fx] ${'😀'.repeat(248)}`);
    expect(Buffer.byteLength(kept, 'utf8')).toBe(997);
    expect(Number(notice?.[1])).toBe(997);
    expect(Number(notice?.[2])).toBe(5 + 1600);
  });

  it('leaves results within the limit alone', async () => {
    const { client } = await setup(limits);
    const result = await client.callTool({ name: 'many', arguments: { n: 3 } });
    expect(result.content).toEqual([
      { type: 'text', text: 'item 1' },
      { type: 'text', text: 'item 2' },
      { type: 'text', text: 'item 3' },
    ]);
  });
});

describe('backend message limit', () => {
  /** An echo answered over the 65536-byte limit fails naming it; the next, within it, is served by `server`. */
  async function overThenWithin(client: Client, server: string) {
    const error = await rpcError(
      client.callTool({ name: 'echo', arguments: { text: 'z'.repeat(70_000) } }),
    );
    expect(error.code).toBe(-32603);
    expect(error.message).toContain('more than 65536 bytes (limits.maxBackendMessageBytes)');
    expect(error.data).toMatchObject({ limit: 'maxBackendMessageBytes', max: 65536 });
    const small = await client.callTool({ name: 'echo', arguments: { text: 'z'.repeat(20_000) } });
    expect(textOf(small)).toBe(`[${server}] ${'z'.repeat(20_000)}`);
  }

  it('fails a call whose backend answer is over maxBackendMessageBytes, and serves the next', async () => {
    const { client } = await setup('limits: {maxBackendMessageBytes: 65536}\n');
    // The fixture's echo answers in one SSE event, its text over the limit.
    await overThenWithin(client, 'fx');
  });

  it('fails a call whose stdio backend answers over the limit, and keeps the child serving', async () => {
    const command = stdioBackendCommand({ name: 'kid' });
    const gateway = await startGateway(
      `backends:\n  - id: kid\n    command: ${JSON.stringify(command.command)}\n    args: ${JSON.stringify(command.args)}\nlimits: {maxBackendMessageBytes: 65536}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    // The child's own counter: a restarted child would start again from 1.
    const bump = async () => textOf(await client.callTool({ name: 'bump', arguments: {} }));
    expect(await bump()).toBe('counter 1');
    // One line of the child's stdout, over the limit.
    await overThenWithin(client, 'kid');
    expect(await bump()).toBe('counter 2');
  });
});
