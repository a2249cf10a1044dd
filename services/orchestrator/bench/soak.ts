/**
 * Soak: does a long-running gateway keep anything its sessions leave behind?
 *
 * One gateway (compiled, as deployed, behind the three remote interceptors of `pnpm bench`)
 * serves rounds of short-lived sessions, `CONCURRENCY` at a time. Each session lists the tools,
 * makes echo calls, a call with progress (an SSE answer), a call the backend fails, a call of
 * an unknown tool, a slow call it cancels (`notifications/cancelled`), every fourth one opens
 * and drops its GET stream, and every session ends with DELETE. The backend's
 * `resilience.maxConcurrent` is small, so calls also wait in its fair queue.
 *
 * After each round the gateway's heap is measured through its inspector
 * (`HeapProfiler.collectGarbage`, then `Runtime.getHeapUsage`): what survives a full GC is
 * what the gateway keeps. The first round is the baseline (caches filled, code optimised);
 * the table prints each round's heap against it and the least-squares growth per session
 * over the later rounds. A gateway that keeps nothing per session grows by about zero bytes
 * per session (V8's own bookkeeping moves the heap by a few tens of KB either way).
 *
 *   pnpm bench:soak                          (in services/orchestrator)
 *   pnpm bench:soak -- --rounds 4 --sessions 50
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { type ServiceProcess, sourceCommand } from '@fleet/test-fixtures';
import { Pool, WebSocket } from 'undici';
import { printStderrTails } from './measure.ts';
import { fleetCommand, type PeerOptions, peers } from './peers.ts';

const { values: argv } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    sessions: { type: 'string', default: '200' },
    // Heap snapshots after the first and the last round: which kinds of object grew.
    census: { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(argv.rounds);
const SESSIONS = Number(argv.sessions);
if (!Number.isInteger(ROUNDS) || ROUNDS < 3 || !Number.isInteger(SESSIONS) || SESSIONS < 10) {
  console.error('--rounds must be an integer >= 3 and --sessions an integer >= 10');
  process.exit(2);
}
const CONCURRENCY = 24;
const ECHO_CALLS = 8;
// Fewer slots than sessions at a time, so calls also wait in the fair queue (which holds as
// many as run): never more than both together, so no call is refused.
const MAX_CONCURRENT = 16;
/**
 * Sessions sign in as one of this many principals (static bearer tokens), so the per-principal
 * paths (fair-queue keys, session and in-flight limits) see principals come and go too.
 */
const PRINCIPALS = 8;
const tokenOf = (n: number) => `soak-token-${n % PRINCIPALS}`;

const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));
const ACCEPT = 'application/json, text/event-stream';
const PROTOCOL_VERSION = '2025-11-25';

interface Answer {
  status: number;
  /** The last JSON-RPC message of the answer (a JSON body or the SSE stream's last event). */
  message?: { result?: Record<string, unknown>; error?: { code: number; message: string } };
}

/** One MCP session over plain HTTP (two connections: a call and its cancellation overlap). */
class SoakSession {
  #id = 0;
  #session: string | undefined;
  readonly #pool: Pool;
  readonly #url: URL;

  readonly #token: string;

  constructor(url: string, token: string) {
    this.#token = token;
    this.#url = new URL(url);
    this.#pool = new Pool(this.#url.origin, { connections: 2 });
  }

  #headers(): Record<string, string> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: ACCEPT,
      'mcp-protocol-version': PROTOCOL_VERSION,
      authorization: `Bearer ${this.#token}`,
    };
    if (this.#session) headers['mcp-session-id'] = this.#session;
    return headers;
  }

  async post(message: Record<string, unknown>): Promise<Answer> {
    const res = await this.#pool.request({
      path: this.#url.pathname,
      method: 'POST',
      headers: this.#headers(),
      body: JSON.stringify({ jsonrpc: '2.0', ...message }),
    });
    const text = await res.body.text();
    const sid = res.headers['mcp-session-id'];
    if (typeof sid === 'string') this.#session = sid;
    const last = text.startsWith('{')
      ? text
      : text
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5))
          .at(-1);
    return last
      ? { status: res.statusCode, message: JSON.parse(last) }
      : { status: res.statusCode };
  }

  async request(method: string, params: Record<string, unknown>): Promise<Answer> {
    return this.post({ id: ++this.#id, method, params });
  }

  async open(): Promise<void> {
    const init = await this.request('initialize', {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'soak', version: '1.0.0' },
    });
    if (!init.message?.result) throw new Error(`initialize: HTTP ${init.status}`);
    await this.post({ method: 'notifications/initialized' });
  }

  /** Open the session's GET stream and drop it after `ms`. */
  async dropStream(ms: number): Promise<void> {
    const controller = new AbortController();
    const res = await this.#pool.request({
      path: this.#url.pathname,
      method: 'GET',
      headers: { ...this.#headers(), accept: 'text/event-stream' },
      signal: controller.signal,
    });
    if (res.statusCode !== 200) throw new Error(`GET stream: HTTP ${res.statusCode}`);
    res.body.on('error', () => undefined);
    res.body.resume();
    await new Promise((resolve) => setTimeout(resolve, ms));
    controller.abort();
  }

  /** A slow call, cancelled after `ms`: its POST must end without an answer. */
  async cancelledCall(ms: number): Promise<void> {
    const id = ++this.#id;
    const call = this.post({
      id,
      method: 'tools/call',
      params: { name: 'slow', arguments: { ms: 60_000 } },
    });
    await new Promise((resolve) => setTimeout(resolve, ms));
    await this.post({
      method: 'notifications/cancelled',
      params: { requestId: id, reason: 'soak' },
    });
    const answer = await call;
    if (answer.message?.result) throw new Error('a cancelled call was answered with a result');
  }

  async close(): Promise<void> {
    const res = await this.#pool.request({
      path: this.#url.pathname,
      method: 'DELETE',
      headers: this.#headers(),
    });
    await res.body.text();
    if (res.statusCode !== 200 && res.statusCode !== 204)
      throw new Error(`DELETE: HTTP ${res.statusCode}`);
    await this.#pool.close();
  }
}

function expectResult(what: string, answer: Answer): void {
  if (!answer.message?.result) throw new Error(`${what}: no result (HTTP ${answer.status})`);
}
function expectError(what: string, answer: Answer, code: number): void {
  if (answer.message?.error?.code !== code)
    throw new Error(`${what}: expected error ${code}, got ${JSON.stringify(answer.message)}`);
}

/** One session's life. */
async function lifecycle(url: string, n: number): Promise<void> {
  const session = new SoakSession(url, tokenOf(n));
  await session.open();
  expectResult('tools/list', await session.request('tools/list', {}));
  for (let i = 0; i < ECHO_CALLS; i++)
    expectResult(
      'echo',
      await session.request('tools/call', { name: 'echo', arguments: { text: `s${n}-${i}` } }),
    );
  expectResult(
    'progress',
    await session.request('tools/call', {
      name: 'progress',
      arguments: { steps: 2 },
      _meta: { progressToken: `p${n}` },
    }),
  );
  expectError(
    'throw',
    await session.request('tools/call', { name: 'throw', arguments: {} }),
    -32603,
  );
  // As the SDK's server answers a tool it does not have: a tool error result.
  const unknown = await session.request('tools/call', { name: 'nope' });
  if (unknown.message?.result?.isError !== true)
    throw new Error(`unknown tool: got ${JSON.stringify(unknown.message)}`);
  await session.cancelledCall(10);
  if (n % 4 === 0) await session.dropStream(10);
  await session.close();
}

/** Run `count` sessions, `CONCURRENCY` at a time. */
async function round(url: string, first: number, count: number): Promise<void> {
  let next = first;
  const end = first + count;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < end) await lifecycle(url, next++);
    }),
  );
}

/** The gateway's V8 inspector: what is left of its heap after a full GC. */
class Inspector {
  #id = 0;
  readonly #pending = new Map<number, (result: unknown) => void>();
  #chunks: string[] = [];
  private constructor(readonly socket: WebSocket) {
    socket.addEventListener('message', (event) => {
      const message = JSON.parse(String(event.data)) as {
        id?: number;
        result?: unknown;
        method?: string;
        params?: { chunk?: string };
      };
      if (message.id !== undefined) this.#pending.get(message.id)?.(message.result);
      else if (message.method === 'HeapProfiler.addHeapSnapshotChunk')
        this.#chunks.push(message.params?.chunk ?? '');
    });
  }

  static async connect(url: string): Promise<Inspector> {
    const socket = new WebSocket(url);
    await new Promise((resolve, reject) => {
      socket.addEventListener('open', resolve, { once: true });
      socket.addEventListener('error', reject, { once: true });
    });
    return new Inspector(socket);
  }

  send(method: string): Promise<unknown> {
    const id = ++this.#id;
    return new Promise((resolve) => {
      this.#pending.set(id, resolve);
      this.socket.send(JSON.stringify({ id, method }));
    });
  }

  /** Live objects by constructor (or kind) after a full GC: count and bytes. */
  async census(): Promise<Map<string, { count: number; bytes: number }>> {
    this.#chunks = [];
    await this.send('HeapProfiler.takeHeapSnapshot');
    const snapshot = JSON.parse(this.#chunks.join('')) as HeapSnapshot;
    this.#chunks = [];
    return censusOf(snapshot);
  }

  async heapAfterGc(): Promise<number> {
    // Twice: the first collection's finalizers and weak callbacks free more for the second.
    await this.send('HeapProfiler.collectGarbage');
    await this.send('HeapProfiler.collectGarbage');
    const usage = (await this.send('Runtime.getHeapUsage')) as { usedSize: number };
    return usage.usedSize;
  }
}

/** The parts of a V8 heap snapshot (`.heapsnapshot`) a census reads. */
interface HeapSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Objects by constructor name (closures by function name, other kinds by kind). */
function censusOf({ snapshot, nodes, strings }: HeapSnapshot) {
  const fields = snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = snapshot.meta.node_types[0];
  const census = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + typeAt] ?? 0] ?? '?';
    if (type === 'hidden' || type === 'synthetic') continue;
    const name = strings[nodes[i + nameAt] ?? 0] ?? '?';
    const key =
      type === 'object' || type === 'closure' ? `${type} ${name.slice(0, 60)}` : `(${type})`;
    const entry = census.get(key) ?? { count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += nodes[i + sizeAt] ?? 0;
    census.set(key, entry);
  }
  return census;
}

function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? 0) * 1024;
}

/** Least-squares slope of `ys` over `xs`. */
function slope(xs: readonly number[], ys: readonly number[]): number {
  const mean = (v: readonly number[]) => v.reduce((a, b) => a + b, 0) / v.length;
  const mx = mean(xs);
  const my = mean(ys);
  let num = 0;
  let den = 0;
  for (const [i, x] of xs.entries()) {
    num += (x - mx) * ((ys[i] ?? 0) - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

const fleet = peers();
const prefix = `soak-${randomUUID().slice(0, 8)}`;
const MB = 1024 * 1024;

/** A measured process: started with its inspector on, and connected to it. */
interface Inspected {
  name: string;
  peer: ServiceProcess;
  inspector: Inspector;
  heaps: number[];
}
async function startInspected(
  name: string,
  script: string,
  args: string[],
  options: PeerOptions = {},
): Promise<Inspected> {
  let inspectorUrl: string | undefined;
  const peer = await fleet.start(fleetCommand(script, args, ['--inspect=127.0.0.1:0']), {
    ...options,
    onStderr: (chunk) => {
      inspectorUrl ??= /Debugger listening on (ws:\/\/\S+)/.exec(chunk)?.[1];
    },
  });
  if (!inspectorUrl) throw new Error(`${name} did not print its inspector URL`);
  return { name, peer, inspector: await Inspector.connect(inspectorUrl), heaps: [] };
}

try {
  const dir = mkdtempSync(join(tmpdir(), 'fleet-soak-'));
  const backend = await fleet.start(sourceCommand(here('./backend.ts'), []));
  const services = await Promise.all(
    ['validator', 'mutator', 'observer'].map((name, i) =>
      startInspected(name, here('./interceptors.ts'), [String(i)]),
    ),
  );
  const config = join(dir, 'fleet.yaml');
  writeFileSync(
    config,
    `backends:\n  - {id: soak, url: "${backend.url}", resilience: {maxConcurrent: ${MAX_CONCURRENT}}}\ninterceptors:\n${services.map((s) => `  - url: "${s.peer.url}/mcp"`).join('\n')}\nregistry: {prefix: ${prefix}}\naudit: {queue: ${prefix}-audit}\nauth:\n  mode: tokens\n  tokens:\n${Array.from({ length: PRINCIPALS }, (_, i) => `    - {token: ${tokenOf(i)}, principal: {type: user, id: soak-user-${i}}}`).join('\n')}\n`,
  );
  const gateway = await startInspected('gateway', here('../dist/main.js'), [], {
    env: { FLEET_CONFIG: config, AUDIT_JOURNAL: join(dir, 'audit.ndjson') },
    cwd: dir,
  });
  const measured = [gateway, ...services];
  const url = `${gateway.peer.url}/mcp`;

  console.log(
    `soak: ${ROUNDS} rounds of ${SESSIONS} sessions (${CONCURRENCY} at a time; each: tools/list, ${ECHO_CALLS} echo calls, a progress call, a failed call, an unknown tool, a cancelled slow call, every 4th a dropped GET stream, DELETE; ${PRINCIPALS} principals with bearer tokens) through the gateway with 3 remote interceptors, backend maxConcurrent ${MAX_CONCURRENT}, node ${process.version}`,
  );
  console.log('heap MB after a full GC (and, in brackets, against round 1), by process');
  console.log(
    `${'round'.padEnd(6)} ${'sessions'.padStart(9)} ${'s/round'.padStart(8)} ${measured.map((m) => m.name.padStart(17)).join(' ')} ${'gateway RSS MB'.padStart(15)}`,
  );
  const totals: number[] = [];
  let firstCensus: Awaited<ReturnType<Inspector['census']>> | undefined;
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    await round(url, r * SESSIONS, SESSIONS);
    const seconds = (performance.now() - t0) / 1000;
    // Sessions end at DELETE; let the processes finish what they do after answering.
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const m of measured) m.heaps.push(await m.inspector.heapAfterGc());
    totals.push((r + 1) * SESSIONS);
    if (argv.census && r === 0) firstCensus = await gateway.inspector.census();
    const cells = measured.map((m) => {
      const heap = m.heaps.at(-1) ?? 0;
      const ratio = heap / (m.heaps[0] ?? heap);
      return `${(heap / MB).toFixed(2)} (${ratio.toFixed(3)})`.padStart(17);
    });
    console.log(
      `${String(r + 1).padEnd(6)} ${String((r + 1) * SESSIONS).padStart(9)} ${seconds.toFixed(1).padStart(8)} ${cells.join(' ')} ${(rssBytes(gateway.peer.pid) / MB).toFixed(0).padStart(15)}`,
    );
  }
  // The first round is the baseline: what it grew is the process warming up, not a leak.
  console.log(`\nheap growth after round 1 (least squares over rounds 2-${ROUNDS})`);
  for (const m of measured) {
    const base = m.heaps[0] ?? 0;
    const last = m.heaps.at(-1) ?? 0;
    console.log(
      `${m.name.padEnd(10)} ${(slope(totals.slice(1), m.heaps.slice(1)) / 1024).toFixed(2).padStart(6)} KB per session; last round ${((last - base) / 1024).toFixed(0)} KB vs round 1, ratio ${(last / base).toFixed(3)}`,
    );
  }
  if (firstCensus) {
    const lastCensus = await gateway.inspector.census();
    const grown = [...lastCensus]
      .map(([key, now]) => {
        const then = firstCensus?.get(key) ?? { count: 0, bytes: 0 };
        return { key, count: now.count - then.count, bytes: now.bytes - then.bytes };
      })
      .filter((g) => g.count > 0)
      .sort((a, b) => b.bytes - a.bytes)
      .slice(0, 25);
    console.log(`\nthe gateway's objects grown since round 1 (heap snapshots), by bytes:`);
    for (const g of grown)
      console.log(
        `${g.key.padEnd(70)} +${String(g.count).padStart(7)} +${(g.bytes / 1024).toFixed(1).padStart(8)} KB`,
      );
  }
  for (const m of measured) m.inspector.socket.close();
} catch (error) {
  printStderrTails(fleet.started);
  throw error;
} finally {
  await fleet.stopAll(prefix);
}
