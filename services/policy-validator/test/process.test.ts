/** The service as a process: the start-up line, a refused bad policy, the allow-all warning. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

describe('policy-validator process', () => {
  it('starts, says it allows everything without POLICY_FILE, and stops on SIGTERM', async () => {
    const proc = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', REDIS_URL: 'redis://127.0.0.1:6379' },
    });
    expect(proc.service).toBe('policy-validator');
    expect((await fetch(`${proc.url}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${proc.url}/policy`)).json()).toMatchObject({
      fingerprint: 'allow-all',
    });
    const exit = await proc.stop();
    expect(exit.code).toBe(0);
    expect(proc.stderr()).toContain('the policy allows everything');
  });

  it('refuses to start with a bad policy, naming the rule and line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'policy-'));
    const path = join(dir, 'policy.yaml');
    writeFileSync(
      path,
      `version: 1\ndefault: deny\nrules:\n  - id: bad-rule\n    effect: deny\n    when: 'arguments.amount >'\n`,
    );
    const error = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', POLICY_FILE: path },
      readyTimeoutMs: 10_000,
    }).catch((e: unknown) => e);
    expect(String(error)).toContain('bad-rule');
    expect(String(error)).toMatch(/line \d+|:\d+:\d+/);
  });
});
