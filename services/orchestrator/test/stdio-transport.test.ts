/**
 * The gateway's stdio backend transport against a real child process (line-server.mjs) that
 * writes exactly the bytes a test asks for: lines split across writes, CRLF and blank lines,
 * a line that is not JSON-RPC, and lines over `maxMessageBytes`, which fail the request they
 * answer (with the id first or last in the line) and leave the connection serving.
 */
import { fileURLToPath } from 'node:url';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { stdioEnvironment } from '../src/backends.ts';
import { StdioBackendTransport } from '../src/stdio-transport.ts';
import { waitFor } from './harness.ts';

const SERVER = fileURLToPath(new URL('./line-server.mjs', import.meta.url));
const open: StdioBackendTransport[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((t) => t.close()));
});

async function start(options: { maxMessageBytes?: number; env?: Record<string, string> } = {}) {
  const transport = new StdioBackendTransport({
    command: process.execPath,
    args: [SERVER],
    env: stdioEnvironment([], options.env ?? {}),
    maxMessageBytes: options.maxMessageBytes,
  });
  const messages: JSONRPCMessage[] = [];
  const errors: Error[] = [];
  let closed = false;
  transport.onmessage = (m) => messages.push(m);
  transport.onerror = (e) => errors.push(e);
  transport.onclose = () => {
    closed = true;
  };
  open.push(transport);
  await transport.start();
  let nextId = 1;
  /** Send a request and wait for the message that answers it. */
  const ask = async (
    method: string,
    params: Record<string, unknown> = {},
    id: string | number = nextId++,
  ) => {
    await transport.send({ jsonrpc: '2.0', id, method, params });
    let answer: JSONRPCMessage | undefined;
    await waitFor(
      () => {
        answer = messages.find((m) => 'id' in m && m.id === id && !('method' in m));
        return answer !== undefined;
      },
      10_000,
      `the answer to ${method} #${id}`,
    );
    return answer as JSONRPCMessage & {
      result?: Record<string, unknown>;
      error?: { code: number; message: string; data?: unknown };
    };
  };
  return { transport, messages, errors, ask, closed: () => closed };
}

const LIMIT = 64 * 1024;

describe('StdioBackendTransport', () => {
  it('joins a line written in many pieces', async () => {
    const { ask } = await start({ maxMessageBytes: LIMIT });
    const answer = await ask('answer', { size: 50_000, order: 'tail', chunk: 1000 });
    expect((answer.result as { text: string }).text).toBe('x'.repeat(50_000));
  });

  it('reads CRLF line ends, skips blank lines, and reports a line that is not JSON-RPC without losing the next', async () => {
    const { ask, errors, messages } = await start();
    const note = {
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: { level: 'info', data: 'hi' },
    };
    const answer = await ask('raw', {
      text: `\n\r\n${JSON.stringify(note)}\r\nnot json at all\n{"jsonrpc":"2.0"}\n`,
    });
    expect(answer.result).toEqual({ ok: true });
    expect(messages.filter((m) => 'method' in m)).toEqual([note]);
    expect(errors.map((e) => e.message)).toEqual([
      'backend wrote a line that is not a JSON-RPC message: not json at all',
      'backend wrote a line that is not a JSON-RPC message: {"jsonrpc":"2.0"}',
    ]);
  });

  for (const order of ['tail', 'head'] as const) {
    it(`fails the request an oversized line answers (id ${order === 'tail' ? 'last' : 'first'}) and serves the next on the same child`, async () => {
      const { ask, errors, closed } = await start({ maxMessageBytes: LIMIT });
      const before = await ask('pid');
      const failed = await ask('answer', { size: LIMIT * 3, order, chunk: 10_000 }, `big-${order}`);
      expect(failed.error).toEqual({
        code: -32603,
        message: `the backend sent a message of more than ${LIMIT} bytes (limits.maxBackendMessageBytes)`,
        data: { reason: 'limit_exceeded', limit: 'maxBackendMessageBytes', max: LIMIT },
      });
      expect(errors).toEqual([]);
      const small = await ask('answer', { size: 10, order, chunk: 4 });
      expect(small.result).toEqual({ text: 'x'.repeat(10) });
      expect((await ask('pid')).result).toEqual(before.result);
      expect(closed()).toBe(false);
    });
  }

  it('takes a line just at the limit and refuses one byte more', async () => {
    const { ask } = await start({ maxMessageBytes: LIMIT });
    // {"result":{"text":"..."},"jsonrpc":"2.0","id":N}: 43 bytes of frame around the text for a one-digit id.
    const frame = JSON.stringify({ result: { text: '' }, jsonrpc: '2.0', id: 1 }).length;
    const fits = await ask('answer', { size: LIMIT - frame, order: 'tail', chunk: 4096 }, 1);
    expect((fits.result as { text: string }).text).toHaveLength(LIMIT - frame);
    const over = await ask('answer', { size: LIMIT - frame + 1, order: 'tail', chunk: 4096 }, 2);
    expect(over.error?.data).toMatchObject({ reason: 'limit_exceeded' });
  });

  it('reports an oversized line that answers nothing it waits for, without inventing an answer', async () => {
    const { ask, errors, messages } = await start({ maxMessageBytes: 1024 });
    const big = JSON.stringify({ result: { text: 'y'.repeat(5000) }, jsonrpc: '2.0', id: 999 });
    const note = JSON.stringify({
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: { data: 'z'.repeat(5000) },
    });
    await ask('raw', { text: `${big}\n${note}\n` });
    expect(errors.map((e) => e.message)).toEqual([
      'the backend sent a message of more than 1024 bytes (limits.maxBackendMessageBytes)',
      'the backend sent a message of more than 1024 bytes (limits.maxBackendMessageBytes)',
    ]);
    expect(messages.some((m) => 'id' in m && m.id === 999)).toBe(false);
    expect(messages.some((m) => 'method' in m)).toBe(false);
  });

  it('ends the child on close, killing one that outlives its stdin and SIGTERM', async () => {
    const { transport, ask, closed } = await start({ env: { IGNORE_TERM: '1' } });
    const { pid } = (await ask('pid')).result as { pid: number };
    await transport.close();
    expect(() => process.kill(pid, 0)).toThrow();
    await waitFor(closed, 2000, 'onclose');
    await expect(transport.send({ jsonrpc: '2.0', id: 1, method: 'pid' })).rejects.toThrow(
      'Not connected',
    );
  });

  it('rejects start when the command cannot be spawned', async () => {
    const transport = new StdioBackendTransport({ command: '/nonexistent/mcp-server' });
    await expect(transport.start()).rejects.toThrow(/ENOENT/);
  });
});

describe('stdioEnvironment', () => {
  const gateway = {
    PATH: '/usr/bin:/bin',
    HOME: '/home/fleet',
    USER: 'fleet',
    FLEET_ADMIN_TOKEN: 'admin-secret',
    DATABASE_URL: 'postgres://u:p@db/audit',
    HTTPS_PROXY: 'http://proxy:3128',
    BASH_FUNC_x: '() { echo; }',
  };

  it("gives a child the SDK's default set, the names it inherits and its own env, never the gateway's secrets", () => {
    expect(
      stdioEnvironment(['HTTPS_PROXY', 'UNSET_HERE'], { API_KEY: 'k', HOME: '/srv' }, gateway),
    ).toEqual({
      PATH: '/usr/bin:/bin',
      USER: 'fleet',
      HTTPS_PROXY: 'http://proxy:3128',
      API_KEY: 'k',
      HOME: '/srv',
    });
  });

  it('passes no shell function on, even when named', () => {
    expect(stdioEnvironment(['BASH_FUNC_x'], {}, gateway)).not.toHaveProperty('BASH_FUNC_x');
  });

  it('is what the spawned child sees', async () => {
    const secret = `secret-${process.pid}`;
    process.env.FLEET_TEST_SECRET = secret;
    try {
      const { ask } = await start({ env: { GIVEN: 'yes' } });
      const { env } = (await ask('env')).result as { env: Record<string, string> };
      expect(env.GIVEN).toBe('yes');
      expect(env.PATH).toBe(process.env.PATH);
      expect(Object.values(env)).not.toContain(secret);
    } finally {
      delete process.env.FLEET_TEST_SECRET;
    }
  });
});
