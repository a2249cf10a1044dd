/**
 * The pii-redactor while its token vault's Redis (a private `redis-server`) is down: what
 * needs the vault fails closed with a reason that names the vault (not the Redis client's
 * wording), what does not keeps working, and the vault is back once Redis is.
 */
import { defer } from '@fleet/test-fixtures/cleanup';
import { startRedisServer } from '@fleet/test-fixtures/redis-server';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { engineFor, parsePiiConfigText, RedisTokenVault } from '../src/app.ts';
import { serveRedactor } from './serve.ts';

const KEY = 'test-hmac-key-0123456789';
const CONFIG = `
entities:
  EMAIL_ADDRESS: {strategy: tokenize}
  CREDIT_CARD: {strategy: mask, keepLast: 4}
`;
const alice = { type: 'user', id: 'alice' };
const result = (text: string) => ({ content: [{ type: 'text', text }] });

describe('pii-redactor with its vault down', () => {
  it('fails closed naming the vault where tokens are needed, serves the rest, recovers', async () => {
    const server = await startRedisServer();
    // As main.ts builds it: one retry per command, then the command fails.
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1, connectTimeout: 1000 });
    redis.on('error', () => undefined);
    defer(async () => redis.disconnect());
    const engine = engineFor(parsePiiConfigText(CONFIG), KEY);
    const vault = new RedisTokenVault(redis, { secret: KEY, ttlSeconds: 60 });
    const served = await serveRedactor(engine, vault);
    const invoke = (phase: 'request' | 'response', payload: unknown) =>
      served(phase, payload, { principal: alice, sessionId: 's1' });

    const minted = await invoke('response', result('mail ada@example.com'));
    const token = /<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/.exec(JSON.stringify(minted.payload))?.[0];
    expect(token).toBeDefined();

    await server.kill();
    // Minting a token needs the vault: refused, and the raw value goes nowhere.
    const storing = await invoke('response', result('mail bob@example.com')).catch((e) => e);
    expect(storing).toBeInstanceOf(McpError);
    expect((storing as McpError).code).toBe(-32603);
    expect((storing as McpError).data).toEqual({
      interceptor: 'pii-redactor',
      reason:
        'token vault unavailable: tokens could not be stored, so no tokenized value is released',
    });
    expect(JSON.stringify((storing as McpError).data)).not.toContain('bob@example.com');
    // Restoring a token needs it too.
    const restoring = await invoke('request', {
      name: 'send_email',
      arguments: { to: token },
    }).catch((e) => e);
    expect((restoring as McpError).data).toEqual({
      interceptor: 'pii-redactor',
      reason: 'token vault unavailable: tokens could not be restored',
    });
    // Masking needs no vault.
    const masked = await invoke('response', result('card 4111 1111 1111 1111'));
    expect(JSON.stringify(masked.payload)).toContain('**** **** **** 1111');

    await server.start();
    const deadline = Date.now() + 10_000;
    let restored: Record<string, unknown> | undefined;
    while (restored === undefined && Date.now() < deadline) {
      restored = await invoke('request', { name: 'send_email', arguments: { to: token } }).catch(
        () => undefined,
      );
      if (restored === undefined) await new Promise((r) => setTimeout(r, 200));
    }
    // The non-durable server lost its data: the token is unknown now, and says so.
    expect(restored).toMatchObject({ info: { restored: 0, unrestorable: 1 } });
    const again = await invoke('response', result('mail bob@example.com'));
    expect(JSON.stringify(again.payload)).toMatch(/<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/);
  }, 30_000);
});
