/**
 * Per-backend resilience from the config: call timeout, circuit breaker and bounded
 * concurrency, against real fixture backends over Streamable HTTP.
 */
import { freePort, startHttpBackend } from '@fleet/test-fixtures';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { startGateBackend } from './gate-backend.ts';
import { connectClient, defer, startGateway, textOf, waitFor } from './harness.ts';
import { openRawSession, type RawReply, rawPost } from './raw-http.ts';

async function gatewayFor(url: string, resilience: string): Promise<Client> {
  const gateway = await startGateway(
    `backends:\n  - id: fx\n    url: "${url}"\n    resilience: ${resilience}\n`,
    { redis: false },
  );
  return connectClient(gateway.mcpUrl);
}

async function failure(call: Promise<unknown>): Promise<McpError> {
  const outcome = await call.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome)) throw new Error(`expected an error, got ${JSON.stringify(outcome)}`);
  expect(outcome.error).toBeInstanceOf(McpError);
  return outcome.error as McpError;
}

describe('backend resilience', () => {
  it('answers a backend call slower than resilience.timeoutMs with a timely JSON-RPC error and cancels it', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const client = await gatewayFor(backend.url, '{timeoutMs: 300}');

    const started = performance.now();
    const error = await failure(
      client.callTool({ name: 'slow', arguments: { ms: 5000, label: 'too-slow' } }),
    );
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(2000);
    // The SDK's request timeout (-32001), passed through with its budget.
    expect(error.code).toBe(-32001);
    expect(error.message).toMatch(/timed out/i);
    expect(error.data).toMatchObject({ timeout: 300, backend: 'fx', reason: 'timeout' });

    // The gateway told the backend to stop working on it.
    await waitFor(() => backend.state.cancellations.some((c) => c.label === 'too-slow'), 10_000);
    // The connection is still good for calls within budget.
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'ok' } }))).toBe(
      '[fx] ok',
    );
  });

  it('opens the circuit after breaker.failures consecutive failures and closes it once the backend is back', async () => {
    const port = await freePort(); // nothing listens here (yet)
    const client = await gatewayFor(
      `http://127.0.0.1:${port}/mcp`,
      '{timeoutMs: 2000, breaker: {failures: 2, resetMs: 500}}',
    );

    for (let attempt = 0; attempt < 2; attempt++) {
      const error = await failure(client.callTool({ name: 'echo', arguments: { text: 'x' } }));
      expect(error.code).toBe(-32603);
      expect(error.message).toMatch(/unavailable/);
      expect(error.message).not.toMatch(/circuit open/);
    }
    const started = performance.now();
    const open = await failure(client.callTool({ name: 'echo', arguments: { text: 'x' } }));
    expect(performance.now() - started).toBeLessThan(500);
    expect(open.code).toBe(-32603);
    expect(open.message).toMatch(/circuit open/);
    expect(open.data).toEqual({ backend: 'fx', reason: 'circuit_open' });

    // The backend comes up on that port; after resetMs a trial call goes through.
    const backend = await startHttpBackend({ name: 'fx', port });
    defer(() => backend.close());
    await new Promise((r) => setTimeout(r, 600));
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'back' } }))).toBe(
      '[fx] back',
    );
  });

  it('does not count calls the client cancelled as backend failures: the circuit stays closed', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const client = await gatewayFor(
      backend.url,
      '{timeoutMs: 5000, breaker: {failures: 2, resetMs: 60000}}',
    );

    // Three cancelled calls in a row, each reaching the backend and cancelled there.
    for (let n = 1; n <= 3; n++) {
      const controller = new AbortController();
      const call = client.callTool(
        { name: 'slow', arguments: { ms: 5000, label: `cancelled-${n}` } },
        undefined,
        { signal: controller.signal },
      );
      // Long enough for the call to reach the backend, which records its cancellation below.
      await new Promise((r) => setTimeout(r, 300));
      controller.abort('the client gave up');
      await expect(call).rejects.toThrow();
      await waitFor(
        () => backend.state.cancellations.some((c) => c.label === `cancelled-${n}`),
        2000,
      );
    }

    // breaker.failures is 2: had the cancellations counted, the circuit would be open for a
    // minute and this call refused with "circuit open".
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'still' } }))).toBe(
      '[fx] still',
    );
  });

  it('does not close a half-open circuit when the client cancels the trial call: the next call is the trial', async () => {
    const backend = await startGateBackend();
    // A `hold` call the test does not release outlasts timeoutMs: it fails (-32001), a
    // failure the breaker counts.
    const client = await gatewayFor(
      backend.url,
      '{timeoutMs: 1000, breaker: {failures: 2, resetMs: 500}}',
    );
    const hold = (label: string, signal?: AbortSignal) =>
      client.callTool({ name: 'hold', arguments: { label } }, undefined, { signal });
    const reasonOf = (error: McpError) => (error.data as { reason?: unknown } | undefined)?.reason;

    for (const label of ['fail-1', 'fail-2'])
      expect(reasonOf(await failure(hold(label)))).toBe('timeout');
    expect(reasonOf(await failure(hold('refused')))).toBe('circuit_open');

    // After resetMs the next call is the trial; two calls made meanwhile wait for its outcome.
    await new Promise((r) => setTimeout(r, 600));
    const controller = new AbortController();
    const trial = hold('trial', controller.signal);
    await waitFor(() => backend.state.arrived === 3, 2000, 'the trial at the backend');
    const waiting = ['waiting-1', 'waiting-2'].map((label) => failure(hold(label)));
    await new Promise((r) => setTimeout(r, 100));
    controller.abort('the client gave up');
    await expect(trial).rejects.toThrow();

    // The cancelled trial showed nothing: one waiting call became the trial at once, and its
    // failure opened the circuit again for the other. Had the cancellation closed the circuit,
    // both would have been sent to the failing backend.
    const reasons = (await Promise.all(waiting)).map(reasonOf).sort();
    expect(reasons).toEqual(['circuit_open', 'timeout']);
    expect(backend.state.labels.slice(0, 3)).toEqual(['fail-1', 'fail-2', 'trial']);
    expect(backend.state.labels.slice(3)).toEqual([expect.stringMatching(/^waiting-/)]);
  });

  it('frees the slot of a call waiting for a half-open circuit’s trial as soon as its client cancels it', async () => {
    const backend = await startGateBackend();
    // Two slots: the trial's and the waiting call's. A `hold` call the test does not release
    // outlasts timeoutMs, and its failure opens the circuit.
    const gateway = await startGateway(
      `backends:\n  - id: fx\n    url: "${backend.url}"\n    resilience: {timeoutMs: 2000, maxConcurrent: 2, breaker: {failures: 1, resetMs: 300}}\n`,
      { redis: false },
    );
    const headers = await openRawSession(gateway.mcpUrl);
    let lastId = 0;
    const hold = (label: string) => {
      const id = ++lastId;
      const params = { name: 'hold', arguments: { label } };
      return {
        id,
        reply: rawPost(
          gateway.mcpUrl,
          { jsonrpc: '2.0', id, method: 'tools/call', params },
          headers,
        ),
      };
    };
    const reasonOf = (reply: RawReply) =>
      (reply.json.error?.data as { reason?: unknown } | undefined)?.reason;
    const held = (reply: RawReply) => textOf(reply.json.result ?? {}) === 'held';

    expect(reasonOf(await hold('fail').reply)).toBe('timeout');
    await new Promise((r) => setTimeout(r, 400));
    const trial = hold('trial').reply;
    await waitFor(() => backend.state.arrived === 2, 2000, 'the trial at the backend');
    // The second slot's call reaches the breaker, which holds it until the trial's outcome.
    const waiting = hold('waiting');
    await new Promise((r) => setTimeout(r, 100));
    const cancellation = {
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: waiting.id, reason: 'the client gave up' },
    };
    expect((await rawPost(gateway.mcpUrl, cancellation, headers)).status).toBe(202);
    // Answered as any cancelled request: its POST ends with no message.
    expect((await waiting.reply).events).toEqual([]);

    // Its slot is free while the trial still runs: of four more calls, one takes it (to wait
    // for the trial in turn), two wait for a slot and only the last is refused. When the
    // cancelled call kept its slot until the trial ended (cockatiel's wait for the trial does
    // not heed the call's signal), two were.
    let refused = 0;
    const more = [1, 2, 3, 4].map((n) =>
      hold(`after-${n}`).reply.then((reply) => {
        if (reasonOf(reply) === 'overloaded') refused++;
        return reply;
      }),
    );
    await waitFor(() => refused > 0, 2000, 'a call refused at capacity');
    // Time for a second refusal to come, were there one.
    await new Promise((r) => setTimeout(r, 100));
    expect(refused).toBe(1);
    expect(backend.state.arrived).toBe(2);

    // The trial succeeds and closes the circuit: the three admitted calls run, in turn.
    const releasing = setInterval(() => backend.release(), 20);
    try {
      expect(held(await trial)).toBe(true);
      expect((await Promise.all(more)).filter(held)).toHaveLength(3);
    } finally {
      clearInterval(releasing);
    }
    // The cancelled call never reached the backend.
    expect(backend.state.labels.slice(0, 2)).toEqual(['fail', 'trial']);
    expect(backend.state.labels.slice(2)).toHaveLength(3);
    expect(backend.state.labels).not.toContain('waiting');
  });

  it('with maxConcurrent 1 queues a second concurrent call and refuses a third as at capacity', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const client = await gatewayFor(backend.url, '{maxConcurrent: 1}');

    // Two concurrent calls: the second waits in the (equally sized) queue, then runs.
    const started = performance.now();
    const finished: number[] = [];
    const two = await Promise.all(
      [1, 2].map((n) =>
        client.callTool({ name: 'slow', arguments: { ms: 400, label: `pair-${n}` } }).then((r) => {
          finished.push(performance.now() - started);
          return textOf(r);
        }),
      ),
    );
    expect(two).toEqual(['[fx] waited 400 ms', '[fx] waited 400 ms']);
    finished.sort((a, b) => a - b);
    // Serialised: the later one finished about 2 × 400 ms after the start.
    expect(finished[1]).toBeGreaterThanOrEqual(750);

    // Three concurrent calls: one runs, one waits, the third is refused at once.
    const calls = [1, 2, 3].map((n) =>
      client.callTool({ name: 'slow', arguments: { ms: 400, label: `triple-${n}` } }).then(
        (r) => ({ ok: textOf(r) }),
        (error: unknown) => ({ error: error as McpError, at: performance.now() - started }),
      ),
    );
    const outcomes = await Promise.all(calls);
    const refused = outcomes.filter((o): o is { error: McpError; at: number } => 'error' in o);
    expect(refused).toHaveLength(1);
    const [rejection] = refused;
    expect(rejection?.error).toBeInstanceOf(McpError);
    expect(rejection?.error.code).toBe(-32603);
    expect(rejection?.error.message).toMatch(/at capacity/);
    expect(rejection?.error.data).toEqual({ backend: 'fx', reason: 'overloaded' });
    expect(outcomes.filter((o) => 'ok' in o)).toHaveLength(2);
  });
});
