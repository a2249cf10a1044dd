/**
 * The token vault's growth is bounded per scope: a caller whose results (or typed arguments)
 * carry a flood of distinct PII values cannot fill Redis with tokens. Real Redis, the real
 * service over HTTP, a stock MCP client.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  engineFor,
  MAX_VAULT_ENTRIES_PER_SCOPE,
  parsePiiConfigText,
  RedisTokenVault,
} from '../src/app.ts';
import { serveRedactor } from './serve.ts';

const KEY = 'test-hmac-key-0123456789';
const prefix = `test-pii-bounds-${randomUUID()}`;
const redis = new Redis({ host: '127.0.0.1', port: 6379 });

afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  for (let i = 0; i < keys.length; i += 10_000) await redis.del(...keys.slice(i, i + 10_000));
  redis.disconnect();
});

async function serve(maxEntriesPerScope?: number, maxEntriesPerPrincipal?: number) {
  const engine = engineFor(
    parsePiiConfigText('entities: {EMAIL_ADDRESS: {strategy: tokenize}}'),
    KEY,
  );
  const vault = new RedisTokenVault(redis, {
    secret: KEY,
    prefix,
    ttlSeconds: 60,
    ...(maxEntriesPerScope === undefined ? {} : { maxEntriesPerScope }),
    ...(maxEntriesPerPrincipal === undefined ? {} : { maxEntriesPerPrincipal }),
  });
  const invoke = await serveRedactor(engine, vault);
  return (
    phase: 'request' | 'response',
    payload: unknown,
    principal = 'mallory',
    sessionId?: string,
  ) =>
    invoke(phase, payload, {
      principal: principal === '' ? { type: 'anonymous' } : { type: 'user', id: principal },
      ...(sessionId === undefined ? {} : { sessionId }),
    });
}

const emails = (from: number, n: number) =>
  Array.from({ length: n }, (_, i) => `u${from + i}@flood.example`).join(' ');
const result = (text: string) => ({ content: [{ type: 'text', text }] });
const vaultKeys = async () => (await redis.keys(`${prefix}:*`)).length;

describe('token vault bounds', () => {
  it('refuses a result with more distinct tokens than a scope may hold, storing none', async () => {
    const invoke = await serve();
    const before = await vaultKeys();
    const error = await invoke('response', result(emails(0, MAX_VAULT_ENTRIES_PER_SCOPE + 1))).then(
      () => undefined,
      (e: unknown) => e as { code: number; message: string; data?: unknown },
    );
    expect(error?.code).toBe(-32602);
    expect(error?.data).toMatchObject({
      name: 'pii-redactor',
      reason: 'limit_exceeded',
      limit: 'vaultEntriesPerScope',
      max: MAX_VAULT_ENTRIES_PER_SCOPE,
    });
    expect(error?.message).toContain('vaultEntriesPerScope');
    expect(await vaultKeys()).toBe(before);
  }, 60_000);

  it('caps the live tokens of one scope across requests; repeats and other scopes are unaffected', async () => {
    const invoke = await serve(50);
    const first = await invoke('response', result(emails(0, 30)));
    expect(first.modified).toBe(true);
    // The same values again take no new room.
    await invoke('response', result(emails(0, 30)));
    await invoke('response', result(emails(30, 20)));
    const over = await invoke('request', { name: 't', arguments: { a: emails(50, 1) } }).then(
      () => undefined,
      (e: unknown) => e as { code: number; data?: unknown },
    );
    expect(over?.code).toBe(-32602);
    expect(over?.data).toMatchObject({ limit: 'vaultEntriesPerScope', max: 50 });
    // Tokens already held still tokenize, and another principal has its own room.
    expect((await invoke('response', result(emails(10, 5)))).modified).toBe(true);
    expect((await invoke('response', result(emails(50, 40)), 'alice')).modified).toBe(true);
  }, 60_000);

  it('caps a principal over all its sessions; sessions without a principal id are not pooled', async () => {
    const invoke = await serve(50, 80);
    const refusal = (e: unknown) => e as { code: number; data?: unknown };
    expect((await invoke('response', result(emails(0, 50)), 'eve', 's1')).modified).toBe(true);
    expect((await invoke('response', result(emails(50, 30)), 'eve', 's2')).modified).toBe(true);
    const over = await invoke('response', result(emails(80, 1)), 'eve', 's3').then(
      () => undefined,
      refusal,
    );
    expect(over?.code).toBe(-32602);
    expect(over?.data).toMatchObject({ limit: 'vaultEntriesPerPrincipal', max: 80 });
    for (const session of ['a1', 'a2'])
      expect((await invoke('response', result(emails(100, 50)), '', session)).modified).toBe(true);
  }, 60_000);
});
