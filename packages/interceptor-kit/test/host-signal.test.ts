/**
 * The handler's `ctx.signal`: made on first use, aborted when the invocation times out or
 * its caller gives up, whether the handler asked for it before or after that happened.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { allow, createInterceptorHost, defineValidator } from '../src/index.ts';

const call = (name: string, timeoutMs?: number) => ({
  name,
  event: 'tools/call',
  phase: 'request',
  payload: { name: 'echo' },
  ...(timeoutMs === undefined ? {} : { timeoutMs }),
});

/** A validator hooked on `tools/call` requests, with `handler`. */
const toolCallValidator = (
  name: string,
  handler: Parameters<typeof defineValidator>[0]['handler'],
) => defineValidator({ name, hooks: [{ events: ['tools/call'], phase: 'request' }], handler });

describe('the handler signal', () => {
  it('aborts on timeout, whether read before or after it', async () => {
    const seen: Record<string, AbortSignal> = {};
    let late: AbortSignal | undefined;
    const host = createInterceptorHost([
      toolCallValidator('early', async (_payload, ctx) => {
        seen.early = ctx.signal;
        await new Promise((resolve) => setTimeout(resolve, 200));
        return allow();
      }),
      toolCallValidator('late', async (_payload, ctx) => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        late = ctx.signal; // first read after the timeout fired
        return allow();
      }),
    ]);
    await expect(host.invoke(call('early', 30))).rejects.toMatchObject({
      code: -32603,
      data: { reason: 'timeout' },
    });
    expect(seen.early?.aborted).toBe(true);
    await expect(host.invoke(call('late', 30))).rejects.toMatchObject({
      data: { reason: 'timeout' },
    });
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(late?.aborted).toBe(true);
  });

  it("follows the caller's signal, and a handler that never reads it works", async () => {
    let signal: AbortSignal | undefined;
    const host = createInterceptorHost([
      toolCallValidator(
        'watcher',
        (_payload, ctx) =>
          new Promise((resolve) => {
            signal = ctx.signal;
            ctx.signal.addEventListener('abort', () => resolve(allow()));
          }),
      ),
      toolCallValidator('plain', () => allow()),
    ]);
    const caller = new AbortController();
    const pending = host.invoke(call('watcher', 5_000), { signal: caller.signal });
    await new Promise((resolve) => setTimeout(resolve, 20));
    caller.abort(new Error('gone'));
    await expect(pending).resolves.toMatchObject({ valid: true });
    expect(signal?.reason).toMatchObject({ message: 'gone' });
    await expect(host.invoke(call('plain'))).resolves.toMatchObject({ valid: true });
  });

  it("stops listening to a long-lived caller's signal once the invocation is over", async () => {
    let seen: AbortSignal | undefined;
    const host = createInterceptorHost([
      toolCallValidator('reader', (_payload, ctx) => {
        seen = ctx.signal;
        return allow();
      }),
    ]);
    const caller = new AbortController();
    for (let i = 0; i < 3; i++)
      await expect(host.invoke(call('reader'), { signal: caller.signal })).resolves.toMatchObject({
        valid: true,
      });
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
    caller.abort(new Error('later'));
    expect(seen?.aborted).toBe(false);
  });
});
