/**
 * Decisions per second for a 50-rule policy evaluated in-process, CEL engine against Cedar
 * (pre-parsed policy set) in the same run:
 *   pnpm bench   (in packages/policy; `-- --quick` for a shorter run)
 * Each row is the median of several timed runs after a warm-up. Also times the whole
 * validator path (input building, decision, rate-limit matching) and tools/list filtering.
 */
import type { Principal } from '@fleet/core';
import {
  type CompiledPolicy,
  compilePolicy,
  evaluate,
  filterToolsList,
  matchRateLimits,
  type PolicyInput,
  policyInputOf,
} from '../src/index.ts';

const quick = process.argv.includes('--quick');
const RUNS = quick ? 3 : 7;
const CEL_ITERATIONS = quick ? 50_000 : 300_000;
const CEDAR_ITERATIONS = quick ? 1_000 : 5_000;
const TARGET_PER_SECOND = 200_000;
const RULES = 50;

/** Rule i of the CEL policy: four kinds in rotation, each scoped to its own tools. */
function celRule(i: number): string {
  switch (i % 4) {
    case 0:
      return `  - id: guests-${i}\n    effect: deny\n    events: ["tools/call"]\n    tools: ["svc${i}_delete*", "svc${i}_write_*"]\n    when: 'principal.type == "anonymous" || !("admin" in principal.claims.roles)'\n    message: Only admins may delete`;
    case 1:
      return `  - id: transfers-${i}\n    effect: deny\n    tools: ["svc${i}_transfer"]\n    when: 'arguments.amount > 10000'`;
    case 2:
      return `  - id: ci-${i}\n    effect: allow\n    principals: ["service:ci-*"]\n    tools: ["svc${i}_*"]`;
    default:
      return `  - id: gold-${i}\n    effect: deny\n    tools: ["svc${i}_admin_*"]\n    when: '!(principal.claims.tier == "gold")'`;
  }
}

function cedarRule(i: number): string {
  switch (i % 4) {
    case 0:
      return `@id("guests-${i}") forbid(principal, action == Action::"tools/call", resource) when { (resource.name like "svc${i}_delete*" || resource.name like "svc${i}_write_*") && (principal is Anonymous || !(context.claims has roles && context.claims.roles.contains("admin"))) };`;
    case 1:
      return `@id("transfers-${i}") forbid(principal, action, resource == Tool::"svc${i}_transfer") when { context.arguments has amount && context.arguments.amount > 10000 };`;
    case 2:
      return `@id("ci-${i}") permit(principal is Service, action, resource) when { resource.name like "svc${i}_*" };`;
    default:
      return `@id("gold-${i}") forbid(principal, action, resource) when { resource.name like "svc${i}_admin_*" && !(context.claims has tier && context.claims.tier == "gold") };`;
  }
}

const lastCel = `  - id: last\n    effect: allow\n    tools: ["last_*"]\n    when: '"dev" in principal.claims.roles && arguments.size < 100'`;
const lastCedar = `@id("last") permit(principal, action == Action::"tools/call", resource) when { resource.name like "last_*" && context.claims has roles && context.claims.roles.contains("dev") && context.arguments has size && context.arguments.size < 100 };`;

const celPolicy = compilePolicy(
  [
    'version: 1',
    'default: deny',
    'rules:',
    ...Array.from({ length: RULES - 1 }, (_, i) => celRule(i)),
    lastCel,
    'rateLimits:',
    '  - {id: per-user, events: ["tools/call"], key: principal.id, limit: 100, window: 60s}',
  ].join('\n'),
);
const cedarText = [...Array.from({ length: RULES - 1 }, (_, i) => cedarRule(i)), lastCedar]
  .map((line) => `    ${line}`)
  .join('\n');
const cedarPolicy = compilePolicy(
  `version: 1\nengine: cedar\ndefault: deny\ncedar:\n  policies: |\n${cedarText}\n`,
);

/** Worst case: 50 rules that all match the request and whose conditions are all false. */
const allConditions = compilePolicy(
  [
    'version: 1',
    'default: allow',
    'rules:',
    ...Array.from(
      { length: RULES },
      (_, i) =>
        `  - id: c${i}\n    effect: deny\n    when: 'principal.claims.tier == "t${i}" && arguments.amount > ${i}'`,
    ),
  ].join('\n'),
);

const user: Principal = { type: 'user', id: 'alice', claims: { roles: ['dev'], tier: 'silver' } };
const call = (tool: string, args: Record<string, unknown> = {}): PolicyInput => ({
  event: 'tools/call',
  phase: 'request',
  tool,
  arguments: args,
  principal: user,
});

interface Shape {
  name: string;
  input: PolicyInput;
  /** The rule that must decide, checked before timing. */
  rule: string;
  cedarRule?: string;
  cel?: CompiledPolicy;
  cedar?: CompiledPolicy | undefined;
}

const shapes: Shape[] = [
  { name: 'first-rule hit (deny)', input: call('svc0_delete_all'), rule: 'guests-0' },
  {
    name: 'last-rule hit (allow, rule 50)',
    input: call('last_tool', { size: 10 }),
    rule: 'last',
  },
  { name: 'no rule matches (default)', input: call('unknown_tool'), rule: 'default' },
  {
    name: 'worst case: 50 conditions evaluated',
    input: call('anything', { amount: 1 }),
    rule: 'default',
    cel: allConditions,
    cedar: undefined,
  },
];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** Median µs per call of `fn` over RUNS timed runs of `iterations` calls. */
function measure(fn: () => unknown, iterations: number): number {
  // One untimed run first, so that every timed run measures optimised code.
  for (let i = 0; i < iterations; i++) fn();
  const runs: number[] = [];
  let sink = 0;
  for (let run = 0; run < RUNS; run++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) if (fn()) sink++;
    runs.push(Number(process.hrtime.bigint() - started) / 1000 / iterations);
  }
  if (sink < 0) console.log(sink);
  return median(runs);
}

function check(policy: CompiledPolicy, input: PolicyInput, rule: string, engine: string): void {
  const got = evaluate(policy, input).rule;
  if (got !== rule) throw new Error(`${engine}: expected rule ${rule}, got ${got}`);
}

const perSecond = (us: number): string => Math.round(1e6 / us).toLocaleString('en-US');
const fixed = (us: number): string => (us < 10 ? us.toFixed(2) : us.toFixed(1));

const rows: string[][] = [];
let worstCelOnShapes = 0;
for (const shape of shapes) {
  const cel = shape.cel ?? celPolicy;
  const cedar = 'cedar' in shape ? shape.cedar : cedarPolicy;
  check(cel, shape.input, shape.rule, 'cel');
  if (cedar) check(cedar, shape.input, shape.cedarRule ?? shape.rule, 'cedar');
  const celUs = measure(() => evaluate(cel, shape.input).allowed, CEL_ITERATIONS);
  if (!shape.cel) worstCelOnShapes = Math.max(worstCelOnShapes, celUs);
  const cedarUs = cedar
    ? measure(() => evaluate(cedar, shape.input).allowed, CEDAR_ITERATIONS)
    : undefined;
  rows.push([
    shape.name,
    fixed(celUs),
    perSecond(celUs),
    cedarUs === undefined ? '-' : fixed(cedarUs),
    cedarUs === undefined ? '-' : perSecond(cedarUs),
    cedarUs === undefined ? '-' : `${Math.round(cedarUs / celUs)}x`,
  ]);
}

// The validator's whole request path: input from the invoke payload, decision, rate limits.
const payload = { name: 'last_tool', arguments: { size: 10 } };
const context = { principal: user };
const pathUs = measure(() => {
  const input = policyInputOf('tools/call', 'request', payload, context);
  return evaluate(celPolicy, input).allowed && matchRateLimits(celPolicy, input).length;
}, CEL_ITERATIONS);
rows.push([
  'validator path (input + decision + rate limits)',
  fixed(pathUs),
  perSecond(pathUs),
  '-',
  '-',
  '-',
]);

const table = [
  ['shape (50 rules)', 'CEL µs', 'CEL decisions/s', 'Cedar µs', 'Cedar decisions/s', 'Cedar/CEL'],
  ...rows,
];
const widths =
  table[0]?.map((_, c) => Math.max(...table.map((row) => (row[c] ?? '').length))) ?? [];
const line = (row: string[]) =>
  row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0)));
console.log(`@fleet/policy decisions, node ${process.version}, median of ${RUNS} runs`);
console.log(line(table[0] ?? []).join(' | '));
console.log(widths.map((w) => '-'.repeat(w)).join('-|-'));
for (const row of rows) console.log(line(row).join(' | '));

// tools/list filtering: 100 tools, half of them removed for this principal.
const list = {
  tools: Array.from({ length: 100 }, (_, i) => ({
    name: i % 2 === 0 ? `svc0_delete_${i}` : `last_${i}`,
  })),
};
const filterCel = measure(() => filterToolsList(celPolicy, list, user).kept, quick ? 200 : 2_000);
const filterCedar = measure(() => filterToolsList(cedarPolicy, list, user).kept, quick ? 3 : 10);
console.log(
  `\ntools/list filtering, 100 tools: CEL ${fixed(filterCel)} µs, Cedar (partial evaluation) ${(filterCedar / 1000).toFixed(1)} ms`,
);

const met = 1e6 / worstCelOnShapes >= TARGET_PER_SECOND;
console.log(
  `target ≥ ${TARGET_PER_SECOND.toLocaleString('en-US')} decisions/s (≤ ${1e6 / TARGET_PER_SECOND} µs) for the CEL engine on the 50-rule policy: ${met ? 'met' : 'NOT met'} (slowest shape ${fixed(worstCelOnShapes)} µs)`,
);
