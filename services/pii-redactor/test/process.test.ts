/**
 * The service as a process: the start-up line, a refused bad config, a rejected bad edit,
 * graceful stop (also on a SIGTERM right after the start-up line).
 */

import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRemoteService } from '@fleet/interceptor-kit';
import { occupiedPort, sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { startExpectingRefusal, startRefusalCases } from '@fleet/test-fixtures/start-refusal';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

/** A PII config file in a new temporary directory. */
function configFile(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'pii-')), 'pii.yaml');
  writeFileSync(path, text);
  return path;
}

// A port another server holds, for the PORT-in-use case.
const held = await occupiedPort();
afterAll(() => held.close());

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

  it('drains on a SIGTERM sent as soon as its start-up line appears', async () => {
    // The line says the process is ready; its SIGTERM handler used to come after it, and
    // such a SIGTERM ended the process by the signal (code null) in most runs.
    for (let run = 0; run < 4; run++) {
      const proc = await startServiceProcess({
        ...sourceCommand(MAIN),
        env: { PORT: '0', PII_HMAC_KEY: 'k'.repeat(32) },
      });
      expect(await proc.stop(), `run ${run}:\n${proc.stderr()}`).toEqual({ code: 0, signal: null });
    }
  });

  it.each([
    [
      'a bad value, naming the path',
      'entities:\n  EMAIL_ADDRESS: {strategy: shred}\n',
      'entities.EMAIL_ADDRESS.strategy',
    ],
    [
      'a misspelt key, naming it and the likely key',
      'entites:\n  EMAIL_ADDRESS: {strategy: mask}\n',
      'entites: unknown key "entites" (did you mean "entities"?)',
    ],
    [
      'a misspelt entity type, naming it and the likely type',
      'entities:\n  EMAIL_ADRESS: {strategy: mask}\n',
      'entities.EMAIL_ADRESS: unknown key "EMAIL_ADRESS" (did you mean "EMAIL_ADDRESS"?)',
    ],
  ])('refuses to start on %s', async (_what, text, message) => {
    const error = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', PII_CONFIG: configFile(text) },
      readyTimeoutMs: 10_000,
    }).catch((e: unknown) => String(e));
    expect(error).toContain('exited before its start-up line (code 1');
    expect(error).toContain('cannot load PII_CONFIG');
    expect(error).toContain(message);
  });

  it.each(startRefusalCases(held.port, { redisUrl: true, logLevel: true }))(
    'exits 1 on %s with one line naming it (not a stack)',
    async (_what, env, line) => {
      const { how, lines } = await startExpectingRefusal({
        ...sourceCommand(MAIN),
        env,
        readyTimeoutMs: 10_000,
      });
      expect(how).toContain('exited before its start-up line (code 1');
      // Beside the JSON log lines (the shutdown that closes Redis and telemetry) only this one:
      // no stack.
      expect(lines).toEqual([line]);
    },
  );

  it('rejects an edit with a misspelt key, keeps the config in force and logs why', async () => {
    const path = configFile('defaultStrategy: mask\n');
    const proc = await startServiceProcess({
      ...sourceCommand(MAIN),
      env: { PORT: '0', PII_CONFIG: path, PII_HMAC_KEY: 'k'.repeat(32) },
    });
    try {
      writeFileSync(path, 'defaultStrategy: hash\nguard:\n  blok: [PRIVATE_KEY]\n');
      const hint = 'guard.blok: unknown key "blok" (did you mean "block"?)';
      let status: { lastError?: string; defaultStrategy?: string } = {};
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
        status = (await (await fetch(`${proc.url}/config`)).json()) as typeof status;
        if (status.lastError) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(status.lastError).toContain(hint);
      expect(status.defaultStrategy).toBe('mask');
      expect(proc.stderr()).toContain('PII config edit rejected');
      expect(proc.stderr()).toContain(hint.replaceAll('"', '\\"'));
    } finally {
      await proc.stop();
    }
  });

  it('keeps its token vault under PII_VAULT_PREFIX', async () => {
    const path = configFile('entities:\n  EMAIL_ADDRESS: {strategy: tokenize}\n');
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
