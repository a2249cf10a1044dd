/**
 * Tool pinning over real HTTP and real Redis: the first definition of each tool is pinned by
 * tool-filter, a changed one is hidden and its calls refused by policy-validator until an
 * operator approves it on `/policy/pins`, or forgets its pin (the next listing pins it
 * afresh); state shared by two instances through Redis.
 */
import { PolicyLoadError } from '@fleet/policy';
import { describe, expect, it } from 'vitest';
import { createPolicySource, RedisPinStore, toolDigest } from '../src/app.ts';
import {
  names,
  PINNED,
  poisoned,
  policyFile,
  readFile,
  recordingLogger,
  search,
  sharedRedis,
  startService,
} from './pin-service.ts';
import { unreachableRedis } from './redis.ts';

describe('tool pinning', () => {
  it('pins the first list and passes the same list again unchanged', async () => {
    const store = sharedRedis();
    const svc = await startService({ policy: PINNED, ...store });
    expect(await store.keys()).toEqual([]);
    const first = await svc.list(readFile, search);
    expect(first).toMatchObject({ modified: false });
    expect(names(first)).toEqual(['read_file', 'search']);
    const stored = await store.redis.hgetall(`${store.prefix}:digests`);
    expect(Object.keys(stored).sort()).toEqual(['read_file', 'search']);
    expect(JSON.parse(stored.read_file ?? '{}')).toMatchObject({ digest: toolDigest(readFile) });
    // Only what the model reads counts: another _meta is the same definition.
    const again = await svc.list({ ...readFile, _meta: { v: 2 } }, search);
    expect(again).toMatchObject({ modified: false });
    expect(names(again)).toEqual(['read_file', 'search']);
    expect(await store.redis.hlen(`${store.prefix}:drifts`)).toBe(0);
  });

  it('hides a changed tool and refuses its calls until an operator approves it', async () => {
    const store = sharedRedis();
    const { log, warnings } = recordingLogger();
    const svc = await startService({ policy: PINNED, ...store, log });
    await svc.list(readFile, search);
    expect((await svc.call('read_file')).valid).toBe(true);

    const drifted = await svc.list(poisoned, search);
    expect(drifted).toMatchObject({ modified: true, info: { drifted: 1 } });
    expect(names(drifted)).toEqual(['search']);
    expect(JSON.stringify(drifted)).not.toContain('id_rsa');
    // Logged once, with the name and digests, never the description.
    await svc.list(poisoned, search);
    const driftLogs = warnings.filter((w) => w.obj.tool === 'read_file');
    expect(driftLogs).toEqual([
      {
        obj: {
          tool: 'read_file',
          pinned: toolDigest(readFile),
          seen: toolDigest(poisoned),
          firstSeen: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        },
        msg: expect.stringContaining('drifted'),
      },
    ]);
    expect(JSON.stringify(warnings)).not.toContain('id_rsa');

    const refused = await svc.call('read_file');
    expect(refused.valid).toBe(false);
    const reason = refused.messages?.[0]?.message ?? '';
    expect(reason).toContain('tool "read_file" changed since it was pinned');
    expect(reason).toContain(String(driftLogs[0]?.obj.firstSeen));
    expect(reason).toContain('POST /policy/pins/read_file/approve');
    expect((await svc.call('search')).valid).toBe(true);

    const state = await svc.pins();
    expect(state.status).toBe(200);
    expect(await state.json()).toEqual({
      enabled: true,
      pins: [
        { tool: 'read_file', digest: toolDigest(readFile), pinnedAt: expect.any(String) },
        { tool: 'search', digest: toolDigest(search), pinnedAt: expect.any(String) },
      ],
      drifts: [
        {
          tool: 'read_file',
          pinned: toolDigest(readFile),
          seen: toolDigest(poisoned),
          firstSeen: driftLogs[0]?.obj.firstSeen,
        },
      ],
    });

    // An approval names what was reviewed: a digest that is not the one seen is refused.
    const stale = await svc.approve('read_file', `?digest=${toolDigest(readFile)}`);
    expect(stale.status).toBe(409);
    expect(await stale.json()).toMatchObject({ error: { code: 'CONFLICT' } });
    const approved = await svc.approve('read_file', `?digest=${toolDigest(poisoned)}`);
    expect(approved.status).toBe(200);
    expect(await approved.json()).toMatchObject({
      tool: 'read_file',
      digest: toolDigest(poisoned),
    });
    const listed = await svc.list(poisoned, search);
    expect(listed).toMatchObject({ modified: false });
    expect(names(listed)).toEqual(['read_file', 'search']);
    expect((await svc.call('read_file')).valid).toBe(true);
    expect(await svc.drifts()).toEqual([]);
  });

  it('answers approve of a tool without drift with 404 and guards both endpoints', async () => {
    const store = sharedRedis();
    const svc = await startService({ policy: PINNED, ...store });
    await svc.list(readFile);
    // A name with a slash reaches the route percent-encoded, as the deny message writes it.
    for (const tool of ['read_file', 'never_seen', 'fs/read file']) {
      const reply = await svc.approve(tool);
      expect(reply.status).toBe(404);
      expect(await reply.json()).toEqual({
        error: { code: 'NOT_FOUND', message: `tool "${tool}" has no drift to approve` },
      });
    }
    const bad = await svc.approve('read_file', '?digest=abc');
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: 'INVALID_REQUEST' } });
    for (const reply of [await svc.pins({}), await svc.approve('read_file', '', {})]) {
      expect(reply.status).toBe(401);
      expect(await reply.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
    }
  });

  it('forgets a pin and its drift on DELETE /policy/pins/{tool}: the next listing pins the tool afresh', async () => {
    const store = sharedRedis();
    const svc = await startService({ policy: PINNED, ...store });
    await svc.list(readFile, search);
    await svc.list(poisoned, search);
    expect((await svc.call('read_file')).valid).toBe(false);

    const forgotten = await svc.forget('read_file');
    expect(forgotten.status).toBe(204);
    expect(await forgotten.text()).toBe('');
    expect(await (await svc.pins()).json()).toEqual({
      enabled: true,
      pins: [{ tool: 'search', digest: toolDigest(search), pinnedAt: expect.any(String) }],
      drifts: [],
    });
    // Not pinned, with room in the store: a call passes, as for any tool not yet listed.
    expect((await svc.call('read_file')).valid).toBe(true);
    // Trust on first use again: whatever is listed next is pinned, unreviewed.
    const listed = await svc.list(poisoned, search);
    expect(listed).toMatchObject({ modified: false });
    expect(names(listed)).toEqual(['read_file', 'search']);
    const pin = await store.redis.hget(`${store.prefix}:digests`, 'read_file');
    expect(JSON.parse(pin ?? '{}')).toMatchObject({ digest: toolDigest(poisoned) });
    // ... and the definition pinned before is now the drift.
    expect(names(await svc.list(readFile, search))).toEqual(['search']);
    expect(await svc.drifts()).toEqual([
      expect.objectContaining({ tool: 'read_file', pinned: toolDigest(poisoned) }),
    ]);
  });

  it('answers forget of a tool without pin with 404, takes an encoded name, and guards it', async () => {
    const store = sharedRedis();
    const svc = await startService({ policy: PINNED, ...store });
    await svc.list({ ...search, name: 'fs/read file' }, readFile);
    for (const tool of ['never_seen', 'fs/read']) {
      const reply = await svc.forget(tool);
      expect(reply.status).toBe(404);
      expect(await reply.json()).toEqual({
        error: { code: 'NOT_FOUND', message: `tool "${tool}" is not pinned` },
      });
    }
    for (const headers of [{}, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
      const reply = await svc.forget('read_file', headers);
      expect(reply.status).toBe(401);
      expect(await reply.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
    }
    expect((await svc.forget('fs/read file')).status).toBe(204);
    expect((await svc.forget('fs/read file')).status).toBe(404);
    expect(Object.keys(await store.redis.hgetall(`${store.prefix}:digests`))).toEqual([
      'read_file',
    ]);
  });

  it('changes nothing and writes nothing to Redis when off', async () => {
    const store = sharedRedis();
    const svc = await startService({ policy: 'version: 1\ndefault: allow\n', ...store });
    await svc.list(readFile, search);
    const changed = await svc.list(poisoned, search);
    expect(changed).toMatchObject({ modified: false });
    expect(changed.payload.tools).toEqual([poisoned, search]);
    expect((await svc.call('read_file')).valid).toBe(true);
    expect(await store.keys()).toEqual([]);
    expect(await (await svc.pins()).json()).toEqual({ enabled: false, pins: [], drifts: [] });
  });

  it('shares pins between two instances through Redis', async () => {
    const store = sharedRedis();
    const one = await startService({ policy: PINNED, ...store });
    const two = await startService({ policy: PINNED, ...store });
    await one.list(readFile, search);
    expect(names(await two.list(poisoned, search))).toEqual(['search']);
    expect(names(await one.list(poisoned, search))).toEqual(['search']);
    expect((await one.call('read_file')).valid).toBe(false);
    expect(await one.drifts()).toHaveLength(1);
    expect((await two.approve('read_file')).status).toBe(200);
    expect((await one.call('read_file')).valid).toBe(true);
    expect(names(await one.list(poisoned, search))).toEqual(['read_file', 'search']);
  });

  it('refuses calls to a drifted tool also when the policy does not govern tools/call', async () => {
    const store = sharedRedis();
    const svc = await startService({
      policy: 'version: 1\ndefault: deny\nevents: ["prompts/get"]\npinning: {enabled: true}\n',
      ...store,
    });
    await svc.list(readFile, search);
    await svc.list(poisoned, search);
    expect((await svc.call('read_file')).valid).toBe(false);
    // The policy's default deny is for prompts/get only.
    expect((await svc.call('search')).valid).toBe(true);
  });

  it('follows pinning.failOpen when Redis is unreachable', async () => {
    const store = sharedRedis(unreachableRedis());
    const open = await startService({ policy: PINNED, ...store });
    expect(names(await open.list(poisoned, search))).toEqual(['read_file', 'search']);
    expect((await open.call('read_file')).valid).toBe(true);
    expect((await open.pins()).status).toBe(503);
    const forget = await open.forget('read_file');
    expect(forget.status).toBe(503);
    expect(await forget.json()).toEqual({
      error: { code: 'STORE_UNAVAILABLE', message: 'the tool pin store is unavailable' },
    });

    const closed = await startService({
      policy: PINNED.replace('{enabled: true}', '{enabled: true, failOpen: false}'),
      ...store,
    });
    expect(await closed.listError(readFile)).toMatchObject({
      code: -32603,
      data: { interceptor: 'tool-filter' },
    });
    const refused = await closed.call('read_file');
    expect(refused.valid).toBe(false);
    expect(refused.messages?.[0]?.message).toContain('fail closed');
  });

  it('refuses a bad pinning block at load, naming the key', async () => {
    for (const [text, path, message] of [
      ['pinning: {enabld: true}', 'pinning.enabld', 'did you mean "enabled"?'],
      ['pinning: {enabled: "yes"}', 'pinning.enabled', 'boolean'],
    ] as const) {
      const error = await createPolicySource({
        path: policyFile(`version: 1\n${text}\n`),
        events: { loaded: () => undefined, rejected: () => undefined },
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PolicyLoadError);
      expect((error as PolicyLoadError).issues).toEqual([
        expect.objectContaining({ path, message: expect.stringContaining(message) }),
      ]);
    }
  });
});

describe('a bounded pin store', () => {
  const tool = (name: string) => ({ name, description: `the ${name} tool`, inputSchema: {} });
  const FAIL_CLOSED = PINNED.replace('{enabled: true}', '{enabled: true, failOpen: false}');
  const storeFullWarnings = (warnings: ReturnType<typeof recordingLogger>['warnings']) =>
    warnings.filter((w) => w.msg.startsWith('tool pin store full'));

  it('pins at most maxTools; with failOpen a never-seen tool beyond them passes unpinned, warned once', async () => {
    const store = sharedRedis();
    const { log, warnings } = recordingLogger();
    const svc = await startService({ policy: PINNED, ...store, log, maxTools: 2 });
    const listed = await svc.list(tool('a'), tool('b'), tool('c'));
    expect(listed).toMatchObject({ modified: false });
    expect(names(listed)).toEqual(['a', 'b', 'c']);
    const pinned = await store.redis.hgetall(`${store.prefix}:digests`);
    expect(Object.keys(pinned).sort()).toEqual(['a', 'b']);
    // Still no room: not pinned, not hidden, and no second warning within the minute.
    expect(names(await svc.list(tool('a'), tool('b'), tool('c'), tool('d')))).toEqual([
      'a',
      'b',
      'c',
      'd',
    ]);
    expect((await svc.call('c')).valid).toBe(true);
    expect(await store.redis.hlen(`${store.prefix}:digests`)).toBe(2);
    expect(storeFullWarnings(warnings)).toEqual([
      {
        obj: { maxTools: 2, action: 'passed', unpinned: 1, example: 'c' },
        msg: expect.stringContaining('never-seen tools pass unpinned and unverified'),
      },
    ]);
  });

  it('hides and refuses the tools it cannot pin when pinning fails closed', async () => {
    const store = sharedRedis();
    const { log, warnings } = recordingLogger();
    const svc = await startService({ policy: FAIL_CLOSED, ...store, log, maxTools: 2 });
    const listed = await svc.list(tool('a'), tool('b'), tool('c'));
    expect(listed).toMatchObject({ modified: true, info: { unpinned: 1 } });
    expect(listed.info).not.toHaveProperty('drifted');
    expect(names(listed)).toEqual(['a', 'b']);
    const refused = await svc.call('c');
    expect(refused).toMatchObject({ valid: false, info: { pinning: 'store_full' } });
    expect(refused.messages?.[0]?.message).toContain(
      'tool "c" is not pinned and cannot be: the tool pin store is full (2 tools) and pinning is configured to fail closed; an operator can forget pins no longer needed (`fleet pins forget`) or raise PINNING_MAX_TOOLS',
    );
    // Unverifiable too: a tool never listed, while there is no room to pin it.
    expect((await svc.call('never-listed')).valid).toBe(false);
    expect((await svc.call('a')).valid).toBe(true);
    expect(storeFullWarnings(warnings)).toEqual([
      {
        obj: { maxTools: 2, action: 'hidden', unpinned: 1, example: 'c' },
        msg: expect.stringContaining('hidden and refused (fail closed)'),
      },
    ]);
  });

  it('keeps checking pinned tools, and approving their drifts, when full', async () => {
    const store = sharedRedis();
    const svc = await startService({ policy: FAIL_CLOSED, ...store, maxTools: 2 });
    await svc.list(readFile, search);
    const drifted = await svc.list(poisoned, search, tool('c'));
    expect(drifted).toMatchObject({ modified: true, info: { drifted: 1, unpinned: 1 } });
    expect(names(drifted)).toEqual(['search']);
    expect((await svc.call('read_file')).valid).toBe(false);
    const approved = await svc.approve('read_file', `?digest=${toolDigest(poisoned)}`);
    expect(approved.status).toBe(200);
    expect(names(await svc.list(poisoned, search))).toEqual(['read_file', 'search']);
    expect((await svc.call('read_file')).valid).toBe(true);
    expect(await store.redis.hlen(`${store.prefix}:digests`)).toBe(2);
  });

  it('never pins more than maxTools, however many replicas list new tools at once', async () => {
    const store = sharedRedis();
    const one = await startService({ policy: PINNED, ...store, maxTools: 50 });
    const two = await startService({ policy: PINNED, ...store, maxTools: 50 });
    const batch = (side: string) => Array.from({ length: 40 }, (_, i) => tool(`${side}-${i}`));
    await Promise.all([
      one.list(...batch('one')),
      two.list(...batch('two')),
      one.list(...batch('three')),
      two.list(...batch('four')),
    ]);
    expect(await store.redis.hlen(`${store.prefix}:digests`)).toBe(50);
  });

  it('refuses a maxTools that is not an integer >= 1', () => {
    const redis = unreachableRedis();
    try {
      for (const maxTools of [0, -1, 1.5, Number.NaN])
        expect(() => new RedisPinStore(redis, { maxTools })).toThrow(RangeError);
      expect(new RedisPinStore(redis).maxTools).toBe(10_000);
    } finally {
      redis.disconnect();
    }
  });
});

describe('forgetting a pin in the store', () => {
  const digest = (hex: string) => hex.repeat(64);
  const pinStore = (store: ReturnType<typeof sharedRedis>, maxTools?: number) =>
    new RedisPinStore(store.redis, {
      prefix: store.prefix,
      ...(maxTools === undefined ? {} : { maxTools }),
    });

  it("removes one tool's pin and drift together, and says whether there was either", async () => {
    const store = sharedRedis();
    const pins = pinStore(store);
    await pins.check([
      { name: 'read_file', digest: digest('a') },
      { name: 'search', digest: digest('b') },
    ]);
    await pins.check([{ name: 'read_file', digest: digest('c') }]);
    expect(await pins.verify('read_file')).toMatchObject({ status: 'drifted' });

    expect(await pins.forget('read_file')).toBe(true);
    expect(await pins.list()).toEqual({
      pins: [{ tool: 'search', digest: digest('b'), pinnedAt: expect.any(String) }],
      drifts: [],
    });
    expect(await pins.verify('read_file')).toEqual({ status: 'ok' });
    expect(await pins.forget('read_file')).toBe(false);
    expect(await pins.forget('never_seen')).toBe(false);
    // A pin without a drift.
    expect(await pins.forget('search')).toBe(true);
    expect(await store.keys()).toEqual([]);
  });

  it('lets the next check pin the tool afresh, whatever it shows then', async () => {
    const store = sharedRedis();
    const pins = pinStore(store);
    await pins.check([{ name: 'read_file', digest: digest('a') }]);
    await pins.check([{ name: 'read_file', digest: digest('c') }]);
    await pins.forget('read_file');
    expect(await pins.check([{ name: 'read_file', digest: digest('c') }])).toEqual({
      hidden: new Set(),
      drifted: [],
      unpinned: [],
    });
    expect((await pins.list()).pins).toEqual([
      { tool: 'read_file', digest: digest('c'), pinnedAt: expect.any(String) },
    ]);
  });

  it('makes room in a full store', async () => {
    const store = sharedRedis();
    const pins = pinStore(store, 1);
    await pins.check([{ name: 'old', digest: digest('a') }]);
    expect((await pins.check([{ name: 'new', digest: digest('b') }])).unpinned).toEqual(['new']);
    expect(await pins.verify('new')).toEqual({ status: 'store-full' });
    expect(await pins.forget('old')).toBe(true);
    expect((await pins.check([{ name: 'new', digest: digest('b') }])).unpinned).toEqual([]);
    expect((await pins.list()).pins.map((p) => p.tool)).toEqual(['new']);
  });

  it("leaves another prefix's pin of the same tool alone (fleets sharing one Redis)", async () => {
    const one = sharedRedis();
    const two = sharedRedis();
    const pins = [pinStore(one), pinStore(two)] as const;
    for (const store of pins) {
      await store.check([{ name: 'read_file', digest: digest('a') }]);
      await store.check([{ name: 'read_file', digest: digest('c') }]);
    }
    expect(await pins[0].forget('read_file')).toBe(true);
    expect(await one.keys()).toEqual([]);
    expect(await pins[1].list()).toMatchObject({
      pins: [{ tool: 'read_file', digest: digest('a') }],
      drifts: [{ tool: 'read_file', seen: digest('c') }],
    });
  });

  it('throws when the store cannot be reached', async () => {
    const redis = unreachableRedis();
    try {
      await expect(new RedisPinStore(redis).forget('read_file')).rejects.toThrow();
    } finally {
      redis.disconnect();
    }
  });
});
