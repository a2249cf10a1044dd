/**
 * Cost of a remote `interceptor/invoke` round trip on loopback, beside a plain HTTP POST
 * measured in the same run against the same peer process:
 *   pnpm bench   (in packages/interceptor-kit)
 * Prints median and p99 latency (sequential calls) and calls/s at 1 and 32 concurrent callers,
 * then the caller's CPU per exchange of undici's `Pool.request` (body read with `.text()`)
 * against the kit's `postBuffered` (dispatch API, no body stream), in interleaved rounds
 * against the same peer: what every interceptor invocation the gateway sends pays.
 */
import { spawn } from 'node:child_process';
import { once, setMaxListeners } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Pool } from 'undici';
import { z } from 'zod';
import { createRemoteService, postBuffered } from '../src/index.ts';

// The stock SDK client adds an abort listener per request to one long-lived signal (an SDK
// issue, not ours); raise the default limit so its warning does not drown the table.
setMaxListeners(1_000_000);

const quick = process.argv.includes('--quick');
const LATENCY_CALLS = quick ? 500 : 4000;
const THROUGHPUT_CALLS = quick ? 2000 : 20_000;
const WARMUP = quick ? 200 : 1500;

const serverScript = fileURLToPath(new URL('./server.ts', import.meta.url));
const child = spawn(
  process.execPath,
  ['--import', 'tsx', '--conditions=@fleet/source', serverScript],
  {
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
// Never leave the peer behind, whatever happens to this run.
process.once('exit', () => child.kill('SIGTERM'));
const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
const urls = JSON.parse(line) as { kit: string; plain: string };

const payload = { name: 'echo', arguments: { text: 'hello world', n: 42 } };
const params = { name: 'bench-validator', event: 'tools/call', phase: 'request' as const, payload };

type Call = () => Promise<unknown>;

async function latency(call: Call): Promise<{ median: number; p99: number }> {
  for (let i = 0; i < WARMUP; i++) await call();
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_CALLS; i++) {
    const t = process.hrtime.bigint();
    await call();
    samples.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  samples.sort((a, b) => a - b);
  return {
    median: samples[Math.floor(samples.length / 2)] ?? 0,
    p99: samples[Math.floor(samples.length * 0.99)] ?? 0,
  };
}

/** Make `total` calls from `concurrency` callers at once. */
async function drive(call: Call, concurrency: number, total: number): Promise<void> {
  let issued = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (issued++ < total) await call();
    }),
  );
}

async function throughput(call: Call, concurrency: number): Promise<number> {
  const started = performance.now();
  await drive(call, concurrency, THROUGHPUT_CALLS);
  return THROUGHPUT_CALLS / ((performance.now() - started) / 1000);
}

const plainPool = new Pool(new URL(urls.plain).origin, { connections: 128, pipelining: 1 });
let id = 0;
const plainBody = () =>
  JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'interceptor/invoke', params });
const plainPost: Call = async () => {
  const res = await plainPool.request({
    path: '/',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: plainBody(),
  });
  return res.body.json();
};

const remote = createRemoteService({ url: urls.kit });
await remote.connect();
const kitInvoke: Call = () => remote.invoke(params, { signal: AbortSignal.timeout(10_000) });

const sdk = new Client({ name: 'bench-sdk', version: '1.0.0' });
await sdk.connect(new StreamableHTTPClientTransport(new URL(urls.kit)));
const AnyResult = z.object({}).passthrough();
const sdkInvoke: Call = () => sdk.request({ method: 'interceptor/invoke', params }, AnyResult);

interface Row {
  name: string;
  median: number;
  p99: number;
  c1: number;
  c32: number;
}
const rows: Row[] = [];
for (const [name, call] of [
  ['plain HTTP POST (baseline)', plainPost],
  ['kit remote invoke (lean path)', kitInvoke],
  ['stock SDK client -> kit server', sdkInvoke],
] as const) {
  const { median, p99 } = await latency(call);
  const c1 = await throughput(call, 1);
  const c32 = await throughput(call, 32);
  rows.push({ name, median, p99, c1, c32 });
}

const base = rows[0] as Row;
const pad = (s: string, n: number) => s.padEnd(n);
const num = (n: number, d = 0) => n.toFixed(d).padStart(9);
console.log(
  `\ninterceptor/invoke round trip on loopback (${LATENCY_CALLS} sequential calls; ${THROUGHPUT_CALLS} calls per throughput run; node ${process.version})`,
);
console.log(
  `${pad('path', 32)} ${'median µs'.padStart(9)} ${'p99 µs'.padStart(9)} ${'x base'.padStart(7)} ${'calls/s@1'.padStart(10)} ${'calls/s@32'.padStart(10)}`,
);
for (const r of rows) {
  console.log(
    `${pad(r.name, 32)} ${num(r.median)} ${num(r.p99)} ${(r.median / base.median).toFixed(2).padStart(7)} ${num(r.c1).padStart(10)} ${num(r.c32).padStart(10)}`,
  );
}
const kit = rows[1] as Row;
console.log(
  `\ntargets: remote invoke median <= 250 µs: ${kit.median <= 250 ? 'met' : 'MISSED'} (${kit.median.toFixed(0)} µs); >= 10,000 invocations/s at 32 callers: ${kit.c32 >= 10_000 ? 'met' : 'MISSED'} (${kit.c32.toFixed(0)}/s)`,
);

// Caller CPU per exchange: Pool.request + body.text() vs postBuffered, same peer, same body.
const exchangeHeaders = { 'content-type': 'application/json' };
const viaRequest: Call = async () => {
  const res = await plainPool.request({
    path: '/',
    method: 'POST',
    headers: exchangeHeaders,
    body: plainBody(),
    signal: new AbortController().signal,
  });
  return JSON.parse(await res.body.text());
};
const viaPostBuffered: Call = async () => {
  const res = await postBuffered(plainPool, {
    path: '/',
    headers: exchangeHeaders,
    body: plainBody(),
    signal: new AbortController().signal,
  });
  return JSON.parse(res.text);
};
const EXCHANGES = quick ? 2000 : 10_000;
const ROUNDS = quick ? 2 : 5;
async function cpuPerExchange(call: Call, concurrency: number): Promise<number> {
  const before = process.cpuUsage();
  await drive(call, concurrency, EXCHANGES);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / EXCHANGES;
}
const cpu: Record<string, number[]> = {};
for (const call of [viaRequest, viaPostBuffered]) await cpuPerExchange(call, 32); // warm-up
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, call] of [
    ['request', viaRequest],
    ['postBuffered', viaPostBuffered],
  ] as const) {
    for (const concurrency of [1, 32]) {
      const key = `${name}@${concurrency}`;
      cpu[key] = [...(cpu[key] ?? []), await cpuPerExchange(call, concurrency)];
    }
  }
}
const med = (key: string) => {
  const values = [...(cpu[key] ?? [])].sort((a, b) => a - b);
  return values[Math.floor(values.length / 2)] ?? 0;
};
console.log(
  `\ncaller CPU per exchange (µs, median of ${ROUNDS} interleaved rounds of ${EXCHANGES} exchanges)`,
);
console.log(
  `${pad('client', 32)} ${'1 caller'.padStart(9)} ${'32 callers'.padStart(11)} ${'x request@32'.padStart(13)}`,
);
for (const name of ['request', 'postBuffered']) {
  console.log(
    `${pad(name === 'request' ? 'Pool.request + body.text()' : 'postBuffered (kit)', 32)} ${num(med(`${name}@1`), 1)} ${num(med(`${name}@32`), 1).padStart(11)} ${(med(`${name}@32`) / med('request@32')).toFixed(2).padStart(13)}`,
  );
}

await sdk.close();
await remote.close();
await plainPool.close();
child.kill('SIGTERM');
