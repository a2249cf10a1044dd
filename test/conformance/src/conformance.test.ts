/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`, server scenarios,
 * active and pending) run twice as a child process:
 *
 * 1. against the conformance fixture directly;
 * 2. through the orchestrator, with that fixture as its only backend (prefix "") and the full
 *    interceptor chain — pii-redactor, policy-validator and audit-logger as real processes —
 *    configured to allow everything.
 *
 * Every scenario that passes directly must pass through the gateway, and every check that
 * succeeds directly must succeed through it. Scenarios that fail directly are listed in
 * expected-failures.yml (with the reason).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServiceProcess, sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  deleteRedisKeys,
  describeFailures,
  EXPECTED_FAILURES,
  expectedFailures,
  runConformance,
  type SuiteRun,
  safeOutputTail,
  score,
} from './suite.ts';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const FIXTURE_MAIN = fileURLToPath(new URL('./fixture-main.ts', import.meta.url));
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
/** Set to a directory to keep both runs' checks.json files (`<dir>/direct`, `<dir>/gateway`). */
const KEEP = process.env.CONFORMANCE_OUTPUT || undefined;
const outputDir = (run: string) => (KEEP ? join(KEEP, run) : undefined);

const runId = `conformance-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
const fleetToken = randomBytes(24).toString('base64url');
const quietEnv = {
  LOG_LEVEL: 'warn',
  REDIS_URL,
  OTEL_TRACES_EXPORTER: 'none',
  OTEL_METRICS_EXPORTER: 'none',
  OTEL_LOGS_EXPORTER: 'none',
};

/** Allow-list every detected value and block nothing: conformance payloads pass unchanged. */
const PII_CONFIG = `# Conformance runs: detect as usual, but every detected value is allow-listed (never
# transformed) and the guard blocks nothing, so the chain runs without changing payloads.
allow: {patterns: ['/.*/s']}
guard: {block: []}
`;

/**
 * Checks that succeed directly but only report INFO ("not applicable") through the gateway,
 * with the reason. Nothing else may differ.
 */
const NOT_APPLICABLE_THROUGH_GATEWAY: Record<string, string> = {
  // The scenario opens three concurrent POST streams (tools/list) and checks the SSE ones.
  // The fixture (SDK transport) always answers with SSE; the gateway's session transport
  // answers plain JSON when nothing but the response travels (the spec lets a server choose),
  // so the scenario reports "JSON for all requests - SSE streaming is optional" (INFO).
  // server-accepts-multiple-post-streams must still succeed.
  'server-sse-multiple-streams › server-sse-streams-functional':
    'the gateway answers JSON when only the response travels',
};

let dir: string;
const processes: ServiceProcess[] = [];
let fixture: ServiceProcess;
let gateway: ServiceProcess;
let direct: SuiteRun | undefined;

async function start(
  name: string,
  script: string,
  env: Record<string, string>,
): Promise<ServiceProcess> {
  const command = sourceCommand(script);
  const service = await startServiceProcess({
    ...command,
    cwd: dir,
    env: { PORT: '0', HOST: '127.0.0.1', ...quietEnv, ...env },
    readyTimeoutMs: 60_000,
    stopGraceMs: 10_000,
  }).catch((error: Error) => {
    throw new Error(`${name} did not start: ${error.message}`);
  });
  processes.push(service);
  return service;
}

async function ready(base: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2000) });
      last = `${res.status} ${await res.text()}`;
      if (res.status === 200) return;
    } catch (error) {
      last = String(error);
    }
    if (Date.now() > deadline)
      throw new Error(`${base}/readyz not 200 within ${timeoutMs} ms (last: ${last})`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function failureMessage(label: string, run: SuiteRun): string {
  const failures = describeFailures(run);
  return [
    `${label}: ${score(run)} scenarios passed (exit ${run.exitCode}${run.timedOut ? ', timed out' : ''})`,
    ...failures.map((f) => `  ${f}`),
    '--- conformance output (tail) ---',
    safeOutputTail(run.output),
  ].join('\n');
}

describe('MCP conformance suite', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fleet-conformance-'));
    mkdirSync(join(dir, 'pglite'), { recursive: true });
    const piiConfig = join(dir, 'pii.yaml');
    writeFileSync(piiConfig, PII_CONFIG);

    const serviceEnv = { FLEET_TOKEN: fleetToken };
    // allSettled: when one fails, the others have finished starting (and are in `processes`)
    // before afterAll stops them.
    const started = await Promise.allSettled([
      start('conformance fixture', FIXTURE_MAIN, {}),
      start('pii-redactor', join(REPO, 'services/pii-redactor/src/main.ts'), {
        ...serviceEnv,
        PII_CONFIG: piiConfig,
        PII_HMAC_KEY: randomBytes(32).toString('base64url'),
      }),
      // No POLICY_FILE: the policy allows everything.
      start('policy-validator', join(REPO, 'services/policy-validator/src/main.ts'), {
        ...serviceEnv,
        POLICY_FILE: '',
      }),
      start('audit-logger', join(REPO, 'services/audit-logger/src/main.ts'), {
        ...serviceEnv,
        AUDIT_PGLITE_DIR: join(dir, 'pglite'),
        AUDIT_QUEUE: `${runId}-audit`,
        AUDIT_JOURNAL: join(dir, 'audit-logger-journal.ndjson'),
      }),
    ]);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    const [fixtureProcess, ...interceptors] = started.map(
      (s) => (s as PromiseFulfilledResult<ServiceProcess>).value,
    );
    fixture = fixtureProcess as ServiceProcess;

    const config = join(dir, 'fleet.yaml');
    writeFileSync(
      config,
      [
        'backends:',
        `  - {id: conformance, url: "${fixture.url}", prefix: ""}`,
        'interceptors:',
        ...interceptors.map((p) => `  - {url: "${p.url}/mcp", token: "\${FLEET_TOKEN}"}`),
        'chain: {timeoutMs: 5000, denyAs: error}',
        `audit: {queue: "${runId}-audit"}`,
        `registry: {prefix: "${runId}", healthIntervalMs: 1000}`,
        '',
      ].join('\n'),
    );
    gateway = await start('orchestrator', join(REPO, 'services/orchestrator/src/main.ts'), {
      ...serviceEnv,
      FLEET_CONFIG: config,
      AUDIT_JOURNAL: join(dir, 'orchestrator-journal.ndjson'),
    });
    // Ready = every configured interceptor service discovered (else requests fail closed).
    await ready(gateway.url, 30_000);
  }, 120_000);

  afterAll(async () => {
    // The gateway first (it holds sessions to the others), then the rest.
    const order = [...processes].reverse();
    for (const p of order) await p.stop('SIGTERM').catch(() => undefined);
    await deleteRedisKeys(REDIS_URL, `*${runId}*`).catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('passes against the fixture directly (only expected failures fail)', async () => {
    direct = await runConformance(fixture.url, {
      suite: 'all',
      expectedFailures: EXPECTED_FAILURES,
      outputDir: outputDir('direct'),
    });
    const message = failureMessage('direct', direct);
    expect(direct.timedOut, message).toBe(false);
    expect(direct.scenarios.size, message).toBeGreaterThanOrEqual(30);
    // Exit 0 with --expected-failures: every failure is listed and no listed scenario passes.
    expect(direct.exitCode, message).toBe(0);
    for (const name of expectedFailures()) {
      expect(direct.scenarios.get(name)?.passed, `${name} is listed as failing`).toBe(false);
    }
  }, 150_000);

  it('passes every directly passing scenario through the gateway and the interceptor chain', async () => {
    if (!direct) throw new Error('the direct run did not complete');
    const through = await runConformance(`${gateway.url}/mcp`, {
      suite: 'all',
      outputDir: outputDir('gateway'),
    });
    const message = failureMessage('through the gateway', through);
    expect(through.timedOut, message).toBe(false);

    const regressions: string[] = [];
    for (const [name, before] of direct.scenarios) {
      const after = through.scenarios.get(name);
      if (!after) {
        regressions.push(`${name}: not run through the gateway`);
        continue;
      }
      if (before.passed && !after.passed) regressions.push(`${name}: fails through the gateway`);
      // A check that succeeds directly must succeed through the gateway (not merely "not
      // fail"), unless it is listed as not applicable to the gateway's transport.
      for (const check of before.checks) {
        if (check.status !== 'SUCCESS') continue;
        const same = after.checks.filter((c) => c.id === check.id);
        if (same.some((c) => c.status === 'SUCCESS')) continue;
        const reason = NOT_APPLICABLE_THROUGH_GATEWAY[`${name} › ${check.id}`];
        if (reason && same.length > 0 && same.every((c) => c.status === 'INFO')) continue;
        const seen = same.map((c) => `${c.status} ${c.errorMessage ?? ''}`.trim()).join('; ');
        regressions.push(`${name} › ${check.id}: ${seen || 'missing'} through the gateway`);
      }
    }
    expect(regressions, message).toEqual([]);
    // Spelled out, so that a renamed scenario cannot silently drop out of the comparison.
    for (const name of [
      'tools-call-with-progress',
      'tools-call-with-logging',
      'tools-call-sampling',
      'tools-call-elicitation',
      'elicitation-sep1034-defaults',
      'elicitation-sep1330-enums',
      'resources-subscribe',
      'resources-unsubscribe',
      'dns-rebinding-protection',
    ]) {
      expect(through.scenarios.get(name)?.passed, `${name} through the gateway`).toBe(true);
    }
    // The chain really ran: each service's interceptor was invoked, none denied, failed,
    // timed out or changed a payload.
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    const invocations = metrics
      .split('\n')
      .filter((line) => line.startsWith('fleet_interceptor_duration_count{'));
    for (const name of ['pii-redactor', 'pii-guard', 'policy-validator', 'audit-logger']) {
      expect(
        invocations.some((line) => line.includes(`fleet_interceptor_name="${name}"`)),
        `${name} was invoked`,
      ).toBe(true);
    }
    const bad = invocations.filter((line) =>
      /fleet_interceptor_outcome="(denied|failed|timeout|modified)"/.test(line),
    );
    expect(bad).toEqual([]);
    // Our own summary line, never the CLI's `Total: N passed, M failed`.
    console.log(`conformance: ${score(direct)} direct, ${score(through)} through gateway`);
  }, 150_000);
});
