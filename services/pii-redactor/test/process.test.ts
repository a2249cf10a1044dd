/** The service as a process: the start-up line, a refused bad config, graceful stop. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

describe('pii-redactor process', () => {
  it('starts on embedded defaults and stops on SIGTERM', async () => {
    const proc = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', PII_HMAC_KEY: 'k'.repeat(32) },
    });
    expect(proc.service).toBe('pii-redactor');
    expect((await fetch(`${proc.url}/readyz`)).status).toBe(200);
    expect((await proc.stop()).code).toBe(0);
    expect(proc.stderr()).toContain('every entity type is detected');
  });

  it('refuses a bad PII_CONFIG, naming the path', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pii-'));
    const path = join(dir, 'pii.yaml');
    writeFileSync(path, 'entities:\n  EMAIL_ADDRESS: {strategy: shred}\n');
    const error = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', PII_CONFIG: path },
      readyTimeoutMs: 10_000,
    }).catch((e: unknown) => e);
    expect(String(error)).toContain('entities.EMAIL_ADDRESS.strategy');
  });
});
