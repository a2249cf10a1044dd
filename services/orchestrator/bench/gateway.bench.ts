/**
 * `tools/call` of a trivial echo tool, measured in one run on loopback:
 *   1. direct to the backend,
 *   2. through the gateway with no interceptors,
 *   3. the floor of the next row's topology: the same processes and HTTP exchanges through a
 *      relay with no logic (bench/floor.ts), i.e. what the hops alone cost on this machine,
 *   4. through the gateway with three remote interceptors (request validator, request and
 *      response mutator, audit-mode observer),
 *   5. the same with `chain.speculativeMutators` (request mutators start with the validators),
 *   6. and with the three interceptors hosted by one service (speculative too): what shares
 *      a phase then travels as one batch, one hop.
 * Every path uses the same lean MCP client (bench/lean-client.ts: a session opened with
 * `initialize`, then plain JSON POSTs on a keep-alive connection), so differences are what
 * the gateway adds. The stock SDK client costs ~0.6 ms of CPU per call on its own, which
 * on a 2-core machine would mostly measure the load generator. Each peer (backend,
 * interceptors, gateways) is its own process; the CPU each one spends per call during the
 * 32-client run is printed too (from /proc), which is what bounds throughput here.
 *
 * Latency is steady one-client service: each path's latency phase starts with calls timed
 * apart (printed as "after a burst"), because it follows another path's 32-client run.
 *
 * The fleet's processes (gateway, interceptor services, the floor's relay and services) run
 * with V8's memory reducer off, as the images run them: its full GCs in the many lightly
 * loaded processes of this bench took CPU from the path under test (p99 at one client
 * through the 3-service chain 6.6-8.1 ms with it, 3.8-4.2 ms without). The backend keeps
 * Node's defaults, as a third-party MCP server would.
 *
 * The gateway and the interceptor services run compiled, as deployed (`node dist/main.js`,
 * the kit from its `dist`): `pnpm bench` builds them first. Run from source under tsx,
 * every function the code creates per call would also pay for esbuild's `keepNames`
 * wrapper (an `Object.defineProperty` of its name), ~10% of the gateway's CPU per call.
 *
 *   pnpm bench            (in services/orchestrator; `-- --quick` for a short run)
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServiceProcess, sourceCommand } from '@fleet/test-fixtures';
import { type LeanClient, leanClient } from './lean-client.ts';
import { cpuMs, median, printStderrTails, quantile } from './measure.ts';
import { fleetCommand, peers } from './peers.ts';

const quick = process.argv.includes('--quick');
// Steady state is what a long-running gateway serves: every path first gets this much
// concurrent traffic so that V8 has optimised its hot code (on a slow 2-core VM a few
// hundred calls leave much of it unoptimised, which would measure the JIT, not the path).
const WARMUP_SECONDS = quick ? 3 : 20;
const WARMUP = quick ? 100 : 500;
const LATENCY_CALLS = quick ? 300 : 2100;
// Each path's latency phase follows another path's 32-client run, whose aftermath (GC and
// scheduling debt in the shared backend and on both cores) slows the next few hundred
// calls: in an A/B of one build against itself, the first 200 one-client calls after a
// burst had a p99 of 6.0-6.5 ms against 3.6-4.0 ms for the rest. So each latency phase
// first makes this many calls, timed and reported apart (the "after a burst" line), and
// the latency columns measure steady one-client service.
const SETTLE_CALLS = quick ? 50 : 200;
const THROUGHPUT_SECONDS = quick ? 1 : 3;
const ROUNDS = quick ? 1 : 3;
const CONCURRENCY = 32;

const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));
const fleet = peers();
const { started } = fleet;
/**
 * How a peer runs: the gateway from its build and the interceptor services' bench script under
 * tsx but resolving the kit to its build (no `@fleet/source` condition), both with the images'
 * node flags (`fleetCommand`); the backend fixture from source with Node's defaults (it is the
 * same in every row, the direct one included).
 */
function start(
  script: string,
  {
    env = {},
    cwd,
    args = [],
  }: { env?: Record<string, string>; cwd?: string; args?: string[] } = {},
): Promise<ServiceProcess> {
  return fleet.start(fleetCommand(script, args), { env, ...(cwd ? { cwd } : {}) });
}

const prefix = `bench-${randomUUID().slice(0, 8)}`;
const dir = mkdtempSync(join(tmpdir(), 'fleet-bench-'));
const backend = await fleet.start(sourceCommand(here('./backend.ts'), []));
/** The floor: the chain's processes and exchanges with no logic (bench/floor.ts). */
async function startFloor(): Promise<{ url: string; peers: ServiceProcess[] }> {
  const services = await Promise.all(
    ['validator', 'mutator', 'observer'].map((name) =>
      start(here('./floor.ts'), { args: ['service', name] }),
    ),
  );
  const relay = await start(here('./floor.ts'), {
    args: ['relay'],
    env: { BACKEND_URL: backend.url, SERVICE_URLS: services.map((s) => s.url).join(',') },
  });
  return { url: relay.url, peers: [backend, ...services, relay] };
}
const [separate, cohosted] = await Promise.all([
  Promise.all(['0', '1', '2'].map((i) => start(here('./interceptors.ts'), { args: [i] }))),
  start(here('./interceptors.ts'), { args: ['all'] }).then((one) => [one]),
]);

/**
 * A gateway process: no interceptors; the three, each in its own service; the same with
 * speculative mutators; or the three hosted by one service, with speculative mutators.
 */
type Variant = 'plain' | 'chain' | 'speculative' | 'cohosted';
/** A gateway, and the processes a call through it reaches (its CPU line). */
async function startGateway(variant: Variant): Promise<{ url: string; peers: ServiceProcess[] }> {
  const path = join(dir, `fleet-${variant}.yaml`);
  const interceptors = variant === 'plain' ? [] : variant === 'cohosted' ? cohosted : separate;
  const services = interceptors.length
    ? `interceptors:\n${interceptors.map((p) => `  - url: "${p.url}/mcp"`).join('\n')}\n`
    : '';
  const chain =
    variant === 'speculative' || variant === 'cohosted'
      ? 'chain: {speculativeMutators: true}\n'
      : '';
  writeFileSync(
    path,
    `backends:\n  - {id: bench, url: "${backend.url}", resilience: {maxConcurrent: 256}}\n${services}${chain}registry: {prefix: ${prefix}-${variant}}\naudit: {queue: ${prefix}-audit}\n`,
  );
  const gateway = await start(here('../dist/main.js'), {
    env: { FLEET_CONFIG: path, AUDIT_JOURNAL: join(dir, `${variant}.ndjson`) },
    cwd: dir,
  });
  return { url: `${gateway.url}/mcp`, peers: [backend, ...interceptors, gateway] };
}

/** CPU per process of `peers` (and this load generator) over `run`. */
async function cpuDuring<T>(
  peers: readonly ServiceProcess[],
  run: () => Promise<T>,
): Promise<{ value: T; cpu: Map<string, number> }> {
  const before = peers.map((p) => cpuMs(p.pid));
  const self = process.cpuUsage();
  const value = await run();
  const selfUsed = process.cpuUsage(self);
  const cpu = new Map<string, number>();
  for (const [i, p] of peers.entries())
    cpu.set(`${p.service}#${p.pid}`, cpuMs(p.pid) - (before[i] ?? 0));
  cpu.set('load generator', (selfUsed.user + selfUsed.system) / 1000);
  return { value, cpu };
}

/**
 * One path under test. Paths are measured in interleaved rounds (every path once per
 * round), and each figure is the median over rounds: this VM's speed drifts by tens of
 * percent over minutes, which would otherwise favour whichever path ran in a fast spell.
 */
async function openPath({ url, peers }: { url: string; peers: ServiceProcess[] }) {
  const one = await leanClient(url);
  const many = await Promise.all(Array.from({ length: CONCURRENCY }, () => leanClient(url)));
  const samples: number[] = [];
  const afterBurst: number[] = [];
  const c1: number[] = [];
  const c32: number[] = [];
  const cpu = new Map<string, number[]>();
  const rate = async (clients: LeanClient[]) => {
    let count = 0;
    const until = performance.now() + THROUGHPUT_SECONDS * 1000;
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (c) => {
        while (performance.now() < until) {
          await c.call();
          count++;
        }
      }),
    );
    return { perSecond: count / ((performance.now() - t0) / 1000), count };
  };
  return {
    async warm() {
      const warmUntil = performance.now() + WARMUP_SECONDS * 1000;
      await Promise.all(
        many.map(async (c) => {
          while (performance.now() < warmUntil) await c.call();
        }),
      );
      for (let i = 0; i < WARMUP; i++) await one.call();
    },
    async round() {
      for (let i = 0; i < SETTLE_CALLS; i++) {
        const t = process.hrtime.bigint();
        await one.call();
        afterBurst.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
      for (let i = 0; i < LATENCY_CALLS / ROUNDS; i++) {
        const t = process.hrtime.bigint();
        await one.call();
        samples.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
      c1.push((await rate([one])).perSecond);
      const { value, cpu: used } = await cpuDuring(peers, () => rate(many));
      c32.push(value.perSecond);
      for (const [k, v] of used) cpu.set(k, [...(cpu.get(k) ?? []), v / value.count]);
    },
    async close() {
      await Promise.all([one, ...many].map((c) => c.close()));
      return {
        median: median(samples),
        p99: quantile(samples, 0.99),
        afterBurstP99: quantile(afterBurst, 0.99),
        c1: median(c1),
        c32: median(c32),
        cpuPerCall: new Map([...cpu].map(([k, v]) => [k, median(v)])),
      };
    },
  };
}

try {
  const gateways = {
    plain: await startGateway('plain'),
    chain: await startGateway('chain'),
    speculative: await startGateway('speculative'),
    cohosted: await startGateway('cohosted'),
  };
  // The third field: the row is one of the three-interceptor gateway rows the targets are for.
  const paths = [
    ['direct to the backend', await openPath({ url: backend.url, peers: [backend] }), false],
    ['gateway, no interceptors', await openPath(gateways.plain), false],
    ['floor: same hops, no logic', await openPath(await startFloor()), false],
    ['gateway, 3 remote interceptors', await openPath(gateways.chain), true],
    ['  + chain.speculativeMutators', await openPath(gateways.speculative), true],
    ['  + the 3 in one service', await openPath(gateways.cohosted), true],
  ] as const;
  for (const [, path] of paths) await path.warm();
  for (let r = 0; r < ROUNDS; r++) {
    process.stderr.write(`round ${r + 1}/${ROUNDS}\n`);
    for (const [, path] of paths) await path.round();
  }
  const rows: Array<
    readonly [string, Awaited<ReturnType<(typeof paths)[number][1]['close']>>, boolean]
  > = [];
  for (const [name, path, targeted] of paths) rows.push([name, await path.close(), targeted]);
  const direct = rows[0]?.[1];
  if (!direct) throw new Error('no direct row');
  console.log(
    `\ntools/call echo on loopback, node ${process.version}, lean MCP client: ${WARMUP_SECONDS} s of ${CONCURRENCY}-client warm-up per path, then ${ROUNDS} interleaved rounds (per path per round: ${SETTLE_CALLS} sequential calls right after the previous path's ${CONCURRENCY}-client run, timed apart, then ${LATENCY_CALLS / ROUNDS} for latency, ${THROUGHPUT_SECONDS} s at 1 and at ${CONCURRENCY} clients); calls/s and CPU are medians over rounds`,
  );
  console.log(
    `${'path'.padEnd(32)} ${'median ms'.padStart(9)} ${'p99 ms'.padStart(8)} ${'+median'.padStart(8)} ${'+p99'.padStart(7)} ${'calls/s@1'.padStart(10)} ${'calls/s@32'.padStart(11)} ${'x direct'.padStart(9)}`,
  );
  for (const [name, r] of rows) {
    console.log(
      `${name.padEnd(32)} ${r.median.toFixed(3).padStart(9)} ${r.p99.toFixed(3).padStart(8)} ${(r.median - direct.median).toFixed(3).padStart(8)} ${(r.p99 - direct.p99).toFixed(2).padStart(7)} ${r.c1.toFixed(0).padStart(10)} ${r.c32.toFixed(0).padStart(11)} ${(r.c32 / direct.c32).toFixed(2).padStart(9)}`,
    );
  }
  console.log(
    `\np99 of the ${SETTLE_CALLS * ROUNDS} one-client calls right after another path's ${CONCURRENCY}-client run (not in the columns above)`,
  );
  for (const [name, r] of rows) console.log(`${name.padEnd(32)} ${r.afterBurstP99.toFixed(2)} ms`);
  console.log(`\nCPU ms per call by process during the ${CONCURRENCY}-client run (user + system)`);
  for (const [name, r] of rows) {
    const total = [...r.cpuPerCall.values()].reduce((a, b) => a + b, 0);
    const parts = [...r.cpuPerCall]
      .filter(([, v]) => v > 0.005)
      .map(([k, v]) => `${k.replace(/#\d+$/, '')} ${v.toFixed(3)}`)
      .join(', ');
    console.log(`${name.padEnd(32)} total ${total.toFixed(3)}: ${parts}`);
  }
  console.log(
    '\ntargets with 3 remote interceptors: added median <= 1.5 ms, p99 <= 5 ms, >= 1,500 calls/s',
  );
  for (const [name, full] of rows.filter(([, , targeted]) => targeted)) {
    const added = full.median - direct.median;
    const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
    console.log(
      `${name.padEnd(32)} +${added.toFixed(3)} ms ${verdict(added <= 1.5)}; p99 ${full.p99.toFixed(2)} ms ${verdict(full.p99 <= 5)}; ${full.c32.toFixed(0)}/s at ${CONCURRENCY} clients ${verdict(full.c32 >= 1500)}`,
    );
  }
} catch (error) {
  printStderrTails(started);
  throw error;
} finally {
  await fleet.stopAll(prefix);
}
