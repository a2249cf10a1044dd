/**
 * The pii-redactor service over real HTTP with a stock MCP SDK client and a real Redis
 * vault: redaction on the way out, token restore on the way in (same principal only),
 * pii-guard, bounded payloads.
 */
import { randomUUID } from 'node:crypto';
import { listen } from '@fleet/interceptor-kit';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  GetPromptResultSchema,
  ReadResourceResultSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createPiiRedactorApp,
  engineFor,
  parsePiiConfigText,
  RedisTokenVault,
} from '../src/app.ts';

const AnyResult = z.object({}).passthrough();
const prefix = `test-pii-${randomUUID()}`;
const redis = new Redis({ host: '127.0.0.1', port: 6379 });
const cleanups: Array<() => Promise<unknown> | unknown> = [];
let url = '';

const CONFIG = `
entities:
  EMAIL_ADDRESS: {strategy: tokenize}
  PHONE_NUMBER: {strategy: tokenize}
  CREDIT_CARD: {strategy: mask, keepLast: 4}
  IBAN_CODE: {strategy: hash}
`;

beforeAll(async () => {
  const config = parsePiiConfigText(CONFIG);
  const engine = engineFor(config, 'test-hmac-key-0123456789');
  const vault = new RedisTokenVault(redis, {
    secret: 'test-hmac-key-0123456789',
    prefix,
    ttlSeconds: 60,
  });
  const app = createPiiRedactorApp({ engine: () => engine, vault });
  const listening = await listen(app.listener, { service: 'pii-redactor', announce: false });
  url = `${listening.url}/mcp`;
  cleanups.push(() => listening.close(100));
});

afterEach(async () => {
  while (cleanups.length > 1) await cleanups.pop()?.();
});

afterAll(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

async function client(): Promise<Client> {
  const c = new Client({ name: 'stock', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => c.close());
  return c;
}

const TOKEN = /<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/;
const alice = { type: 'user', id: 'alice' };
const mallory = { type: 'user', id: 'mallory' };

function invoke(
  c: Client,
  name: string,
  phase: 'request' | 'response',
  payload: unknown,
  principal: unknown,
  extra: Record<string, unknown> = {},
) {
  return c.request(
    {
      method: 'interceptor/invoke',
      params: {
        name,
        event: 'tools/call',
        phase,
        payload,
        context: { principal, timestamp: new Date().toISOString(), ...extra },
      },
    },
    AnyResult,
  );
}

const RESULT = {
  content: [
    {
      type: 'text',
      text: 'Customer: ada.lovelace@example.com, +1 415 555 0132, card 4111 1111 1111 1111, IBAN GB82 WEST 1234 5698 7654 32',
    },
  ],
};

describe('pii-redactor', () => {
  it('lists both interceptors with their hooks and priorities', async () => {
    const c = await client();
    const list = await c.request({ method: 'interceptors/list', params: {} }, AnyResult);
    expect(list.interceptors).toEqual([
      expect.objectContaining({
        name: 'pii-redactor',
        type: 'mutation',
        priorityHint: { request: -1000, response: 1000 },
      }),
      expect.objectContaining({
        name: 'pii-guard',
        type: 'validation',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
      }),
    ]);
  });

  it('redacts a result on the way out and restores the caller’s tokens on the way in', async () => {
    const c = await client();
    const out = await invoke(c, 'pii-redactor', 'response', RESULT, alice);
    expect(out.modified).toBe(true);
    const text = (out.payload as typeof RESULT).content[0]?.text ?? '';
    expect(text).not.toContain('ada.lovelace@example.com');
    expect(text).not.toContain('415 555 0132');
    expect(text).toContain('1111');
    expect(text).not.toContain('4111 1111 1111 1111');
    expect(text).not.toContain('GB82 WEST');
    expect(out.info).toMatchObject({
      counts: { EMAIL_ADDRESS: 1, PHONE_NUMBER: 1, CREDIT_CARD: 1, IBAN_CODE: 1 },
    });
    expect(JSON.stringify(out.info)).not.toContain('ada.lovelace');
    const token = /<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/.exec(text)?.[0];
    expect(token).toBeDefined();

    // The same value gets the same token for the same principal.
    const again = await invoke(c, 'pii-redactor', 'response', RESULT, alice);
    expect((again.payload as typeof RESULT).content[0]?.text).toContain(token);

    // Alice sends her token back: the backend gets the real address.
    const request = { name: 'send_email', arguments: { to: token, subject: 'hi' } };
    const restored = await invoke(c, 'pii-redactor', 'request', request, alice);
    expect(restored).toMatchObject({
      modified: true,
      payload: { arguments: { to: 'ada.lovelace@example.com' } },
      info: { restored: 1 },
    });

    // Mallory replays Alice's token: it is not restored.
    const stolen = await invoke(c, 'pii-redactor', 'request', request, mallory);
    expect((stolen.payload as typeof request).arguments.to).toBe(token);
    expect(stolen.info).toMatchObject({ restored: 0, unrestorable: 1 });
  });

  it('tokenizes the same raw value on every request, never restoring a token it minted', async () => {
    const c = await client();
    const request = { name: 'send_email', arguments: { to: 'grace.hopper@example.com' } };
    const first = await invoke(c, 'pii-redactor', 'request', request, alice);
    const second = await invoke(c, 'pii-redactor', 'request', request, alice);
    for (const answer of [first, second]) {
      const to = (answer.payload as typeof request).arguments.to;
      expect(to).toMatch(TOKEN);
      expect(JSON.stringify(answer.payload)).not.toContain('grace.hopper');
      expect(answer.info).toMatchObject({
        counts: { EMAIL_ADDRESS: 1 },
        restored: 0,
        unrestorable: 0,
      });
    }
    // Deterministic per scope: the same token both times.
    expect((second.payload as typeof request).arguments.to).toBe(
      (first.payload as typeof request).arguments.to,
    );
  });

  it('restores only the tokens the caller sent, where the caller sent them', async () => {
    const c = await client();
    const out = await invoke(c, 'pii-redactor', 'response', RESULT, alice);
    const token = TOKEN.exec((out.payload as typeof RESULT).content[0]?.text ?? '')?.[0] ?? '';
    expect(token).not.toBe('');
    // The caller sends her token back and types the very value it stands for elsewhere: the
    // token is restored, the typed value is tokenized (to the same token, never restored).
    const request = {
      name: 'send_email',
      arguments: {
        to: token,
        cc: 'ada.lovelace@example.com',
        bcc: '<<EMAIL_ADDRESS:tok_000000000000>>',
      },
    };
    const answer = await invoke(c, 'pii-redactor', 'request', request, alice);
    expect(answer).toMatchObject({
      modified: true,
      payload: {
        arguments: {
          to: 'ada.lovelace@example.com',
          cc: token,
          bcc: '<<EMAIL_ADDRESS:tok_000000000000>>',
        },
      },
      info: { counts: { EMAIL_ADDRESS: 1 }, restored: 1, unrestorable: 1 },
    });
  });

  it('never stores nor restores for a caller without principal id and session', async () => {
    const c = await client();
    const before = (await redis.keys(`${prefix}:*`)).length;
    const anonymous = { type: 'anonymous' };
    const one = await invoke(c, 'pii-redactor', 'response', RESULT, anonymous);
    const two = await invoke(c, 'pii-redactor', 'response', RESULT, undefined);
    const tokenOf = (answer: typeof one) =>
      TOKEN.exec((answer.payload as typeof RESULT).content[0]?.text ?? '')?.[0] ?? '';
    expect(tokenOf(one)).toMatch(TOKEN);
    expect(tokenOf(two)).toMatch(TOKEN);
    // Equal values of different anonymous callers get unrelated tokens.
    expect(tokenOf(two)).not.toBe(tokenOf(one));
    expect((await redis.keys(`${prefix}:*`)).length).toBe(before);

    const request = { name: 'send_email', arguments: { to: tokenOf(one), cc: 'x.y@example.org' } };
    for (const principal of [anonymous, undefined, { type: 'user' }]) {
      const answer = await invoke(c, 'pii-redactor', 'request', request, principal);
      const args = (answer.payload as typeof request).arguments;
      expect(args.to).toBe(tokenOf(one));
      expect(args.cc).toMatch(TOKEN);
      expect(answer.info).toMatchObject({ restored: 0, unrestorable: 1 });
    }
    expect((await redis.keys(`${prefix}:*`)).length).toBe(before);
  });

  it('scopes tokens to the session when there is one', async () => {
    const c = await client();
    const out = await invoke(c, 'pii-redactor', 'response', RESULT, alice, { sessionId: 's-1' });
    const token = /<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/.exec(
      (out.payload as typeof RESULT).content[0]?.text ?? '',
    )?.[0];
    const request = { name: 'send_email', arguments: { to: token } };
    expect(
      (await invoke(c, 'pii-redactor', 'request', request, alice, { sessionId: 's-2' })).info,
    ).toMatchObject({ restored: 0 });
    expect(
      (await invoke(c, 'pii-redactor', 'request', request, alice, { sessionId: 's-1' })).info,
    ).toMatchObject({ restored: 1 });
  });

  it('keeps the vault encrypted: no raw value in Redis', async () => {
    const c = await client();
    await invoke(c, 'pii-redactor', 'response', RESULT, alice);
    const keys = await redis.keys(`${prefix}:*`);
    expect(keys.length).toBeGreaterThan(0);
    const values = await redis.mget(...keys);
    const all = `${keys.join(' ')} ${values.join(' ')}`;
    expect(all).not.toContain('ada.lovelace');
    expect(all).not.toContain('alice');
  });

  it('pii-guard blocks secrets in arguments, naming type and path but never the value', async () => {
    const c = await client();
    const secret = 'AKIAIOSFODNN7EXAMPLE';
    const verdict = await invoke(
      c,
      'pii-guard',
      'request',
      { name: 'deploy', arguments: { config: { key: secret } } },
      alice,
    );
    expect(verdict.valid).toBe(false);
    const text = JSON.stringify(verdict);
    expect(text).toContain('AWS');
    expect(text).toContain('arguments.config.key');
    expect(text).not.toContain(secret);
    expect(
      await invoke(
        c,
        'pii-guard',
        'request',
        { name: 'deploy', arguments: { region: 'eu' } },
        alice,
      ),
    ).toMatchObject({ valid: true });
  });

  it('refuses a 10,000-deep payload with a clear error and keeps serving', async () => {
    // Built as text and sent raw: a stock client would overflow its own stack validating it.
    const deep = `${'['.repeat(10_000)}"x"${']'.repeat(10_000)}`;
    const body = `{"jsonrpc":"2.0","id":7,"method":"interceptor/invoke","params":{"name":"pii-redactor","event":"tools/call","phase":"response","payload":{"content":[{"type":"text","text":"a"}],"structuredContent":{"deep":${deep}}},"context":{"principal":{"type":"user","id":"alice"}}}}`;
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body,
    });
    const answer = (await res.json()) as { id: number; error?: { code: number; data?: unknown } };
    expect(answer.id).toBe(7);
    // The caller's input is at fault: invalid params, naming the limit and where it was crossed.
    expect(answer.error?.code).toBe(-32602);
    expect(answer.error?.data).toMatchObject({ name: 'pii-redactor', reason: 'limit_exceeded' });
    expect(JSON.stringify(answer.error?.data)).toMatch(/depth/i);
    expect(JSON.stringify(answer.error?.data)).toContain('structuredContent');
    const c = await client();
    expect(
      (
        await invoke(
          c,
          'pii-redactor',
          'response',
          { content: [{ type: 'text', text: 'nothing here' }] },
          alice,
        )
      ).modified,
    ).toBe(false);
  });

  /** A stock client of a pii-redactor with small engine limits (depth 8, 64-byte strings). */
  async function smallLimitsClient(): Promise<Client> {
    const config = parsePiiConfigText('limits: {maxDepth: 8, maxStringBytes: 64}');
    const vault = new RedisTokenVault(redis, { secret: 'test-hmac-key-0123456789', prefix });
    const app = createPiiRedactorApp({ engine: () => engineFor(config, undefined), vault });
    const small = await listen(app.listener, { service: 'pii-redactor', announce: false });
    cleanups.push(() => small.close(100));
    const c = new Client({ name: 'stock', version: '1.0.0' });
    await c.connect(new StreamableHTTPClientTransport(new URL(`${small.url}/mcp`)));
    cleanups.push(() => c.close());
    return c;
  }

  it('refuses a payload over the engine limits with -32602 naming the interceptor', async () => {
    const c = await smallLimitsClient();
    const long = { content: [{ type: 'text', text: 'x'.repeat(100) }] };
    for (const name of ['pii-redactor', 'pii-guard'] as const) {
      const phase = name === 'pii-guard' ? 'request' : 'response';
      const payload =
        name === 'pii-guard' ? { name: 't', arguments: { a: 'x'.repeat(100) } } : long;
      const error = await invoke(c, name, phase, payload, alice).then(
        () => undefined,
        (e: unknown) => e as { code: number; data?: unknown },
      );
      expect(error?.code).toBe(-32602);
      expect(error?.data).toMatchObject({
        name,
        reason: 'limit_exceeded',
        limit: 'maxStringBytes',
        max: 64,
      });
    }
  });

  it('names the same limit and JSON path in the request phase as pii-guard does', async () => {
    const c = await smallLimitsClient();
    const nested = (levels: number): unknown => (levels === 0 ? 'x' : { a: nested(levels - 1) });
    const refusal = (name: string, args: unknown) =>
      invoke(c, name, 'request', { name: 't', arguments: args }, alice).then(
        () => undefined,
        (e: unknown) => (e as { data?: Record<string, unknown> }).data,
      );
    // The path is the payload's, as in the response phase: `arguments.` first. The redactor
    // used to measure the arguments on their own when it looked for caller-sent tokens, so it
    // named `a.a...` and refused one level later than the guard and the response phase.
    for (const args of [nested(6), nested(7), nested(12), { a: { b: 'y'.repeat(100) } }]) {
      const guard = await refusal('pii-guard', args);
      const redactor = await refusal('pii-redactor', args);
      expect(redactor).toEqual(
        guard === undefined ? undefined : { ...guard, name: 'pii-redactor' },
      );
      if (redactor !== undefined) expect(String(redactor.path)).toMatch(/^arguments\./);
    }
    expect(await refusal('pii-guard', nested(12))).toMatchObject({ limit: 'maxDepth', max: 8 });
  });

  it('leaves no detected value in any part of a result, which stays valid for its method', async () => {
    const c = await client();
    const email = 'ada.lovelace@example.com';
    const cases = [
      {
        event: 'tools/call',
        schema: CallToolResultSchema,
        result: {
          content: [
            { type: 'resource_link', uri: `mailto:${email}`, name: email, description: email },
            {
              type: 'text',
              text: 'ok',
              annotations: { audience: ['user'], priority: 1 },
              _meta: { owner: email },
            },
            { type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' },
          ],
          structuredContent: { [email]: 1 },
          _meta: { owner: email, progressToken: 'p' },
        },
      },
      {
        event: 'prompts/get',
        schema: GetPromptResultSchema,
        result: {
          description: `written for ${email}`,
          messages: [{ role: 'user', content: { type: 'text', text: email } }],
        },
      },
      {
        event: 'resources/read',
        schema: ReadResourceResultSchema,
        result: { contents: [{ uri: `file:///home/${email}/notes.txt`, text: 'x' }] },
      },
    ] as const;
    for (const { event, schema, result } of cases) {
      const answer = await c.request(
        {
          method: 'interceptor/invoke',
          params: {
            name: 'pii-redactor',
            event,
            phase: 'response',
            payload: result,
            context: { principal: alice, timestamp: new Date().toISOString() },
          },
        },
        AnyResult,
      );
      expect(answer.modified).toBe(true);
      expect(JSON.stringify(answer.payload)).not.toContain(email);
      expect(schema.safeParse(answer.payload).success).toBe(true);
    }
  });
});
