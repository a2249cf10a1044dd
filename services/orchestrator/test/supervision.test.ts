/**
 * Supervision of a stdio backend: when the child dies (SIGKILL), the call in flight fails at
 * once with a JSON-RPC error instead of hanging, the gateway starts a new child by itself,
 * and calls succeed again.
 */
import { randomUUID } from 'node:crypto';
import { stdioBackendCommand } from '@fleet/test-fixtures';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import {
  alive,
  childrenMatching,
  connectClient,
  defer,
  startGateway,
  textOf,
  waitFor,
} from './harness.ts';

describe('stdio backend supervision', () => {
  it('fails the call in flight when the child dies, restarts the child, and serves again', async () => {
    const name = `sup-${randomUUID().slice(0, 8)}`;
    const command = stdioBackendCommand({ name });
    const gateway = await startGateway(
      `backends:\n  - id: kid\n    command: ${JSON.stringify(command.command)}\n    args: ${JSON.stringify(command.args)}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'one' } }))).toBe(
      `[${name}] one`,
    );
    const needles = ['stdio-backend.ts', name];
    const [first, ...others] = childrenMatching(needles);
    expect(others).toEqual([]);
    expect(first).toBeDefined();
    const pid = first as number;

    // A long call is in flight when the child is killed.
    const inFlight = client.callTool({ name: 'slow', arguments: { ms: 15_000 } }).then(
      () => ({ ok: true as const }),
      (error: unknown) => ({ error }),
    );
    await new Promise((r) => setTimeout(r, 200));
    const killedAt = performance.now();
    process.kill(pid, 'SIGKILL');
    const outcome = await inFlight;
    expect(performance.now() - killedAt).toBeLessThan(2000);
    expect('error' in outcome).toBe(true);
    const error = (outcome as { error: unknown }).error;
    expect(error).toBeInstanceOf(McpError);
    // Like any transport failure of a backend: -32603 naming it.
    expect((error as McpError).code).toBe(-32603);
    expect((error as McpError).data).toMatchObject({ reason: 'connection closed' });
    await waitFor(() => !alive(pid), 2000, 'the killed child to be gone');

    // The gateway restarts the child on its own (no client call needed)...
    let restarted: number | undefined;
    await waitFor(
      () => {
        restarted = childrenMatching(needles).find((p) => p !== pid);
        return restarted !== undefined;
      },
      10_000,
      'a new stdio child',
    );
    expect(restarted).not.toBe(pid);

    // ...and calls succeed again once it is connected.
    let answer = '';
    await waitFor(
      async () => {
        answer = await client
          .callTool({ name: 'echo', arguments: { text: 'two' } })
          .then(textOf, () => '');
        return answer !== '';
      },
      10_000,
      'a successful call after the restart',
    );
    expect(answer).toBe(`[${name}] two`);
    expect(childrenMatching(needles)).toEqual([restarted]);
  });

  it('keeps exactly one child when a call reconnects before the scheduled restart, and stops it on close', async () => {
    const name = `sup-${randomUUID().slice(0, 8)}`;
    const needles = ['stdio-backend.ts', name];
    defer(async () => {
      for (const pid of childrenMatching(needles)) process.kill(pid, 'SIGKILL');
    });
    const command = stdioBackendCommand({ name });
    const gateway = await startGateway(
      `backends:\n  - id: kid\n    command: ${JSON.stringify(command.command)}\n    args: ${JSON.stringify(command.args)}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    await client.callTool({ name: 'echo', arguments: { text: 'one' } });
    const [pid] = childrenMatching(needles);
    expect(pid).toBeDefined();
    process.kill(pid as number, 'SIGKILL');
    await waitFor(() => !alive(pid as number), 2000, 'the killed child to be gone');
    await new Promise((r) => setTimeout(r, 50));

    // A call arrives before the background restart is due (its first delay is 500 ms) and
    // reconnects on demand.
    const answer = await client
      .callTool({ name: 'echo', arguments: { text: 'two' } })
      .then(textOf, (e: unknown) => `error: ${String(e)}`);
    expect(answer).toBe(`[${name}] two`);
    // Once the scheduled restart time has passed, there is still one child, not two.
    await new Promise((r) => setTimeout(r, 1500));
    expect(childrenMatching(needles)).toHaveLength(1);

    // Closing the orchestrator stops its child.
    await gateway.orchestrator.close();
    await waitFor(() => childrenMatching(needles).length === 0, 5000, 'no stdio child left');
  });
});
