import { BulkheadRejectedError, TaskCancelledError } from 'cockatiel';
import { describe, expect, it } from 'vitest';
import { FairGate, fairnessKeyOf, GATEWAY_FAIRNESS_KEY, shownFairnessKey } from './fair-gate.ts';

/** Let every pending promise reaction run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

type Outcome = 'done' | 'refused' | 'cancelled';

/**
 * A gate whose calls run until the test finishes them. A call's label is its key followed by
 * digits (`a1` is key `a`'s); `started` lists the labels in the order they got a slot.
 */
function gateWith(maxRunning: number, maxQueued: number) {
  const gate = new FairGate({ maxRunning, maxQueued });
  const started: string[] = [];
  const outcomes = new Map<string, Outcome>();
  const finishers = new Map<string, () => void>();
  let concurrent = 0;
  let mostConcurrent = 0;
  const submit = (label: string, signal?: AbortSignal) =>
    gate
      .execute(
        label.replace(/\d+$/, ''),
        () => {
          started.push(label);
          mostConcurrent = Math.max(mostConcurrent, ++concurrent);
          return new Promise<string>((resolve) =>
            finishers.set(label, () => {
              concurrent--;
              resolve(label);
            }),
          );
        },
        signal,
      )
      .then(
        (value) => {
          outcomes.set(label, 'done');
          return value;
        },
        (error: unknown) => {
          if (error instanceof BulkheadRejectedError) outcomes.set(label, 'refused');
          else if (error instanceof TaskCancelledError) outcomes.set(label, 'cancelled');
          else throw error;
          return undefined;
        },
      );
  /** Finish the running call `label` and let the next one start. */
  const finish = async (label: string) => {
    const finisher = finishers.get(label);
    if (finisher === undefined) throw new Error(`${label} is not running`);
    finisher();
    await settle();
  };
  /** Finish the running calls one at a time, in the order they started, until none runs. */
  const drain = async () => {
    for (let i = 0; i < started.length; i++) await finish(started[i] as string);
  };
  const refused = () => [...outcomes].filter(([, o]) => o === 'refused').map(([label]) => label);
  return {
    gate,
    started,
    outcomes,
    submit,
    finish,
    drain,
    refused,
    mostConcurrent: () => mostConcurrent,
  };
}

describe('FairGate', () => {
  it('runs a call at once while a slot is free and resolves with its value', async () => {
    const t = gateWith(2, 2);
    const first = t.submit('a1');
    const second = t.submit('a2');
    await settle();
    expect(t.started).toEqual(['a1', 'a2']);
    expect(t.gate.running).toBe(2);
    expect(t.gate.queued).toBe(0);
    await t.drain();
    expect(await first).toBe('a1');
    expect(await second).toBe('a2');
    expect(t.gate.running).toBe(0);
  });

  // One slot, held by `hog`; the arrivals queue behind it (maxQueued of them), then the slot
  // passes on one call at a time.
  it.each([
    {
      why: 'one key is served in arrival order',
      maxQueued: 3,
      arrivals: 'a1 a2 a3',
      refused: '',
      order: 'a1 a2 a3',
    },
    {
      why: 'keys are served in turn, each in arrival order',
      maxQueued: 6,
      arrivals: 'a1 a2 a3 b1 b2 c1',
      refused: '',
      order: 'a1 b1 c1 a2 b2 a3',
    },
    {
      why: 'a key that came late is served on the next turn, not after the backlog',
      maxQueued: 4,
      arrivals: 'a1 a2 a3 b1',
      refused: '',
      order: 'a1 b1 a2 a3',
    },
    {
      why: 'a full queue refuses a newcomer of the key that holds the most',
      maxQueued: 3,
      arrivals: 'a1 a2 a3 a4',
      refused: 'a4',
      order: 'a1 a2 a3',
    },
    {
      why: 'a newcomer of a smaller key takes the place of the biggest key’s newest call',
      maxQueued: 3,
      arrivals: 'a1 a2 a3 b1',
      refused: 'a3',
      order: 'a1 b1 a2',
    },
    {
      why: 'each newcomer of a smaller key evicts, until the keys hold as many',
      maxQueued: 4,
      arrivals: 'a1 a2 a3 a4 b1 b2 b3',
      refused: 'a4 a3 b3',
      order: 'a1 b1 a2 b2',
    },
    {
      why: 'a newcomer whose key holds as many as the biggest is refused',
      maxQueued: 3,
      arrivals: 'a1 b1 c1 c2',
      refused: 'c2',
      order: 'a1 b1 c1',
    },
    {
      why: 'between equally big keys, the newest call is evicted',
      maxQueued: 4,
      arrivals: 'a1 a2 b1 b2 c1',
      refused: 'b2',
      order: 'a1 b1 c1 a2',
    },
    {
      why: 'between equally big keys, arrival decides, not the keys’ turn order',
      maxQueued: 4,
      arrivals: 'b1 b2 a1 a2 c1',
      refused: 'a2',
      order: 'b1 a1 c1 b2',
    },
  ])('$why', async ({ maxQueued, arrivals, refused, order }) => {
    const t = gateWith(1, maxQueued);
    void t.submit('hog');
    for (const label of arrivals.split(' ')) void t.submit(label);
    await settle();
    expect(t.refused()).toEqual(refused === '' ? [] : refused.split(' '));
    expect(t.gate.queued).toBe(Math.min(maxQueued, arrivals.split(' ').length));
    await t.drain();
    expect(t.started.slice(1).join(' ')).toBe(order);
    expect(t.mostConcurrent()).toBe(1);
    expect(t.gate.running).toBe(0);
    expect(t.gate.queued).toBe(0);
  });

  it('never runs more than maxRunning calls nor holds more than maxQueued waiting', async () => {
    const t = gateWith(2, 3);
    const labels = Array.from({ length: 12 }, (_, i) => `${'abc'[i % 3]}${i}`);
    for (const label of labels) void t.submit(label);
    await settle();
    expect(t.gate.running).toBe(2);
    expect(t.gate.queued).toBe(3);
    expect(t.refused()).toHaveLength(7);
    await t.drain();
    expect(t.mostConcurrent()).toBe(2);
    expect(t.started).toHaveLength(5);
    expect([...t.outcomes.values()].filter((o) => o === 'done')).toHaveLength(5);
    expect(t.gate.running).toBe(0);
  });

  it('takes a waiting call whose signal aborts out of the queue at once: it never runs, and its place is free', async () => {
    const t = gateWith(1, 1);
    void t.submit('hog');
    const controller = new AbortController();
    const cancelled = t.submit('a1', controller.signal);
    await settle();
    expect(t.gate.queuedFor('a')).toBe(1);

    controller.abort();
    await cancelled;
    expect(t.outcomes.get('a1')).toBe('cancelled');
    expect(t.gate.queued).toBe(0);

    // The same key's next call finds the place free (it would be refused if a1 still held it).
    void t.submit('a2');
    await settle();
    expect(t.refused()).toEqual([]);
    await t.drain();
    expect(t.started).toEqual(['hog', 'a2']);
  });

  it('refuses a call whose signal was aborted before it came, without running it or taking a slot', async () => {
    const t = gateWith(1, 1);
    await t.submit('a1', AbortSignal.abort());
    expect(t.outcomes.get('a1')).toBe('cancelled');
    expect(t.started).toEqual([]);
    expect(t.gate.running).toBe(0);
  });

  it('lets a call that started run on when its signal aborts (the call itself answers the abort)', async () => {
    const t = gateWith(1, 1);
    void t.submit('hog');
    const controller = new AbortController();
    const call = t.submit('a1', controller.signal);
    await t.finish('hog');
    expect(t.started).toEqual(['hog', 'a1']);
    controller.abort();
    await t.finish('a1');
    expect(await call).toBe('a1');
  });

  it('passes the slot of a call that failed to the next one and rethrows its error', async () => {
    const gate = new FairGate({ maxRunning: 1, maxQueued: 1 });
    const failure = new Error('backend down');
    let fail: (error: Error) => void = () => {};
    const failing = gate.execute(
      'a',
      () => new Promise<never>((_resolve, reject) => (fail = reject)),
    );
    const next = gate.execute('b', () => 'served');
    fail(failure);
    await expect(failing).rejects.toBe(failure);
    expect(await next).toBe('served');
    expect(gate.running).toBe(0);
  });

  it('passes on the slot of a call whose function throws at once', async () => {
    const gate = new FairGate({ maxRunning: 1, maxQueued: 2 });
    let release: () => void = () => {};
    const hog = gate.execute('h', () => new Promise<void>((resolve) => (release = resolve)));
    const thrown = gate.execute('a', () => {
      throw new Error('no');
    });
    const next = gate.execute('b', () => 'served');
    release();
    await hog;
    await expect(thrown).rejects.toThrow('no');
    expect(await next).toBe('served');
    expect(gate.running).toBe(0);
  });
});

describe('fairnessKeyOf', () => {
  it.each([
    { principal: { type: 'user', id: 'alice' }, session: 's-1', key: 'principal user:alice' },
    { principal: { type: 'user', id: 'alice' }, session: undefined, key: 'principal user:alice' },
    { principal: { type: 'service', id: 'alice' }, session: 's-1', key: 'principal service:alice' },
    { principal: { type: 'anonymous' }, session: 's-1', key: 'session s-1' },
    { principal: { type: 'anonymous' }, session: undefined, key: 'anonymous' },
    // An id that reads like another kind of key still names a principal.
    {
      principal: { type: 'user', id: 'gateway' },
      session: undefined,
      key: 'principal user:gateway',
    },
  ] as const)('$key', ({ principal, session, key }) => {
    expect(fairnessKeyOf(principal, session)).toBe(key);
    expect(fairnessKeyOf(principal, session)).not.toBe(GATEWAY_FAIRNESS_KEY);
  });
});

describe('shownFairnessKey', () => {
  const scrub = (id: string) => `<${id.length}>`;
  it.each([
    {
      principal: { type: 'user', id: 'alice@example.com' },
      session: 's-1',
      shown: 'principal user:<17>',
    },
    // Only the first colon ends the type: the rest, colons and all, is the id.
    {
      principal: { type: 'service', id: 'a:b c' },
      session: undefined,
      shown: 'principal service:<5>',
    },
    { principal: { type: 'anonymous' }, session: 'secret-session-id', shown: 'session' },
    { principal: { type: 'anonymous' }, session: undefined, shown: 'anonymous' },
  ] as const)('$shown', ({ principal, session, shown }) => {
    expect(shownFairnessKey(fairnessKeyOf(principal, session), scrub)).toBe(shown);
  });

  it('shows the gateway’s own key as it is', () => {
    expect(shownFairnessKey(GATEWAY_FAIRNESS_KEY, scrub)).toBe(GATEWAY_FAIRNESS_KEY);
  });
});
