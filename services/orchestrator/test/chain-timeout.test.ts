/**
 * The chain budget (`chain.timeoutMs`): a validator slower than the budget aborts the request
 * phase with -32603 `{reason: "timeout", phase, timeoutMs}` long before the validator finishes,
 * and the backend is never called.
 */
import { allow, defineValidator } from '@fleet/interceptor-kit';
import { startHttpBackend } from '@fleet/test-fixtures';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, serveInterceptors, startGateway, textOf } from './harness.ts';

describe('chain timeout', () => {
  it('aborts a phase that exceeds chain.timeoutMs with -32603 and never calls the backend', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    let slowCalls = 0;
    const sleepy = defineValidator({
      name: 'sleepy',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: async (payload, ctx) => {
        // Only `bump` is slow, so the same gateway can show that fast calls still pass.
        if ((payload as { name?: unknown }).name !== 'bump') return allow();
        slowCalls += 1;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 2000);
          ctx.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
          });
        });
        return allow();
      },
    });
    const service = await serveInterceptors([sleepy]);
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${service.url}"\nchain: {timeoutMs: 200}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);

    const before = backend.state.counter;
    const started = performance.now();
    const error = await client.callTool({ name: 'bump', arguments: {} }).catch((e: unknown) => e);
    const elapsed = performance.now() - started;

    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32603);
    expect((error as McpError).data).toMatchObject({
      reason: 'timeout',
      phase: 'request',
      timeoutMs: 200,
    });
    expect(elapsed).toBeLessThan(1000);
    expect(slowCalls).toBe(1);

    // The validator's 2 s are long over before we look again: the backend never saw the call.
    await new Promise((r) => setTimeout(r, 300));
    expect(backend.state.counter).toBe(before);
    const request = gateway.executions.find(
      (e) => e.method === 'tools/call' && e.result.phase === 'request',
    );
    expect(request?.result.status).toBe('timeout');
    expect(
      gateway.executions.some((e) => e.method === 'tools/call' && e.result.phase === 'response'),
    ).toBe(false);

    // A call the validator answers at once is unaffected by the budget.
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'quick' } }))).toBe(
      '[fx] quick',
    );
  });
});
