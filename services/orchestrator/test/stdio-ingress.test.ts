/**
 * The orchestrator as a desktop client sees it: `main.ts --stdio` spawned by the SDK's
 * `StdioClientTransport`. Everything on stdout must be JSON-RPC (no start-up line, no logs,
 * no telemetry); logs go to stderr; closing stdin ends the process.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allow, defineValidator } from '@fleet/interceptor-kit';
import { deleteKeys, sourceCommand, startHttpBackend } from '@fleet/test-fixtures';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { alive, defer, serveInterceptors, textOf, waitFor } from './harness.ts';
import { SESSION_INIT } from './raw-http.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

/** A backend, a recording interceptor service and a config file naming both. */
async function stdioFleet(extraConfig = '') {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const principals: unknown[] = [];
  const recorder = defineValidator({
    name: 'recorder',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: (_payload, ctx) => {
      principals.push(ctx.context.principal);
      return allow();
    },
  });
  const service = await serveInterceptors([recorder]);

  const unique = `stdio-${randomUUID()}`;
  const dir = mkdtempSync(join(tmpdir(), 'fleet-stdio-'));
  const configPath = join(dir, 'fleet.yaml');
  writeFileSync(
    configPath,
    `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${service.url}"\nregistry: {prefix: ${unique}}\naudit: {queue: ${unique}}\n${extraConfig}`,
  );
  defer(async () => {
    const redis = new Redis({ host: '127.0.0.1', port: 6379 });
    await deleteKeys(redis, `*${unique}*`);
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });
  const env = {
    FLEET_CONFIG: configPath,
    AUDIT_JOURNAL: join(dir, 'audit.ndjson'),
    LOG_LEVEL: 'info',
    OTEL_METRICS_EXPORTER: 'none',
    OTEL_LOGS_EXPORTER: 'none',
  };
  return { dir, env, principals };
}

/** `main.ts --stdio` as a plain child process with piped stdio, killed at the test's end. */
function spawnStdio(dir: string, env: Record<string, string>) {
  const main = sourceCommand(MAIN, ['--stdio']);
  const child = spawn(main.command, main.args, {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  defer(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return child;
}

/** Start `main.ts --stdio` through the SDK client and record its raw stdout and stderr. */
async function startStdioGateway(extraEnv: Record<string, string> = {}) {
  const { dir, env, principals } = await stdioFleet();
  const main = sourceCommand(MAIN, ['--stdio']);
  const transport = new StdioClientTransport({
    command: main.command,
    args: main.args,
    cwd: dir,
    env: { ...env, ...extraEnv },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer | string) => {
    stderr += chunk.toString();
  });
  // Record every byte the process writes to stdout, as the transport receives it.
  let stdout = '';
  const readBuffer = (transport as unknown as { _readBuffer?: { append(chunk: Buffer): void } })
    ._readBuffer;
  if (readBuffer) {
    const append = readBuffer.append.bind(readBuffer);
    readBuffer.append = (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      append(chunk);
    };
  }
  const transportErrors: Error[] = [];
  const client = new Client({ name: 'desktop', version: '1.0.0' }, { capabilities: {} });
  client.onerror = (error) => transportErrors.push(error);
  await client.connect(transport);
  const pid = transport.pid ?? -1;
  defer(async () => {
    await client.close().catch(() => undefined);
    if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL');
  });
  return {
    client,
    pid,
    principals,
    stdout: () => stdout,
    stderr: () => stderr,
    transportErrors,
    recordsStdout: readBuffer !== undefined,
  };
}

/** Every non-empty stdout line must be one JSON-RPC 2.0 message. */
function expectOnlyJsonRpc(stdout: string): void {
  const lines = stdout.split('\n').filter((line) => line.trim() !== '');
  expect(lines.length).toBeGreaterThan(0);
  for (const line of lines) {
    let parsed: unknown;
    expect(
      () => {
        parsed = JSON.parse(line);
      },
      `stdout line is not JSON: ${line.slice(0, 200)}`,
    ).not.toThrow();
    expect(
      JSONRPCMessageSchema.safeParse(parsed).success,
      `stdout line is not JSON-RPC: ${line.slice(0, 200)}`,
    ).toBe(true);
  }
  expect(stdout).not.toContain('"service":"orchestrator"');
}

describe('stdio ingress (main.ts --stdio)', () => {
  it('speaks only JSON-RPC on stdout, logs to stderr, and serves tools', async () => {
    const gw = await startStdioGateway();
    expect(gw.client.getServerVersion()?.name).toBe('interceptor-fleet');
    expect(gw.client.getServerCapabilities()?.tools).toBeDefined();

    const tools = await gw.client.listTools();
    expect(tools.tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(['echo', 'slow', 'bump']),
    );
    const result = await gw.client.callTool({ name: 'echo', arguments: { text: 'over stdio' } });
    expect(textOf(result)).toBe('[fx] over stdio');
    // The stdio principal is the local user.
    expect(gw.principals).toEqual([{ type: 'user', id: userInfo().username }]);

    expect(gw.transportErrors).toEqual([]);
    expect(gw.recordsStdout).toBe(true);
    expectOnlyJsonRpc(gw.stdout());
    // Logs are JSON lines on stderr.
    await waitFor(() => gw.stderr().includes('backend connected'), 2000, 'a log line on stderr');
    const firstLog =
      gw
        .stderr()
        .split('\n')
        .find((l) => l.includes('backend connected')) ?? '';
    expect(JSON.parse(firstLog)).toMatchObject({ name: 'orchestrator', backend: 'fx' });
  });

  it('exits by itself when the client closes stdin', async () => {
    const gw = await startStdioGateway();
    await gw.client.listTools();
    const started = performance.now();
    // StdioClientTransport.close ends stdin, waits up to 2 s, and only then sends SIGTERM.
    await gw.client.close();
    const closedIn = performance.now() - started;
    expect(alive(gw.pid)).toBe(false);
    expect(closedIn).toBeLessThan(1900);
  });

  it('answers every request a client piped in before closing stdin', async () => {
    // `cat requests | fleet stdio`: stdin ends right after the last request, long before the
    // answers are ready. Each must still be answered (they used to fail with "backend
    // closed the connection" as shutdown closed the backends under them).
    const { dir, env } = await stdioFleet();
    const child = spawnStdio(dir, env);
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    child.stderr.resume();
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const call = (id: number, name: string, args: Record<string, unknown>) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name, arguments: args },
    });
    const requests = [
      SESSION_INIT,
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      call(2, 'echo', { text: 'first' }),
      call(3, 'slow', { ms: 300 }),
      call(4, 'echo', { text: 'last' }),
    ];
    child.stdin.end(`${requests.map((r) => JSON.stringify(r)).join('\n')}\n`);
    expect(await exited).toBe(0);
    const answers = new Map<unknown, { result?: unknown; error?: unknown }>();
    for (const line of stdout.split('\n').filter((l) => l.trim() !== '')) {
      const message = JSON.parse(line) as { id?: unknown; result?: unknown; error?: unknown };
      if (message.id !== undefined) answers.set(message.id, message);
    }
    expect(answers.get(2)?.error).toBeUndefined();
    expect(textOf(answers.get(2)?.result)).toBe('[fx] first');
    expect(textOf(answers.get(3)?.result)).toBe('[fx] waited 300 ms');
    expect(textOf(answers.get(4)?.result)).toBe('[fx] last');
  });

  it('answers a line that is not JSON, a batch, a non-message and a line over maxBodyBytes with their JSON-RPC errors, and serves on', async () => {
    const { dir, env } = await stdioFleet('limits: {maxBodyBytes: 4096}\n');
    const child = spawnStdio(dir, env);
    child.stderr.resume();
    const answers: Array<{
      id?: unknown;
      result?: unknown;
      error?: { code: number; message: string; data?: unknown };
    }> = [];
    let unread = '';
    child.stdout.on('data', (chunk: Buffer) => {
      const lines = (unread + chunk.toString('utf8')).split('\n');
      unread = lines.pop() ?? '';
      for (const line of lines) if (line.trim() !== '') answers.push(JSON.parse(line));
    });
    const echo = (id: number, text: string) =>
      JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text } },
      });
    child.stdin.write(
      `${[
        JSON.stringify(SESSION_INIT),
        JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
        'this is not json',
        JSON.stringify([{ jsonrpc: '2.0', id: 5, method: 'ping' }]),
        JSON.stringify({ jsonrpc: '2.0', id: 6 }),
        echo(7, 'x'.repeat(5000)),
        echo(8, 'small'),
      ].join('\n')}\n`,
    );
    await waitFor(() => answers.some((a) => a.id === 8), 20_000, 'the answer to the last call');
    child.stdin.end();
    const refusals = answers.filter((a) => a.id !== 1 && a.id !== 8);
    expect(refusals).toEqual([
      { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: line is not valid JSON' } },
      { jsonrpc: '2.0', error: { code: -32600, message: 'JSON-RPC batches are not supported' } },
      {
        jsonrpc: '2.0',
        id: 6,
        error: { code: -32600, message: 'Invalid Request: expected a JSON-RPC message object' },
      },
      {
        jsonrpc: '2.0',
        id: 7,
        error: {
          code: -32600,
          message: 'Request exceeds 4096 bytes',
          data: { reason: 'limit_exceeded', limit: 'maxBodyBytes', max: 4096 },
        },
      },
    ]);
    expect(textOf(answers.find((a) => a.id === 8)?.result)).toBe('[fx] small');
  });

  it('keeps stdout clean when spans are exported to the console', async () => {
    const gw = await startStdioGateway({
      OTEL_TRACES_EXPORTER: 'console',
      OTEL_SERVICE_NAME: 'orchestrator-stdio',
    });
    for (let i = 0; i < 3; i++) {
      expect(textOf(await gw.client.callTool({ name: 'echo', arguments: { text: `n${i}` } }))).toBe(
        `[fx] n${i}`,
      );
    }
    // Give the simple span processor time to write.
    await new Promise((r) => setTimeout(r, 300));
    expect(gw.transportErrors).toEqual([]);
    expectOnlyJsonRpc(gw.stdout());
  });
});
