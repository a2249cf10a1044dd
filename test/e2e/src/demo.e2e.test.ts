/**
 * `fleet demo` as a user runs it on a machine where nothing is up yet: it starts its own
 * fleet (embedded defaults, PGlite), walks through redaction, token restore, a policy
 * denial, a blocked secret and the audit trail, and stops the fleet again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runFleet } from './fleet.ts';

const stateDir = mkdtempSync(join(tmpdir(), 'fleet-demo-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

describe('fleet demo', () => {
  it('tours the fleet it starts itself and leaves nothing running', async () => {
    // Port 1 answers nothing, so the demo starts a fleet of its own.
    const run = await runFleet([
      '--orchestrator',
      'http://127.0.0.1:1',
      'demo',
      '--state-dir',
      stateDir,
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const out = run.stdout;
    expect(out).toContain('starting one for the demo');
    // 1. PII leaves as tokens and masks, never as the raw values.
    expect(out).toMatch(/Your client receives: .*<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/);
    expect(out).not.toMatch(/Your client receives: .*ada\.lovelace@/i);
    // 2. The client's own token is restored on the way to the tool.
    expect(out).toContain('restored the real address on the way in');
    // 3. and 4. A policy denial with its rule, a secret refused without its value.
    expect(out).toMatch(/delete_record\(id: "42"\) → JSON-RPC error -32602: .*admins-only-delete/);
    expect(out).toMatch(/get_weather\(.*\) → JSON-RPC error -32602: .*SECRET at arguments\.apiKey/);
    expect(out).not.toContain('MCP error');
    // 5. The audit trail of each call, with a link to the viewer.
    expect(out).toMatch(/lookup_customer {2}trace [0-9a-f]{32}/);
    expect(out).toMatch(/request {2}denied {2}.*policy-validator:denied/);
    expect(out).toMatch(/\/\?traceId=[0-9a-f]{32}/);
    // The fleet it started is gone.
    const mcpUrl = /Connected to (\S+) as a plain MCP client/.exec(out)?.[1];
    expect(mcpUrl).toBeDefined();
    const after = await fetch(new URL('/healthz', mcpUrl), {
      signal: AbortSignal.timeout(2000),
    }).catch((e: unknown) => e);
    expect(after).toBeInstanceOf(Error);
  }, 180_000);
});
