/**
 * One client must not take what every client shares, through a real gateway and a real
 * backend over raw HTTP: a session (or a stateless principal) past
 * `limits.maxInFlightPerSession` gets its request refused at once as overloaded, while other
 * sessions go on; a principal past `limits.maxSessionsPerPrincipal` gets HTTP 429 for a new
 * session until it ends one; a principal that floods a backend past its
 * `resilience.maxConcurrent` slots waits in its own queue, served in turn with the others.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../src/config.ts';
import { startGateBackend } from './gate-backend.ts';
import { startGateway, waitFor } from './harness.ts';
import { postModern, type RawReply, rawPost, SESSION_INIT, SESSION_VERSION } from './raw-http.ts';

const TOKENS = `auth:
  mode: tokens
  tokens:
    - {token: alice-token-0001, principal: {id: alice}}
    - {token: bob-token-00002, principal: {id: bob}}
`;
const ALICE = { authorization: 'Bearer alice-token-0001' };
const BOB = { authorization: 'Bearer bob-token-00002' };

async function gatewayWith(limits: string, auth = '', backendUrl?: string, resilience = '{}') {
  const backend = backendUrl === undefined ? await startGateBackend() : undefined;
  const gateway = await startGateway(
    `backends:\n  - {id: gate, url: "${backendUrl ?? backend?.url}", resilience: ${resilience}}\nlimits: ${limits}\n${auth}`,
    { redis: false },
  );
  return { gateway, backend: backend as Awaited<ReturnType<typeof startGateBackend>> };
}

/** `initialize` as `who`: the raw reply. */
function initialize(url: string, who: Record<string, string> = {}): Promise<RawReply> {
  return rawPost(url, SESSION_INIT, who);
}

/** A raw session of `who` on `url`: its headers, and a way to send it requests. */
async function openSession(url: string, who: Record<string, string> = {}) {
  const init = await initialize(url, who);
  expect(init.status).toBe(200);
  const headers = {
    ...who,
    'mcp-session-id': String(init.headers['mcp-session-id']),
    'mcp-protocol-version': SESSION_VERSION,
  };
  const ready = await rawPost(
    url,
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    headers,
  );
  expect(ready.status).toBe(202);
  let nextId = 100;
  const request = (method: string, params: Record<string, unknown> = {}, signal?: AbortSignal) =>
    rawPost(
      url,
      { jsonrpc: '2.0', id: nextId++, method, params },
      headers,
      signal ? { signal } : {},
    );
  const call = (name: string, signal?: AbortSignal) =>
    request('tools/call', { name, arguments: {} }, signal);
  const notify = (method: string, params: Record<string, unknown> = {}) =>
    rawPost(url, { jsonrpc: '2.0', method, params }, headers);
  const end = () => rawPost(url, '', headers, { method: 'DELETE' });
  return { headers, request, call, notify, end, nextId: () => nextId };
}

function expectOverloaded(reply: RawReply, max: number): void {
  expect(reply.status).toBe(200);
  expect(reply.json.error?.code).toBe(-32603);
  expect(reply.json.error?.message).toMatch(/limits\.maxInFlightPerSession/);
  expect(reply.json.error?.data).toEqual({
    reason: 'overloaded',
    limit: 'maxInFlightPerSession',
    max,
  });
}

function expectTooManySessions(reply: RawReply, max: number): void {
  expect(reply.status).toBe(429);
  expect(reply.json).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32600 } });
  expect(reply.json.error?.message).toMatch(/limits\.maxSessionsPerPrincipal/);
  expect(reply.json.error?.data).toEqual({
    reason: 'limit_exceeded',
    limit: 'maxSessionsPerPrincipal',
    max,
  });
  expect(reply.headers['mcp-session-id']).toBeUndefined();
}

const resultText = (reply: RawReply) =>
  (reply.json.result?.content as Array<{ text?: string }> | undefined)?.[0]?.text;

describe('limits config', () => {
  it('defaults to 32 requests in flight per session and 100 sessions per principal', () => {
    const { limits } = parseConfig('');
    expect(limits.maxInFlightPerSession).toBe(32);
    expect(limits.maxSessionsPerPrincipal).toBe(100);
  });

  it.each([
    'maxInFlightPerSession: 0',
    'maxInFlightPerSession: 2.5',
    'maxSessionsPerPrincipal: 0',
    'maxSessionsPerPrincipal: 10001',
  ])('refuses limits {%s}', (limit) => {
    expect(() => parseConfig(`limits: {${limit}}`)).toThrow(ConfigError);
  });
});

describe('limits.maxInFlightPerSession', () => {
  it('answers a session past its cap at once as overloaded, never forwarding it, while another session is served', async () => {
    const { gateway, backend } = await gatewayWith('{maxInFlightPerSession: 3}');
    const greedy = await openSession(gateway.mcpUrl);
    const other = await openSession(gateway.mcpUrl);

    const held = [1, 2, 3].map(() => greedy.call('hold'));
    await waitFor(() => backend.state.arrived === 3, 5000, 'three held calls at the backend');

    const started = performance.now();
    const refused = await greedy.call('echo');
    expect(performance.now() - started).toBeLessThan(1000);
    expectOverloaded(refused, 3);
    expect(refused.json.id).toBe(greedy.nextId() - 1);
    expect(backend.state.echoes).toBe(0);

    // Not counted: ping (answered by the gateway) and notifications.
    expect((await greedy.request('ping')).json.result).toEqual({});
    expect((await greedy.notify('notifications/roots/list_changed')).status).toBe(202);

    // Another session of the same (anonymous) principal has its own budget.
    expect(resultText(await other.call('echo'))).toBe('echo');
    expect(backend.state.echoes).toBe(1);

    // Answers free the slots: the session goes on.
    backend.release();
    for (const reply of await Promise.all(held)) expect(resultText(reply)).toBe('held');
    expect(resultText(await greedy.call('echo'))).toBe('echo');
  });

  it('frees the slot of a request cancelled or dropped with its connection', async () => {
    const { gateway, backend } = await gatewayWith('{maxInFlightPerSession: 2}');
    const session = await openSession(gateway.mcpUrl);

    const dropped = new AbortController();
    const first = session.call('hold', dropped.signal).catch(() => undefined);
    const cancelledId = session.nextId();
    const cancelled = session.call('hold');
    await waitFor(() => backend.state.arrived === 2, 5000, 'two held calls at the backend');
    expectOverloaded(await session.call('echo'), 2);

    expect(
      (await session.notify('notifications/cancelled', { requestId: cancelledId })).status,
    ).toBe(202);
    dropped.abort();
    await first;
    await waitFor(() => backend.state.cancelled === 2, 5000, 'both calls cancelled at the backend');

    // Both slots are free again: two more calls reach the backend, a third is refused.
    const again = [session.call('hold'), session.call('hold')];
    await waitFor(() => backend.state.arrived === 4, 5000, 'two new held calls at the backend');
    expectOverloaded(await session.call('echo'), 2);
    backend.release();
    for (const reply of await Promise.all(again)) expect(resultText(reply)).toBe('held');
    // A cancelled request gets no answer: its POST ended with an empty SSE stream.
    const unanswered = await cancelled;
    expect(unanswered.status).toBe(200);
    expect(unanswered.events).toEqual([]);
    expect((await session.end()).status).toBe(200);
  });

  it('gives the stateless requests of a principal with an id one session’s budget', async () => {
    const { gateway, backend } = await gatewayWith('{maxInFlightPerSession: 2}', TOKENS);
    const call = (who: Record<string, string>, name: string) =>
      postModern(gateway.mcpUrl, 'tools/call', { name, arguments: {} }, { headers: who });

    const held = [call(ALICE, 'hold'), call(ALICE, 'hold')];
    await waitFor(() => backend.state.arrived === 2, 5000, 'two held calls at the backend');
    const refused = await call(ALICE, 'echo');
    expectOverloaded(refused, 2);
    expect(refused.headers['content-type']).toMatch(/^application\/json/);
    expect(backend.state.echoes).toBe(0);

    expect(resultText(await call(BOB, 'echo'))).toBe('echo');

    backend.release();
    for (const reply of await Promise.all(held)) expect(resultText(reply)).toBe('held');
    expect(resultText(await call(ALICE, 'echo'))).toBe('echo');
  });

  it('under auth none caps each session, but neither anonymous sessions nor anonymous stateless requests together', async () => {
    const { gateway, backend } = await gatewayWith(
      '{maxInFlightPerSession: 1, maxSessionsPerPrincipal: 1}',
    );
    // Every client here is the one anonymous principal: a shared budget would let one of
    // them refuse all the others.
    const sessions = [
      await openSession(gateway.mcpUrl),
      await openSession(gateway.mcpUrl),
      await openSession(gateway.mcpUrl),
    ];
    const stateless = [1, 2].map(() =>
      postModern(gateway.mcpUrl, 'tools/call', { name: 'hold', arguments: {} }),
    );
    await waitFor(() => backend.state.arrived === 2, 5000, 'two anonymous stateless calls');

    const held = sessions[0]?.call('hold');
    await waitFor(() => backend.state.arrived === 3, 5000, 'the session call at the backend');
    expectOverloaded(await (sessions[0]?.call('echo') as Promise<RawReply>), 1);
    expect(resultText(await (sessions[1]?.call('echo') as Promise<RawReply>))).toBe('echo');

    backend.release();
    for (const reply of await Promise.all([...stateless, held]))
      expect(resultText(reply as RawReply)).toBe('held');
  });
});

describe('limits.maxSessionsPerPrincipal', () => {
  it('refuses a principal its next session with 429 until it ends one, and never another principal', async () => {
    const { gateway } = await gatewayWith('{maxSessionsPerPrincipal: 2}', TOKENS);
    const first = await openSession(gateway.mcpUrl, ALICE);
    await openSession(gateway.mcpUrl, ALICE);
    expectTooManySessions(await initialize(gateway.mcpUrl, ALICE), 2);
    expect(gateway.orchestrator.gateway.sessions.size).toBe(2);

    await openSession(gateway.mcpUrl, BOB);

    expect((await first.end()).status).toBe(200);
    await openSession(gateway.mcpUrl, ALICE);
    expectTooManySessions(await initialize(gateway.mcpUrl, ALICE), 2);
  });

  it('frees the slot of a session that expired idle', async () => {
    const { gateway } = await gatewayWith(
      '{maxSessionsPerPrincipal: 1, sessionIdleMs: 1000}',
      TOKENS,
    );
    await openSession(gateway.mcpUrl, ALICE);
    expectTooManySessions(await initialize(gateway.mcpUrl, ALICE), 1);
    // The sweeper runs every second; the session is idle after one.
    await waitFor(() => gateway.orchestrator.gateway.sessions.size === 0, 5000, 'expiry');
    await openSession(gateway.mcpUrl, ALICE);
  });
});

describe('resilience.maxConcurrent: a saturated backend’s slots, per principal in turn', () => {
  const hold = (session: Awaited<ReturnType<typeof openSession>>, label: string) =>
    session.request('tools/call', { name: 'hold', arguments: { label } });
  const isOverloaded = (reply: RawReply) =>
    (reply.json.error?.data as { reason?: unknown } | undefined)?.reason === 'overloaded';

  it('serves another principal in turn while one floods the backend, refusing the flooder’s newest waiting calls', async () => {
    // 4 running and 4 waiting; Alice sends 10 calls from two sessions, Bob then 2.
    const { gateway, backend } = await gatewayWith('{}', TOKENS, undefined, '{maxConcurrent: 4}');
    const alice = [
      await openSession(gateway.mcpUrl, ALICE),
      await openSession(gateway.mcpUrl, ALICE),
    ];
    const bob = await openSession(gateway.mcpUrl, BOB);
    expect(resultText(await bob.call('echo'))).toBe('echo'); // the tool schemas are cached

    const refused = { alice: 0, bob: 0 };
    const counted = (who: keyof typeof refused, reply: Promise<RawReply>) =>
      reply.then((r) => {
        if (isOverloaded(r)) refused[who]++;
        return r;
      });
    const aliceCalls = Array.from({ length: 10 }, (_, i) =>
      counted('alice', hold(alice[i % 2] as (typeof alice)[number], 'alice')),
    );
    // Every slot runs one of Alice's calls and 4 more wait: the 2 past them are refused.
    await waitFor(() => backend.state.arrived === 4 && refused.alice === 2, 5000, 'Alice’s flood');

    const bobCalls = [counted('bob', hold(bob, 'bob')), counted('bob', hold(bob, 'bob'))];
    // The queue is full of Alice's: each of Bob's takes the place of her newest waiting call.
    await waitFor(() => refused.alice + refused.bob === 4, 5000, 'two more refusals');
    expect(refused).toEqual({ alice: 4, bob: 0 });

    // Each freed slot goes to the next principal in turn (FIFO would serve Alice's 4 first).
    for (let arrived = 5; arrived <= 8; arrived++) {
      backend.releaseOne();
      await waitFor(() => backend.state.arrived === arrived, 5000, `call ${arrived} started`);
    }
    expect(backend.state.labels).toEqual([
      ...['alice', 'alice', 'alice', 'alice'],
      ...['alice', 'bob', 'alice', 'bob'],
    ]);

    backend.release();
    for (const reply of await Promise.all(bobCalls)) expect(resultText(reply)).toBe('held');
    const aliceReplies = await Promise.all(aliceCalls);
    expect(aliceReplies.filter((r) => resultText(r) === 'held')).toHaveLength(6);
    const aliceRefusals = aliceReplies.filter(isOverloaded);
    expect(aliceRefusals).toHaveLength(4);
    for (const reply of aliceRefusals) {
      expect(reply.status).toBe(200);
      expect(reply.json.error?.code).toBe(-32603);
      expect(reply.json.error?.message).toMatch(/at capacity/);
      expect(reply.json.error?.data).toEqual({ backend: 'gate', reason: 'overloaded' });
    }
    expect(backend.state.arrived).toBe(8);
  });

  it('takes a call cancelled while it waits for a slot out of the queue at once', async () => {
    // One running and one waiting.
    const { gateway, backend } = await gatewayWith('{}', TOKENS, undefined, '{maxConcurrent: 1}');
    const session = await openSession(gateway.mcpUrl, ALICE);
    const running = hold(session, 'running');
    await waitFor(() => backend.state.arrived === 1, 5000, 'the first call at the backend');
    const waitingId = session.nextId();
    const waiting = hold(session, 'waiting');
    // The queue holds the waiting call: Alice's next one is refused.
    expect(isOverloaded(await hold(session, 'refused'))).toBe(true);

    expect((await session.notify('notifications/cancelled', { requestId: waitingId })).status).toBe(
      202,
    );
    expect((await waiting).events).toEqual([]);
    // Its place is free: of two more calls, one waits there (the other is refused at once)
    // and runs next. Had the cancelled call kept its place, both would be refused.
    const after = [hold(session, 'next'), hold(session, 'next')];
    expect(isOverloaded(await Promise.race(after))).toBe(true);
    backend.releaseOne();
    await waitFor(() => backend.state.arrived === 2, 5000, 'the next call at the backend');
    backend.release();
    expect(resultText(await running)).toBe('held');
    expect((await Promise.all(after)).map(resultText).filter(Boolean)).toEqual(['held']);
    expect(backend.state.labels).toEqual(['running', 'next']);
  });
});
