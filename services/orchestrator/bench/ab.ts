/**
 * Interleaved A/B of two gateways through the 3-service chain: what one change does, on a
 * VM whose speed drifts by tens of percent within minutes (the full bench compares paths,
 * not builds, and a figure from one run against one from another mostly measures the drift).
 *
 * A and B share the backend and the three interceptor services (bench/backend.ts,
 * bench/interceptors.ts) and take turns: each round, in alternating order, each side makes
 * 200 one-client calls to settle, 800 timed one-client calls, then 3 s at 32 clients.
 * Printed per side: the median of the round medians and the p99 of all timed calls at one
 * client, calls/s at 32, and CPU per call (the gateway's, and of every process the call
 * reaches) at 1 and 32 clients, read from /proc; then B/A ratios. Per-round medians of two
 * identical sides differ by up to ±40% here, so trust CPU per call and what repeats.
 *
 *   tsx bench/ab.ts --a <other build>/services/orchestrator/dist/main.js [--rounds 8]
 *   tsx bench/ab.ts --chain-b '{auditBatchMs: 50}'        (one build, two configurations)
 *   tsx bench/ab.ts --node-b=--min-semi-space-size=16    (one build, two sets of node flags)
 *   tsx bench/ab.ts --env-b OTEL_NODE_DISABLED_INSTRUMENTATIONS=runtime-node   (gateway env)
 *
 * B is always this tree's build (`pnpm build` first); A defaults to it too. `--chain-a` /
 * `--chain-b` set each side's `chain:` config block (YAML flow mapping); `--node-a` / `--node-b`
 * add node flags (space-separated) to each side's gateway, after the images' own. For an older build,
 * `git worktree add /tmp/old <commit>`, then `pnpm install --offline` and
 * `pnpm --filter @fleet/orchestrator... run build` there.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { type ServiceProcess, sourceCommand } from '@fleet/test-fixtures';
import { type LeanClient, leanClient } from './lean-client.ts';
import { cpuMs, printStderrTails, quantile } from './measure.ts';
import { fleetCommand, peers } from './peers.ts';

const { values: args } = parseArgs({
  options: {
    a: { type: 'string' },
    'chain-a': { type: 'string' },
    'chain-b': { type: 'string' },
    'node-a': { type: 'string' },
    'node-b': { type: 'string' },
    'env-a': { type: 'string' },
    'env-b': { type: 'string' },
    rounds: { type: 'string', default: '8' },
    calls: { type: 'string', default: '800' },
  },
});
const ROUNDS = Number(args.rounds);
const CALLS = Number(args.calls);
const SETTLE_CALLS = 200;
const WARMUP_MS = 15_000;
const THROUGHPUT_MS = 3_000;
const CONCURRENCY = 32;
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || !Number.isInteger(CALLS) || CALLS < 100) {
  console.error('--rounds must be an integer >= 1 and --calls an integer >= 100');
  process.exit(2);
}

const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));
const fleet = peers();
const start = (command: { command: string; args: string[] }, env: Record<string, string>) =>
  fleet.start(command, { env });

interface Side {
  name: 'A' | 'B';
  gateway: ServiceProcess;
  one: LeanClient;
  many: LeanClient[];
  roundMedians: number[];
  samples: number[];
  gatewayCpu1: number[];
  totalCpu1: number[];
  rate32: number[];
  gatewayCpu32: number[];
  totalCpu32: number[];
}

/** `KEY=VALUE KEY2=VALUE2` (from `--env-a` / `--env-b`) as an environment. */
function envOf(text: string | undefined): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of text?.split(/\s+/).filter(Boolean) ?? []) {
    const at = pair.indexOf('=');
    if (at <= 0) {
      console.error(`--env-a/--env-b take KEY=VALUE pairs, got "${pair}"`);
      process.exit(2);
    }
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return env;
}

const prefix = `ab-${randomUUID().slice(0, 8)}`;
const dir = mkdtempSync(join(tmpdir(), 'fleet-ab-'));
try {
  const backend = await start(sourceCommand(here('./backend.ts'), []), {});
  const services = await Promise.all(
    ['0', '1', '2'].map((i) => start(fleetCommand(here('./interceptors.ts'), [i]), {})),
  );
  const shared = [backend, ...services];
  const sharedCpu = () => shared.reduce((sum, p) => sum + cpuMs(p.pid), 0);

  const openSide = async (
    name: 'A' | 'B',
    main: string,
    chain: string | undefined,
    flags: string | undefined,
    extraEnv: string | undefined,
  ) => {
    const config = join(dir, `${name}.yaml`);
    writeFileSync(
      config,
      `backends:\n  - {id: bench, url: "${backend.url}", resilience: {maxConcurrent: 256}}\n` +
        `interceptors:\n${services.map((p) => `  - url: "${p.url}/mcp"`).join('\n')}\n` +
        (chain ? `chain: ${chain}\n` : '') +
        `registry: {prefix: ${prefix}-${name}}\naudit: {queue: ${prefix}-audit-${name}}\n`,
    );
    const gateway = await start(fleetCommand(main, [], flags?.split(/\s+/).filter(Boolean)), {
      FLEET_CONFIG: config,
      AUDIT_JOURNAL: join(dir, `${name}.ndjson`),
      ...envOf(extraEnv),
    });
    const url = `${gateway.url}/mcp`;
    const side: Side = {
      name,
      gateway,
      one: await leanClient(url),
      many: await Promise.all(Array.from({ length: CONCURRENCY }, () => leanClient(url))),
      roundMedians: [],
      samples: [],
      gatewayCpu1: [],
      totalCpu1: [],
      rate32: [],
      gatewayCpu32: [],
      totalCpu32: [],
    };
    const until = performance.now() + WARMUP_MS;
    await Promise.all(
      side.many.map(async (c) => {
        while (performance.now() < until) await c.call();
      }),
    );
    return side;
  };
  const ours = here('../dist/main.js');
  const sides = [
    await openSide('A', args.a ?? ours, args['chain-a'], args['node-a'], args['env-a']),
    await openSide('B', ours, args['chain-b'], args['node-b'], args['env-b']),
  ] as const;

  const measure = async (side: Side) => {
    for (let i = 0; i < SETTLE_CALLS; i++) await side.one.call();
    const timed: number[] = [];
    let gateway0 = cpuMs(side.gateway.pid);
    let shared0 = sharedCpu();
    for (let i = 0; i < CALLS; i++) {
      const t = performance.now();
      await side.one.call();
      timed.push(performance.now() - t);
    }
    let gatewayUsed = cpuMs(side.gateway.pid) - gateway0;
    side.gatewayCpu1.push(gatewayUsed / CALLS);
    side.totalCpu1.push((gatewayUsed + sharedCpu() - shared0) / CALLS);
    side.roundMedians.push(quantile(timed, 0.5));
    side.samples.push(...timed);

    let count = 0;
    gateway0 = cpuMs(side.gateway.pid);
    shared0 = sharedCpu();
    const t0 = performance.now();
    const until = t0 + THROUGHPUT_MS;
    await Promise.all(
      side.many.map(async (c) => {
        while (performance.now() < until) {
          await c.call();
          count++;
        }
      }),
    );
    side.rate32.push(count / ((performance.now() - t0) / 1000));
    gatewayUsed = cpuMs(side.gateway.pid) - gateway0;
    side.gatewayCpu32.push(gatewayUsed / count);
    side.totalCpu32.push((gatewayUsed + sharedCpu() - shared0) / count);
  };

  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? sides : ([sides[1], sides[0]] as const);
    for (const side of order) await measure(side);
    process.stderr.write(
      `round ${round + 1}/${ROUNDS}: median A ${sides[0].roundMedians.at(-1)?.toFixed(3)} ms, B ${sides[1].roundMedians.at(-1)?.toFixed(3)} ms\n`,
    );
  }

  const figures = (s: Side) => ({
    median: quantile(s.roundMedians, 0.5),
    p99: quantile(s.samples, 0.99),
    rate32: quantile(s.rate32, 0.5),
    gatewayCpu1: quantile(s.gatewayCpu1, 0.5),
    totalCpu1: quantile(s.totalCpu1, 0.5),
    gatewayCpu32: quantile(s.gatewayCpu32, 0.5),
    totalCpu32: quantile(s.totalCpu32, 0.5),
  });
  const a = figures(sides[0]);
  const b = figures(sides[1]);
  console.log(
    `\nA: ${args.a ?? 'this build'}${args['chain-a'] ? ` chain ${args['chain-a']}` : ''}${args['node-a'] ? ` node ${args['node-a']}` : ''}${args['env-a'] ? ` env ${args['env-a']}` : ''}\nB: this build${args['chain-b'] ? ` chain ${args['chain-b']}` : ''}${args['node-b'] ? ` node ${args['node-b']}` : ''}${args['env-b'] ? ` env ${args['env-b']}` : ''}\n${ROUNDS} interleaved rounds, node ${process.version}; CPU is ms per call (gateway / every process the call reaches)\n`,
  );
  const rows: Array<[string, keyof typeof a, number]> = [
    ['median ms at 1 client (of round medians)', 'median', 3],
    ['p99 ms at 1 client', 'p99', 2],
    [`calls/s at ${CONCURRENCY} clients`, 'rate32', 0],
    ['gateway CPU per call at 1 client', 'gatewayCpu1', 3],
    ['all processes CPU per call at 1 client', 'totalCpu1', 3],
    [`gateway CPU per call at ${CONCURRENCY} clients`, 'gatewayCpu32', 3],
    [`all processes CPU per call at ${CONCURRENCY} clients`, 'totalCpu32', 3],
  ];
  console.log(`${'figure'.padEnd(44)} ${'A'.padStart(8)} ${'B'.padStart(8)} ${'B/A'.padStart(6)}`);
  for (const [label, key, digits] of rows) {
    console.log(
      `${label.padEnd(44)} ${a[key].toFixed(digits).padStart(8)} ${b[key].toFixed(digits).padStart(8)} ${(b[key] / a[key]).toFixed(3).padStart(6)}`,
    );
  }
  const ratios = sides[1].roundMedians.map((m, i) => m / (sides[0].roundMedians[i] ?? m));
  console.log(`\nB/A per-round medians: ${ratios.map((r) => r.toFixed(2)).join(' ')}`);
  for (const side of sides) await Promise.all([side.one, ...side.many].map((c) => c.close()));
} catch (error) {
  printStderrTails(fleet.started);
  throw error;
} finally {
  await fleet.stopAll(prefix);
}
