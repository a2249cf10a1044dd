/**
 * A backend call the gateway refuses without sending it (the backend at capacity, its circuit
 * open) is counted by reason and by whose call it was (a client's, or the gateway's own) in
 * `fleet_backend_refusals_total`, read with a real Prometheus scrape, and logged at most once a minute per backend: which backend, why, how many since the
 * last line and, at capacity, whose calls wait the most (the principal's id scrubbed). Real
 * fixture backends over Streamable HTTP, the gateway in this process.
 */
import { freePort, startHttpBackend } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';
import { startGateBackend } from './gate-backend.ts';
import { defer, type LoggedLine, recordingLogger, startGateway, waitFor } from './harness.ts';
import { pipelineForFile } from './pipeline.ts';
import { postModern, type RawReply } from './raw-http.ts';

const pipeline = pipelineForFile();

/**
 * `fleet_backend_refusals_total` of `backend` by `fleet_refusal_reason`, from a scrape: of the
 * calls of `origin` (`fleet_call_origin`), else of all.
 */
async function refusals(
  backend: string,
  origin?: 'client' | 'gateway',
): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const line of (await pipeline.scrape()).split('\n')) {
    if (!line.startsWith('fleet_backend_refusals_total{')) continue;
    if (!line.includes(`fleet_backend_id="${backend}"`)) continue;
    if (origin !== undefined && !line.includes(`fleet_call_origin="${origin}"`)) continue;
    const reason = /fleet_refusal_reason="([^"]+)"/.exec(line)?.[1];
    if (reason !== undefined)
      counts[reason] = (counts[reason] ?? 0) + Number(line.split(' ').at(-1));
  }
  return counts;
}

const ALICE_ID = 'alice@example.com';
const ALICE = { authorization: 'Bearer alice-token-0001' };
const TOKENS = `auth:\n  mode: tokens\n  tokens:\n    - {token: alice-token-0001, principal: {id: ${ALICE_ID}}}\n`;

const resultText = (reply: RawReply) =>
  (reply.json.result?.content as Array<{ text?: string }> | undefined)?.[0]?.text;
const reasonOf = (reply: RawReply) =>
  (reply.json.error?.data as { reason?: unknown } | undefined)?.reason;

/** The lines about refused backend calls. */
const refusalLines = (lines: readonly LoggedLine[]) =>
  lines.filter((l) => String(l.msg).startsWith('refused backend calls'));

describe('backend refusals', () => {
  it('counts a call refused at capacity as overloaded and logs the backend and the scrubbed principal once a minute', async () => {
    const backend = await startGateBackend();
    const log = recordingLogger();
    const gateway = await startGateway(
      `backends:\n  - {id: sat, url: "${backend.url}", resilience: {maxConcurrent: 1}}\n${TOKENS}`,
      { redis: false, log },
    );
    const call = (name: string) =>
      postModern(gateway.mcpUrl, 'tools/call', { name, arguments: {} }, { headers: ALICE });
    // The first call lists the backend's tools for the schema cache, in the one slot.
    expect(resultText(await call('echo'))).toBe('echo');
    const before = await refusals('sat', 'client');

    // One slot and one place in the queue: of three calls, one is refused at once.
    let refused = 0;
    const counted = (reply: Promise<RawReply>) =>
      reply.then((r) => {
        if (reasonOf(r) === 'overloaded') refused++;
        return r;
      });
    const calls = [call('hold'), call('hold'), call('hold')].map(counted);
    await waitFor(() => backend.state.arrived === 1 && refused === 1, 5000, 'one call refused');
    expect((await refusals('sat', 'client')).overloaded ?? 0).toBe((before.overloaded ?? 0) + 1);

    const lines = refusalLines(log.warnings);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.obj).toEqual({
      backend: 'sat',
      reason: 'overloaded',
      refused: 1,
      reasons: { overloaded: 1, circuit_open: 0 },
      busiest: 'principal user:[EMAIL_ADDRESS]',
      waiting: 1,
      maxConcurrent: 1,
    });
    expect(JSON.stringify(log.warnings)).not.toContain(ALICE_ID);

    // Within the minute: counted, not logged again.
    expect(reasonOf(await call('hold'))).toBe('overloaded');
    const after = await refusals('sat', 'client');
    expect(after.overloaded ?? 0).toBe((before.overloaded ?? 0) + 2);
    expect(after.circuit_open).toBeUndefined();
    expect(await refusals('sat', 'gateway')).toEqual({});
    expect(refusalLines(log.warnings)).toHaveLength(1);

    backend.release();
    await waitFor(() => backend.state.arrived === 2, 5000, 'the waiting call at the backend');
    backend.release();
    expect((await Promise.all(calls)).map(resultText).filter(Boolean)).toEqual(['held', 'held']);
  });

  it("counts a call refused by an open circuit as circuit_open, the gateway's own apart from clients', and logs the gateway's own too", async () => {
    const port = await freePort(); // nothing listens here
    const log = recordingLogger();
    const gateway = await startGateway(
      `backends:\n  - id: down\n    url: "http://127.0.0.1:${port}/mcp"\n    resilience: {timeoutMs: 2000, breaker: {failures: 2, resetMs: 60000}}\n`,
      { redis: false, log },
    );
    const call = () =>
      postModern(gateway.mcpUrl, 'tools/call', { name: 'echo', arguments: { text: 'x' } });

    // A tools/call first needs the tool's schema, which the gateway reads itself (tools/list):
    // two such reads fail and open the circuit; they were sent, so no refusal yet.
    for (let attempt = 0; attempt < 2; attempt++)
      expect(reasonOf(await call())).toBe('unavailable');
    expect(await refusals('down')).toEqual({});
    expect(refusalLines(log.warnings)).toEqual([]);

    // The third call's schema read is refused: the gateway's own call, counted apart (the
    // chart's FleetBackendSaturated compares clients' refused calls with fleet_backend_duration,
    // which counts only clients' calls), and logged like a client's.
    expect(reasonOf(await call())).toBe('circuit_open');
    expect(await refusals('down', 'gateway')).toEqual({ circuit_open: 1 });
    expect(await refusals('down', 'client')).toEqual({});
    expect(refusalLines(log.warnings).map((l) => l.obj)).toEqual([
      {
        backend: 'down',
        reason: 'circuit_open',
        refused: 1,
        reasons: { overloaded: 0, circuit_open: 1 },
      },
    ]);

    // A client's tools/list is forwarded as the client's call: refused, it counts as client's.
    await postModern(gateway.mcpUrl, 'tools/list', {});
    expect(await refusals('down', 'client')).toEqual({ circuit_open: 1 });
    expect(await refusals('down', 'gateway')).toEqual({ circuit_open: 1 });
  });
  it('does not refuse its own list reads of a backend that connects, even with one slot', async () => {
    // The fixture serves tools, prompts and resources: the gateway reads four lists of it on
    // connecting. Read all at once they needed three slots, and with one (and one queue place)
    // the third was refused as overloaded, and clients' first calls could be too.
    const backend = await startHttpBackend({ name: 'one' });
    defer(() => backend.close());
    const log = recordingLogger();
    const gateway = await startGateway(
      `backends:\n  - {id: one, url: "${backend.url}", resilience: {maxConcurrent: 1}}\n`,
      { redis: false, log },
    );
    const call = (name: string, args: Record<string, unknown>) =>
      postModern(gateway.mcpUrl, 'tools/call', { name, arguments: args });
    expect(resultText(await call('echo', { text: 'first' }))).toBe('[one] first');
    // The reads run in the background of the connection: give the last of them time to end.
    await new Promise((r) => setTimeout(r, 300));
    expect(await refusals('one')).toEqual({});
    expect(log.warnings.filter((l) => String(l.msg).includes('reading a backend list'))).toEqual(
      [],
    );
  });
  it('does not retry an idempotent call refused at capacity', async () => {
    const backend = await startGateBackend();
    const gateway = await startGateway(
      `backends:\n  - {id: sat, url: "${backend.url}", resilience: {maxConcurrent: 1, retries: 3}}\n${TOKENS}`,
      { redis: false },
    );
    const post = (method: string, params: Record<string, unknown>) =>
      postModern(gateway.mcpUrl, method, params, { headers: ALICE });
    expect(resultText(await post('tools/call', { name: 'echo', arguments: {} }))).toBe('echo');
    // One call runs and one waits: the backend is full.
    const held = [1, 2].map(() => post('tools/call', { name: 'hold', arguments: {} }));
    await waitFor(() => backend.state.arrived === 1, 5000, 'one call running');

    // tools/list is idempotent, so transport failures are retried (after 50, 100, 200 ms).
    // Refused at capacity it must not be: the backend frees its slots from now on, and a
    // retry would find one.
    const listing = post('tools/list', {});
    const releasing = setInterval(() => backend.release(), 20);
    try {
      expect(reasonOf(await listing)).toBe('overloaded');
      await Promise.all(held);
    } finally {
      clearInterval(releasing);
    }
  });
});
