/**
 * Running `@modelcontextprotocol/conformance` as a child process (through the Node 20 loader
 * shim in ./register.mjs) and reading its per-scenario `checks.json` files.
 *
 * The CLI's own output ends with `Total: N passed, M failed`, which CI could take for this
 * project's test count: it is captured here and never printed; callers summarise in their
 * own words.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The conformance CLI entry point (`dist/index.js` of the installed package). */
export const CONFORMANCE_CLI = join(
  dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/package.json')),
  'dist/index.js',
);
/** The `--import` hook that makes the CLI load on Node 20. */
export const REGISTER_SHIM = fileURLToPath(new URL('./register.mjs', import.meta.url));
/** Scenarios expected to fail even against the fixture directly (with the reason in comments). */
export const EXPECTED_FAILURES = fileURLToPath(
  new URL('../expected-failures.yml', import.meta.url),
);

/** One conformance check as the CLI writes it to checks.json. */
export interface Check {
  id: string;
  name?: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED' | string;
  errorMessage?: string | null;
}

/** One scenario's outcome. */
export interface ScenarioResult {
  scenario: string;
  /**
   * No check with status FAILURE or WARNING: the CLI's definition when it compares a run
   * with an expected-failures baseline.
   */
  passed: boolean;
  checks: Check[];
}

/** The outcome of one CLI run. */
export interface SuiteRun {
  /** Per scenario, in name order. */
  scenarios: Map<string, ScenarioResult>;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** The CLI's stdout and stderr (kept for diagnosis; never print it as is). */
  output: string;
}

/** Options for {@link runConformance}. */
export interface RunOptions {
  /** `active` (the default suite of the CLI), `all` (active + pending) or `pending`. */
  suite?: 'active' | 'all' | 'pending';
  /** Only this scenario. */
  scenario?: string;
  /** Pass `--expected-failures <file>`. */
  expectedFailures?: string;
  /** Kill the CLI after this long. Default 120 s. */
  timeoutMs?: number;
  /** Keep the results (`<dir>/server-<scenario>-<timestamp>/checks.json`) here. Default: a temporary directory, removed. */
  outputDir?: string;
}

const TIMESTAMP_SUFFIX = /-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/;

/** Read `<dir>/server-<scenario>-<timestamp>/checks.json` files. */
export function readResults(dir: string): Map<string, ScenarioResult> {
  const scenarios = new Map<string, ScenarioResult>();
  if (!existsSync(dir)) return scenarios;
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
    a.name.localeCompare(b.name),
  )) {
    if (!entry.isDirectory() || !entry.name.startsWith('server-')) continue;
    const file = join(dir, entry.name, 'checks.json');
    if (!existsSync(file)) continue;
    const scenario = entry.name.slice('server-'.length).replace(TIMESTAMP_SUFFIX, '');
    const checks = JSON.parse(readFileSync(file, 'utf8')) as Check[];
    scenarios.set(scenario, {
      scenario,
      passed: !checks.some((c) => c.status === 'FAILURE' || c.status === 'WARNING'),
      checks,
    });
  }
  return new Map([...scenarios].sort(([a], [b]) => a.localeCompare(b)));
}

/** Run the server scenarios against `url` in a child process and collect the results. */
export async function runConformance(url: string, options: RunOptions = {}): Promise<SuiteRun> {
  const outDir = options.outputDir ?? mkdtempSync(join(tmpdir(), 'fleet-conformance-'));
  const args = ['--import', REGISTER_SHIM, CONFORMANCE_CLI, 'server', '--url', url, '-o', outDir];
  if (options.scenario) args.push('--scenario', options.scenario);
  else args.push('--suite', options.suite ?? 'active');
  if (options.expectedFailures) args.push('--expected-failures', options.expectedFailures);
  const child = spawn(process.execPath, args, {
    // No colours, and none of the test runner's own Node options.
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', NODE_OPTIONS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk.toString('utf8');
    if (output.length > 1_000_000) output = output.slice(-500_000);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, options.timeoutMs ?? 120_000);
  const [exitCode, signal] = await new Promise<[number | null, NodeJS.Signals | null]>(
    (resolve) => {
      child.once('error', () => resolve([null, null]));
      child.once('close', (code, sig) => resolve([code, sig]));
    },
  );
  clearTimeout(timer);
  try {
    return { scenarios: readResults(outDir), exitCode, signal, timedOut, output };
  } finally {
    if (options.outputDir === undefined) rmSync(outDir, { recursive: true, force: true });
  }
}

/** Scenarios that passed, as "passed/total". */
export function score(run: SuiteRun): string {
  const all = [...run.scenarios.values()];
  return `${all.filter((s) => s.passed).length}/${all.length}`;
}

/** One line per failing (or warning) check (for assertion messages). */
export function describeFailures(run: SuiteRun): string[] {
  const lines: string[] = [];
  for (const result of run.scenarios.values()) {
    for (const check of result.checks) {
      if (check.status !== 'FAILURE' && check.status !== 'WARNING') continue;
      lines.push(
        `${result.scenario} › ${check.id}: ${check.status} ${check.errorMessage ?? ''}`.trimEnd(),
      );
    }
  }
  return lines;
}

/**
 * The CLI output without its summary lines (`Total: N passed, M failed` and the per-scenario
 * `N passed, M failed` lines), tail only: safe to show in a failure message.
 */
export function safeOutputTail(output: string, lines = 40): string {
  return output
    .split('\n')
    .filter((line) => !/\d+ passed, \d+ failed/.test(line))
    .slice(-lines)
    .join('\n');
}

/** Scenario names of the `server:` list of an expected-failures YAML file (a list of `- name`). */
export function expectedFailures(file = EXPECTED_FAILURES): string[] {
  const names: string[] = [];
  let inServer = false;
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.replace(/#.*$/, '').trimEnd();
    if (line.trim() === '') continue;
    if (/^\S/.test(line)) {
      inServer = /^server:\s*(\[\s*\])?\s*$/.test(line);
      continue;
    }
    const item = /^\s+-\s+['"]?([^'"\s]+)['"]?\s*$/.exec(line);
    if (inServer && item?.[1]) names.push(item[1]);
  }
  return names;
}

// ---------------------------------------------------------------------------------------
// Redis clean-up over raw RESP (no client library in this package)
// ---------------------------------------------------------------------------------------

type Resp = string | number | null | Resp[] | Error;

function encode(args: readonly string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** Parse one RESP value at `offset`; undefined when the buffer is still incomplete. */
function parse(buffer: Buffer, offset: number): [Resp, number] | undefined {
  const end = buffer.indexOf('\r\n', offset);
  if (end < 0) return undefined;
  const type = String.fromCharCode(buffer[offset] as number);
  const line = buffer.toString('utf8', offset + 1, end);
  const next = end + 2;
  switch (type) {
    case '+':
      return [line, next];
    case '-':
      return [new Error(line), next];
    case ':':
      return [Number(line), next];
    case '$': {
      const length = Number(line);
      if (length < 0) return [null, next];
      if (buffer.length < next + length + 2) return undefined;
      return [buffer.toString('utf8', next, next + length), next + length + 2];
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return [null, next];
      const items: Resp[] = [];
      let at = next;
      for (let i = 0; i < count; i++) {
        const parsed = parse(buffer, at);
        if (!parsed) return undefined;
        items.push(parsed[0]);
        at = parsed[1];
      }
      return [items, at];
    }
    default:
      return [new Error(`unexpected RESP type ${JSON.stringify(type)}`), buffer.length];
  }
}

/** Send one command to Redis at `url` and return its reply. */
export function redisCommand(
  url: string,
  args: readonly string[],
  timeoutMs = 5000,
): Promise<Resp> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: target.hostname || '127.0.0.1',
      port: Number(target.port || 6379),
    });
    let buffer = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`Redis did not answer ${args[0]} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', () => {
      const auth = target.password
        ? encode(
            target.username
              ? ['AUTH', decodeURIComponent(target.username), decodeURIComponent(target.password)]
              : ['AUTH', decodeURIComponent(target.password)],
          )
        : '';
      socket.write(auth + encode(args));
    });
    let skip = target.password ? 1 : 0;
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const parsed = parse(buffer, 0);
        if (!parsed) return;
        buffer = buffer.subarray(parsed[1]);
        if (skip > 0) {
          skip -= 1;
          continue;
        }
        clearTimeout(timer);
        socket.end();
        resolve(parsed[0]);
        return;
      }
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

/** Delete every key matching `pattern` (KEYS, then DEL in chunks); returns how many. */
export async function deleteRedisKeys(url: string, pattern: string): Promise<number> {
  const keys = await redisCommand(url, ['KEYS', pattern]);
  if (keys instanceof Error) throw keys;
  if (!Array.isArray(keys) || keys.length === 0) return 0;
  let deleted = 0;
  const names = keys.filter((k): k is string => typeof k === 'string');
  for (let i = 0; i < names.length; i += 500) {
    const reply = await redisCommand(url, ['DEL', ...names.slice(i, i + 500)]);
    if (typeof reply === 'number') deleted += reply;
  }
  return deleted;
}
