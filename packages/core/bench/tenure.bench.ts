/**
 * What three per-request coding patterns cost the young-generation GC on this Node, against
 * a plain object literal measured in the same run:
 *   pnpm bench   (in packages/core)
 *
 * Each pattern runs as a request handler would: one short-lived object graph per iteration
 * (a payload and the object built around it), awaited, then dropped. On Node 20 (V8 11.3)
 * three patterns keep such graphs alive through scavenges, so they are copied, promoted and
 * left for mark-compacts: a leading object spread that then gains keys, an object literal
 * with its own getter, and an `AbortSignal`. The fleet's per-request code avoids all three
 * (`merged`, classes with prototype getters, `LazyAbortController`); this bench shows why,
 * and will show when a Node upgrade makes it moot.
 *
 * Prints, per pattern, the median over interleaved rounds of: scavenge pause time and
 * mark-compacts per 100,000 iterations, and the pause time as a multiple of the literal's.
 */
import { constants, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LazyAbortController, merged } from '../src/index.ts';

// A full GC before each run, so that one pattern's tenured garbage is not collected (and
// counted) during the next one's run.
setFlagsFromString('--expose-gc');
const fullGc = runInNewContext('gc') as () => void;

const quick = process.argv.includes('--quick');
const ITERATIONS = quick ? 50_000 : 200_000;
const ROUNDS = quick ? 2 : 5;

interface Base {
  interceptor: string;
  phase: string;
  durationMs: number;
}
const payloadOf = (i: number) => ({ name: 'echo', arguments: { text: `hello ${i}`, n: i } });
const baseOf = (i: number): Base => ({ interceptor: 'x', phase: 'request', durationMs: i / 7 });

/** Per-iteration builders; each returns the object a handler would hand on. */
const patterns: Record<string, (i: number) => unknown> = {
  'literal (baseline)': (i) => {
    const base = baseOf(i);
    return {
      interceptor: base.interceptor,
      phase: base.phase,
      durationMs: base.durationMs,
      type: 'mutation',
      payload: payloadOf(i),
    };
  },
  'merged(base, extra)': (i) => merged(baseOf(i), { type: 'mutation', payload: payloadOf(i) }),
  '{ ...base, extra }': (i) => ({ ...baseOf(i), type: 'mutation', payload: payloadOf(i) }),
  'class with a getter': (i) => new WithGetter(payloadOf(i)),
  'literal with own getter': (i) => {
    const payload = payloadOf(i);
    return {
      phase: 'request',
      get payload() {
        return payload;
      },
    };
  },
  LazyAbortController: (i) => {
    const abort = new LazyAbortController();
    return { abort, payload: payloadOf(i) };
  },
  'AbortController + signal': (i) => {
    const abort = new AbortController();
    return { signal: abort.signal, payload: payloadOf(i) };
  },
};

class WithGetter {
  readonly phase = 'request';
  readonly #payload: unknown;
  constructor(payload: unknown) {
    this.#payload = payload;
  }
  get payload(): unknown {
    return this.#payload;
  }
}

const gcs: Array<{ kind: number; duration: number }> = [];
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const { detail } = entry as PerformanceEntry & { detail?: { kind?: number } };
    gcs.push({ kind: detail?.kind ?? 0, duration: entry.duration });
  }
});
observer.observe({ entryTypes: ['gc'] });

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

async function run(build: (i: number) => unknown): Promise<{ scavengeMs: number; majors: number }> {
  fullGc();
  await settle();
  gcs.length = 0;
  let sink = 0;
  for (let i = 0; i < ITERATIONS; i++) {
    const made = await build(i);
    if (made !== undefined) sink++;
  }
  await settle(); // let the observer deliver
  if (sink !== ITERATIONS) throw new Error('lost an iteration');
  const per = 100_000 / ITERATIONS;
  const minor = gcs.filter((g) => g.kind === constants.NODE_PERFORMANCE_GC_MINOR);
  const majors = gcs.filter((g) => g.kind === constants.NODE_PERFORMANCE_GC_MAJOR).length;
  return { scavengeMs: minor.reduce((a, g) => a + g.duration, 0) * per, majors: majors * per };
}

const results = new Map<string, { scavengeMs: number[]; majors: number[] }>();
for (const build of Object.values(patterns)) await run(build); // warm-up
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, build] of Object.entries(patterns)) {
    const { scavengeMs, majors } = await run(build);
    const entry = results.get(name) ?? { scavengeMs: [], majors: [] };
    entry.scavengeMs.push(scavengeMs);
    entry.majors.push(majors);
    results.set(name, entry);
  }
}
observer.disconnect();

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};
const baseline = median(results.get('literal (baseline)')?.scavengeMs ?? []);
console.log(
  `\nyoung-generation GC cost per 100,000 request-like iterations (node ${process.version}; median of ${ROUNDS} interleaved rounds of ${ITERATIONS})`,
);
console.log(
  `${'pattern'.padEnd(26)} ${'scavenge ms'.padStart(12)} ${'mark-compacts'.padStart(14)} ${'x literal'.padStart(10)}`,
);
for (const [name, r] of results) {
  const scavenge = median(r.scavengeMs);
  console.log(
    `${name.padEnd(26)} ${scavenge.toFixed(1).padStart(12)} ${median(r.majors).toFixed(1).padStart(14)} ${(scavenge / baseline).toFixed(1).padStart(10)}`,
  );
}
