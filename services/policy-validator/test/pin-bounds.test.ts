/**
 * The pin store's size does not follow the length of tool names: a backend (or a direct
 * invoker of tool-filter) listing tools with megabyte names cannot grow Redis by as much per
 * pin, for good. Real HTTP, real Redis.
 */
import { describe, expect, it } from 'vitest';
import { MAX_PINNED_NAME_LENGTH, RedisPinStore } from '../src/app.ts';
import { names, PINNED, sharedRedis, startService } from './pin-service.ts';

const tool = (name: string) => ({ name, inputSchema: { type: 'object' } });

describe('pin store bounds', () => {
  it('keeps a pin of a name of 1 MB in a bounded field, still detecting its drift', async () => {
    const store = sharedRedis();
    const svc = await startService({ policy: PINNED, ...store });
    const long = (i: number) => `t${i}${'x'.repeat(1_000_000)}`;
    for (let i = 0; i < 20; i++) expect((await svc.list(tool(long(i)))).modified).toBe(false);
    const bytes = Number(await store.redis.call('MEMORY', 'USAGE', `${store.prefix}:digests`));
    // 20 MB of names before.
    expect(bytes).toBeLessThan(100_000);
    // The same tool changed is still a drift, hidden and refused.
    const changed = { ...tool(long(3)), description: 'now different' };
    expect(names(await svc.list(changed, tool('ok')))).toEqual(['ok']);
    expect((await svc.call(long(3))).valid).toBe(false);
    // A name within the bound is kept as it is, and a long one can be forgotten by its name.
    const fields = await store.redis.hkeys(`${store.prefix}:digests`);
    expect(fields).toContain('ok');
    expect(fields.every((f) => f.length <= MAX_PINNED_NAME_LENGTH)).toBe(true);
    const pins = new RedisPinStore(store.redis, { prefix: store.prefix });
    expect(await pins.forget(long(3))).toBe(true);
    expect(await pins.forget(long(3))).toBe(false);
  }, 60_000);
});
