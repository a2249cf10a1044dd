/**
 * Accuracy and throughput of @fleet/pii beside the npm baselines redact-pii, openredaction and
 * @redactpii/node:
 *   pnpm bench            (in packages/pii)
 *   pnpm bench --verbose  (also lists our misses and false positives on the Presidio set)
 *
 * 1. The Presidio synthetic set (`shared/data/pii/…`, or `$PII_DATASET`; skipped when absent):
 *    span-level precision/recall/F1 for the structured types, and how many of its 113 texts
 *    without PII each detector changes.
 * 2. A seeded generated corpus covering every entity type, with negatives.
 * 3. Throughput in MB/s on MCP-shaped JSON payloads (median of several runs), each detector
 *    in a process of its own (`--shared-process`: all in this one, as before).
 * 4. libphonenumber-js `min` against `max` metadata, the choice behind phone validation.
 * Matching rule: see score.ts (same type, IoU ≥ 0.5 after trimming punctuation).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { on } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type MetadataJson, parsePhoneNumberFromString } from 'libphonenumber-js/core';
import maxMetadata from 'libphonenumber-js/max/metadata';
import minMetadata from 'libphonenumber-js/min/metadata';
import { createPhoneRecognizer } from '../src/detectors/phone.ts';
import {
  createPiiEngine,
  ENTITY_TYPES,
  type EntityType,
  STRUCTURED_ENTITY_TYPES,
} from '../src/index.ts';
import {
  type Detector,
  openRedactionDetector,
  oursDetector,
  redactPiiDetector,
  redactPiiNodeDetector,
} from './baselines.ts';
import { generateCorpus, generateRecords, Rng } from './corpus.ts';
import { findPresidioDataset, loadPresidio } from './dataset.ts';
import {
  f3,
  type LabelledText,
  prf,
  type Span,
  scoreText,
  type TypeScore,
  table,
} from './score.ts';

const verbose = process.argv.includes('--verbose');
const quick = process.argv.includes('--quick');
const sharedProcess = process.argv.includes('--shared-process');

const engine = createPiiEngine();
// By name, so that a throughput worker builds only its own.
const DETECTORS: ReadonlyArray<[name: string, make: () => Detector]> = [
  ['@fleet/pii', () => oursDetector(engine)],
  ['redact-pii', redactPiiDetector],
  ['openredaction', openRedactionDetector],
  ['@redactpii/node', redactPiiNodeDetector],
];
const workerAt = process.argv.indexOf('--throughput-worker');
const detectors: Detector[] = workerAt === -1 ? DETECTORS.map(([, make]) => make()) : [];

interface Evaluation {
  scores: Map<string, TypeScore>;
  /** Texts without labels that the detector's redaction changed. */
  changedAny: number;
  /** Texts without labels where it reported a span of one of the evaluated types. */
  changedTyped: number;
  empty: number;
  misses: string[];
}

async function evaluate(
  d: Detector,
  corpus: readonly LabelledText[],
  types: readonly EntityType[],
): Promise<Evaluation> {
  const typeSet = new Set<string>(types);
  const scores = new Map<string, TypeScore>();
  let changedAny = 0;
  let changedTyped = 0;
  let empty = 0;
  const misses: string[] = [];
  for (const item of corpus) {
    const predicted = await d.detect(item.text);
    scoreText(item.text, item.spans, predicted, typeSet, scores);
    if (verbose && d.name === '@fleet/pii')
      misses.push(...describeErrors(item, predicted, typeSet));
    if (item.spans.length === 0) {
      empty++;
      if ((await d.redact(item.text)) !== item.text) changedAny++;
      if (predicted.some((s) => typeSet.has(s.type))) changedTyped++;
    }
  }
  return { scores, changedAny, changedTyped, empty, misses };
}

function describeErrors(
  item: LabelledText,
  predicted: readonly Span[],
  types: ReadonlySet<string>,
): string[] {
  const out: string[] = [];
  const show = (s: Span) => JSON.stringify(item.text.slice(s.start, s.end));
  const around = (s: Span) =>
    JSON.stringify(
      `${item.text.slice(Math.max(0, s.start - 40), s.start)}⟦${item.text.slice(s.start, s.end)}⟧${item.text.slice(s.end, s.end + 25)}`,
    );
  const overlaps = (a: Span, b: Span) => a.start < b.end && b.start < a.end && a.type === b.type;
  for (const g of item.spans.filter((s) => types.has(s.type))) {
    const hit = predicted.find((p) => overlaps(p, g));
    if (hit === undefined) out.push(`  FN ${g.type} ${around(g)}`);
    else if (hit.start !== g.start || hit.end !== g.end)
      out.push(`  ~~ ${g.type} gold ${show(g)} got ${show(hit)}`);
  }
  for (const p of predicted.filter((s) => types.has(s.type))) {
    if (!item.spans.some((g) => overlaps(p, g))) out.push(`  FP ${p.type} ${around(p)}`);
  }
  return out;
}

function cell(e: Evaluation, d: Detector, type: EntityType): string {
  if (!d.capabilities.has(type)) return 'n/a';
  const { p, r, f1 } = prf(e.scores.get(type));
  return `${f3(p)} / ${f3(r)} / ${f3(f1)}`;
}

async function accuracySection(
  title: string,
  corpus: readonly LabelledText[],
  types: readonly EntityType[],
) {
  const evals = new Map<Detector, Evaluation>();
  for (const d of detectors) evals.set(d, await evaluate(d, corpus, types));
  const ours = evals.get(detectors[0] as Detector) as Evaluation;
  const labelled = new Map<string, number>();
  for (const item of corpus)
    for (const s of item.spans) labelled.set(s.type, (labelled.get(s.type) ?? 0) + 1);

  console.log(`\n## ${title}: @fleet/pii (default config)\n`);
  const rows = types.map((t) => {
    const s = ours.scores.get(t) ?? { tp: 0, fp: 0, fn: 0, exact: 0 };
    const { p, r, f1 } = prf(s);
    return [
      t,
      String(labelled.get(t) ?? 0),
      String(s.tp),
      String(s.fp),
      String(s.fn),
      f3(p),
      f3(r),
      f3(f1),
      String(s.exact),
    ];
  });
  const total = types.reduce(
    (acc, t) => {
      const s = ours.scores.get(t);
      return {
        tp: acc.tp + (s?.tp ?? 0),
        fp: acc.fp + (s?.fp ?? 0),
        fn: acc.fn + (s?.fn ?? 0),
        exact: acc.exact + (s?.exact ?? 0),
      };
    },
    { tp: 0, fp: 0, fn: 0, exact: 0 },
  );
  const all = prf(total);
  rows.push([
    'all listed types',
    String(types.reduce((n, t) => n + (labelled.get(t) ?? 0), 0)),
    String(total.tp),
    String(total.fp),
    String(total.fn),
    f3(all.p),
    f3(all.r),
    f3(all.f1),
    String(total.exact),
  ]);
  console.log(
    table(['type', 'labelled', 'TP', 'FP', 'FN', 'precision', 'recall', 'F1', 'exact'], rows),
  );

  console.log(`\n## ${title}: precision / recall / F1 by detector\n`);
  console.log(
    table(
      ['type', ...detectors.map((d) => d.name)],
      types.map((t) => [t, ...detectors.map((d) => cell(evals.get(d) as Evaluation, d, t))]),
    ),
  );
  const verdict = (t: EntityType): 'above' | 'tied' | 'below' => {
    const mine = prf(ours.scores.get(t)).f1;
    const best = Math.max(
      ...detectors
        .slice(1)
        .filter((d) => d.capabilities.has(t))
        .map((d) => prf((evals.get(d) as Evaluation).scores.get(t)).f1),
      0,
    );
    return mine > best ? 'above' : mine === best ? 'tied' : 'below';
  };
  const byVerdict = (v: string) => types.filter((t) => verdict(t) === v);
  console.log(
    `\nF1 above every baseline on ${byVerdict('above').length} of ${types.length} types; ` +
      `tied with the best baseline on: ${byVerdict('tied').join(', ') || 'none'}; ` +
      `below on: ${byVerdict('below').join(', ') || 'none'}.`,
  );

  console.log(`\n## ${title}: texts without PII that were changed\n`);
  console.log(
    table(
      [
        'detector',
        'texts without labels',
        'changed (any rule)',
        `with a detection of a listed type`,
      ],
      detectors.map((d) => {
        const e = evals.get(d) as Evaluation;
        return [d.name, String(e.empty), String(e.changedAny), String(e.changedTyped)];
      }),
    ),
  );
  if (verbose && ours.misses.length > 0) {
    console.log(`\n@fleet/pii errors on ${title}:`);
    console.log(ours.misses.join('\n'));
  }
}

/** A named list of MCP results (`tools/call` response `result` objects). */
interface Payload {
  name: string;
  docs: unknown[];
  bytes: number;
}

function payload(name: string, docs: unknown[]): Payload {
  return {
    name,
    docs,
    bytes: docs.reduce<number>((n, d) => n + Buffer.byteLength(JSON.stringify(d)), 0),
  };
}

/** The repository's own sources and docs, one file per result: what a filesystem tool returns. */
function filePayload(limit: number): Payload {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
  const files: string[] = [];
  const visit = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    )) {
      if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name.startsWith('.'))
        continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) visit(path);
      else if (/\.(?:ts|md|json|ya?ml)$/.test(entry.name)) files.push(path);
    }
  };
  for (const top of ['packages', 'services']) {
    if (existsSync(join(root, top))) visit(join(root, top));
  }
  const docs: unknown[] = [];
  let total = 0;
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    if (total + text.length > limit) break;
    total += text.length;
    docs.push({ content: [{ type: 'text', text }] });
  }
  return payload('files', docs);
}

/** PII-dense sentences (the evaluation texts), six per content item plus short fields. */
function chatPayload(texts: readonly string[], count: number): Payload {
  const rng = new Rng(7);
  const docs = Array.from({ length: count }, (_, i) => {
    const pick = () => rng.pick(texts);
    return {
      content: [
        { type: 'text', text: Array.from({ length: 6 }, pick).join('\n') },
        { type: 'text', text: pick() },
      ],
      structuredContent: {
        id: i,
        ok: true,
        records: Array.from({ length: 4 }, (_, j) => ({
          rank: j,
          note: pick(),
          tags: ['alpha', 'beta', pick().slice(0, 40)],
          meta: { score: rng.next(), comment: pick() },
        })),
      },
    };
  });
  return payload('chat', docs);
}

/** Customer records in `structuredContent`, 50 per result. */
function recordPayload(notes: readonly string[], count: number): Payload {
  const docs = Array.from({ length: count }, (_, i) => ({
    content: [{ type: 'text', text: `${50} customers` }],
    structuredContent: { customers: generateRecords(1000 + i, 50, notes) },
  }));
  return payload('records', docs);
}

function leaves(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) leaves(v, out);
  else if (value !== null && typeof value === 'object')
    for (const v of Object.values(value)) leaves(v, out);
  return out;
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * Payload `i` through detector `d`, in CPU milliseconds: our engine runs transformMcp on each
 * result; a baseline redacts each string leaf (synchronously when the library is).
 */
function runner(d: Detector, payloads: readonly Payload[]): (i: number) => Promise<number> {
  const strings = payloads.map((p) => p.docs.map((doc) => leaves(doc)));
  return async (i) => {
    const p = payloads[i] as Payload;
    const t0 = cpuMs();
    if (d.name === '@fleet/pii') {
      for (const doc of p.docs) engine.transformMcp('response', 'tools/call', doc);
    } else if (d.redactSync !== undefined) {
      for (const list of strings[i] ?? []) for (const s of list) d.redactSync(s);
    } else {
      for (const list of strings[i] ?? []) for (const s of list) await d.redact(s);
    }
    return cpuMs() - t0;
  };
}

type ToWorker =
  | { payloads: readonly Payload[]; texts: readonly string[] }
  | { run: number }
  | { exit: true };
type FromWorker = { ready: true } | { cpu: number };

/**
 * A throughput worker: one detector in its own process. It receives the payloads and the
 * evaluation texts and warms up as a detector of the single-process benchmark was warm by
 * then (every evaluation text detected once, as the accuracy sections do, then each payload
 * once); then it runs the payloads it is asked for and answers with the CPU time of its own
 * process.
 */
async function throughputWorker(name: string): Promise<void> {
  const make = DETECTORS.find(([n]) => n === name)?.[1];
  if (make === undefined) throw new Error(`unknown detector ${name}`);
  const d = make();
  let run: ((i: number) => Promise<number>) | undefined;
  for await (const [message] of on(process, 'message')) {
    const m = message as ToWorker;
    if ('exit' in m) break;
    if ('payloads' in m) {
      run = runner(d, m.payloads);
      for (const text of m.texts) await d.detect(text);
      for (let i = 0; i < m.payloads.length; i++) await run(i);
      process.send?.({ ready: true } satisfies FromWorker);
    } else if (run !== undefined) {
      process.send?.({ cpu: await run(m.run) } satisfies FromWorker);
    }
  }
  process.disconnect?.();
}

/** A forked throughput worker for detector `name`, warmed up on `payloads`. */
async function startWorker(
  name: string,
  payloads: readonly Payload[],
  texts: readonly string[],
): Promise<(i: number) => Promise<number>> {
  const child = fork(fileURLToPath(import.meta.url), ['--throughput-worker', name], {
    serialization: 'advanced',
  });
  const replies = on(child, 'message');
  const next = async () => ((await replies.next()).value as [FromWorker])[0];
  child.on('exit', (code) => {
    if (code !== 0 && !closing) {
      console.error(`throughput worker ${name} exited with ${code}`);
      process.exit(1);
    }
  });
  workers.push(child);
  child.send({ payloads, texts } satisfies ToWorker);
  await next(); // ready
  return async (i) => {
    child.send({ run: i } satisfies ToWorker);
    const reply = await next();
    return 'cpu' in reply ? reply.cpu : Number.NaN;
  };
}
const workers: ChildProcess[] = [];
let closing = false;

async function throughputSection(texts: readonly string[]) {
  const payloads = [
    filePayload(quick ? 300_000 : 1_500_000),
    recordPayload(texts, quick ? 10 : 40),
    chatPayload(texts, quick ? 60 : 300),
  ];
  // Each detector runs in its own process (unless --shared-process): the CPU time of one
  // library's garbage collection (background marking and sweeping of its heap) and JIT work
  // is then never charged to another one, whatever order they run in. Every detector gets
  // the same payloads (sent by this process), the same warm-up (the evaluation texts, then
  // each payload once) and the same rounds.
  const measure = new Map<string, (i: number) => Promise<number>>();
  if (sharedProcess) {
    for (const d of detectors) measure.set(d.name, runner(d, payloads));
    for (const d of detectors)
      for (let i = 0; i < payloads.length; i++) await measure.get(d.name)?.(i); // warm-up
  } else {
    // The workers warm up side by side (not measured).
    const started = await Promise.all(detectors.map((d) => startWorker(d.name, payloads, texts)));
    detectors.forEach((d, k) => {
      measure.set(d.name, started[k] as (i: number) => Promise<number>);
    });
  }
  const times = new Map<string, number[]>();
  const measureRound = async (d: Detector) => {
    for (let i = 0; i < payloads.length; i++) {
      const key = `${d.name}|${i}`;
      times.set(key, [
        ...(times.get(key) ?? []),
        await (measure.get(d.name) as (i: number) => Promise<number>)(i),
      ]);
    }
  };
  // Rounds interleave the detectors so that a busy neighbour on a shared machine weighs on all
  // of them alike; CPU time, not wall time, is measured. openredaction, ~50× slower, runs
  // three rounds after the others' (between two runs of the others, a process would otherwise
  // idle for seconds while it runs, long enough for V8 to start shrinking that process's heap).
  const slow = (d: Detector) => d.name === 'openredaction';
  const rounds = quick ? 3 : 7;
  for (let r = 0; r < rounds; r++) for (const d of detectors) if (!slow(d)) await measureRound(d);
  for (let r = 0; r < 3; r++) for (const d of detectors) if (slow(d)) await measureRound(d);
  closing = true;
  for (const child of workers) child.send({ exit: true } satisfies ToWorker);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 1;
  const mbps = (name: string, i: number) =>
    (payloads[i] as Payload).bytes / 1000 / median(times.get(`${name}|${i}`) ?? [1]);
  const overall = (name: string) =>
    payloads.reduce((n, p) => n + p.bytes, 0) /
    1000 /
    payloads.reduce((n, _p, i) => n + median(times.get(`${name}|${i}`) ?? [1]), 0);
  console.log('\n## Throughput on MCP JSON payloads (MB/s of JSON per CPU second, median)\n');
  console.log(
    table(
      ['payload', 'results', 'MB', 'what'],
      [
        [
          'files',
          String(payloads[0]?.docs.length),
          ((payloads[0]?.bytes ?? 0) / 1e6).toFixed(2),
          "this repository's sources and docs as content[].text",
        ],
        [
          'records',
          String(payloads[1]?.docs.length),
          ((payloads[1]?.bytes ?? 0) / 1e6).toFixed(2),
          '50 customer records per structuredContent',
        ],
        [
          'chat',
          String(payloads[2]?.docs.length),
          ((payloads[2]?.bytes ?? 0) / 1e6).toFixed(2),
          'PII-dense sentences (the evaluation texts)',
        ],
      ],
    ),
  );
  console.log('');
  const base = overall('redact-pii');
  console.log(
    table(
      ['detector', ...payloads.map((p) => p.name), 'all', 'all vs redact-pii'],
      detectors.map((d) => [
        d.name,
        ...payloads.map((_p, i) => mbps(d.name, i).toFixed(2)),
        overall(d.name).toFixed(2),
        `${(overall(d.name) / base).toFixed(2)}×`,
      ]),
    ),
  );
  const ratios = payloads.map(
    (p, i) => `${p.name} ${(mbps('@fleet/pii', i) / mbps('redact-pii', i)).toFixed(2)}×`,
  );
  console.log(`\n@fleet/pii vs redact-pii per payload: ${ratios.join(', ')}.`);
  console.log(
    '@fleet/pii runs transformMcp on each result (all of its string leaves analyzed together);',
  );
  console.log('the baselines redact every string leaf of the same results one by one.');
}

function phoneMetadataSection(presidioPhones: readonly string[]) {
  const rng = new Rng(11);
  const randomUs = Array.from({ length: 20_000 }, () => `${rng.int(2, 9)}${rng.digits(9)}`);
  const randomIntl = Array.from(
    { length: 20_000 },
    () => `+${rng.int(1, 9)}${rng.digits(rng.int(8, 11))}`,
  );
  const rows: string[][] = [];
  for (const [name, metadata] of [
    ['min', minMetadata],
    ['max', maxMetadata],
  ] as const) {
    const md = metadata as MetadataJson;
    const valid = (s: string) => {
      try {
        return parsePhoneNumberFromString(s, 'US', md)?.isValid() === true;
      } catch {
        return false;
      }
    };
    const t0 = performance.now();
    const us = randomUs.filter(valid).length;
    const intl = randomIntl.filter(valid).length;
    const micros = ((performance.now() - t0) * 1000) / (randomUs.length + randomIntl.length);
    const presidio = presidioPhones.filter(valid).length;
    const recognizer = createPhoneRecognizer(md);
    const found = presidioPhones.filter((p) => {
      const out: Parameters<typeof recognizer.find>[2] = [];
      recognizer.find(`Phone: ${p}`, { defaultRegion: 'US' }, out);
      return out.length > 0;
    }).length;
    rows.push([
      name,
      `${(Buffer.byteLength(JSON.stringify(metadata)) / 1024).toFixed(0)} KiB`,
      presidioPhones.length > 0
        ? `${presidio} / ${presidioPhones.length} (candidates ${found})`
        : 'n/a',
      `${((us / randomUs.length) * 100).toFixed(1)}%`,
      `${((intl / randomIntl.length) * 100).toFixed(1)}%`,
      micros.toFixed(1),
    ]);
  }
  console.log('\n## libphonenumber-js metadata: min vs max (validation only)\n');
  console.log(
    table(
      [
        'metadata',
        'JSON size',
        'Presidio phone labels valid as US/intl',
        'random 10-digit US valid',
        'random +E.164 valid',
        'µs / parse',
      ],
      rows,
    ),
  );
  console.log(
    '\nThe engine uses max: fewer random digit strings pass as valid, so a number without a',
  );
  console.log(
    'phone word nearby is reported only when it is really valid; the rest needs context.',
  );
}

async function main(): Promise<void> {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  console.log(
    `# @fleet/pii benchmark\n\nNode ${process.version}, ${cpu}, ${cpus().length} CPUs${quick ? ' (quick)' : ''}`,
  );

  const datasetPath = findPresidioDataset();
  let presidioTexts: string[] = [];
  let presidioPhones: string[] = [];
  if (datasetPath === undefined) {
    console.log(
      '\nPresidio dataset not found (set PII_DATASET or place shared/data/pii/presidio_synth_dataset_v2.json above the package): skipping section 1.',
    );
  } else {
    const presidio = loadPresidio(datasetPath);
    presidioTexts = presidio.map((p) => p.text);
    presidioPhones = presidio.flatMap((p) =>
      p.spans.filter((s) => s.type === 'PHONE_NUMBER').map((s) => p.text.slice(s.start, s.end)),
    );
    await accuracySection('Presidio synthetic set', presidio, STRUCTURED_ENTITY_TYPES);
  }

  const corpus = generateCorpus();
  await accuracySection(`Generated corpus (seeded, ${corpus.length} texts)`, corpus, ENTITY_TYPES);
  await throughputSection([...presidioTexts, ...corpus.map((c) => c.text)]);
  phoneMetadataSection(presidioPhones);
}

if (workerAt === -1) await main();
else await throughputWorker(process.argv[workerAt + 1] as string);
