/** The service as a process: the start-up line, a refused bad config, graceful stop. */

import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRemoteService } from '@fleet/interceptor-kit';
import { sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { Redis } from 'ioredis';
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

  it('keeps its token vault under PII_VAULT_PREFIX', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pii-'));
    const path = join(dir, 'pii.yaml');
    writeFileSync(path, 'entities:\n  EMAIL_ADDRESS: {strategy: tokenize}\n');
    const prefix = `test:pii-vault:${randomUUID()}`;
    const proc = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', PII_CONFIG: path, PII_HMAC_KEY: 'k'.repeat(32), PII_VAULT_PREFIX: prefix },
    });
    const service = createRemoteService({ url: `${proc.url}/mcp` });
    const redis = new Redis({ host: '127.0.0.1', port: 6379 });
    try {
      const result = (await service.invoke(
        {
          name: 'pii-redactor',
          event: 'tools/call',
          phase: 'response',
          payload: { content: [{ type: 'text', text: 'mail ada.lovelace@example.com' }] },
          context: {
            principal: { type: 'user', id: 'alice' },
            timestamp: new Date().toISOString(),
          },
        },
        { signal: AbortSignal.timeout(10_000) },
      )) as { modified?: boolean; payload?: { content: Array<{ text: string }> } };
      const text = result.payload?.content[0]?.text ?? '';
      expect(text).not.toContain('ada.lovelace@example.com');
      const keys = await redis.keys(`${prefix}*`);
      expect(keys.length).toBeGreaterThan(0);
      expect(await redis.keys(`fleet:pii:vault*${keys[0]?.slice(prefix.length)}`)).toEqual([]);
      await redis.del(...keys);
    } finally {
      redis.disconnect();
      await service.close();
      await proc.stop();
    }
  });
});
