/**
 * `auth: {mode: jwt}`: bearer JWTs verified against a JWKS served over real HTTP. A valid
 * token's subject and claims reach the interceptors as the principal; every kind of invalid
 * token is refused with HTTP 401 and a JSON-RPC error body.
 */
import { createServer } from 'node:http';
import { freePort } from '@fleet/test-fixtures';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import type { Logger } from '../src/logger.ts';
import {
  connectClient,
  gatewayRecordingPrincipals,
  listenLoopback,
  recordingLogger,
  textOf,
} from './harness.ts';
import { SESSION_INIT } from './raw-http.ts';

const ISSUER = 'https://issuer.test.example';
const AUDIENCE = 'interceptor-fleet';
const KID = 'test-key-1';

const INIT = JSON.stringify(SESSION_INIT);

type SigningKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

/**
 * A JWKS endpoint on 127.0.0.1 publishing one ES256 public key; `answer` can make it fail
 * (`500`: an error status, `junk`: a body that is not a key set).
 */
async function startIssuer() {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: KID, alg: 'ES256', use: 'sig' };
  let fetches = 0;
  let answer: 'keys' | '500' | 'junk' = 'keys';
  const server = createServer((req, res) => {
    if (req.url !== '/.well-known/jwks.json') {
      res.writeHead(404).end();
      return;
    }
    fetches += 1;
    if (answer === '500') res.writeHead(500).end('down for maintenance');
    else
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify(answer === 'junk' ? { keys: 'none' } : { keys: [jwk] }));
  });
  const base = await listenLoopback(server);
  return {
    jwksUrl: `${base}/.well-known/jwks.json`,
    privateKey,
    fetches: () => fetches,
    answer: (next: typeof answer) => {
      answer = next;
    },
  };
}

interface TokenOptions {
  key: SigningKey;
  issuer?: string;
  audience?: string;
  /** Seconds since the epoch. */
  expiresAt?: number;
  claims?: JWTPayload;
}

function token(options: TokenOptions): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ roles: ['auditor', 'admin'], tenant: 'acme', ...options.claims })
    .setProtectedHeader({ alg: 'ES256', kid: KID, typ: 'JWT' })
    .setSubject('alice')
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setIssuedAt(now - 60)
    .setExpirationTime(options.expiresAt ?? now + 300)
    .sign(options.key);
}

async function setup(options: { jwksUrl?: string; log?: Logger } = {}) {
  const issuer = await startIssuer();
  const jwksUrl = options.jwksUrl ?? issuer.jwksUrl;
  const { gateway, principals } = await gatewayRecordingPrincipals(
    `{mode: jwt, issuer: "${ISSUER}", audience: ${AUDIENCE}, jwksUrl: "${jwksUrl}"}`,
    { log: options.log },
  );
  return { issuer, gateway, principals };
}

async function post(url: string, authorization: string | undefined) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(authorization === undefined ? {} : { authorization }),
    },
    body: INIT,
  });
  const text = await response.text();
  let body: { jsonrpc?: unknown; error?: { code?: unknown; message?: unknown } } = {};
  try {
    body = JSON.parse(text);
  } catch {
    // asserted below
  }
  return { status: response.status, headers: response.headers, body, text };
}

describe('JWT auth', () => {
  it('passes the subject and claims of a valid token to interceptors as the principal', async () => {
    const { issuer, gateway, principals } = await setup();
    const jwt = await token({ key: issuer.privateKey });
    const client = await connectClient(gateway.mcpUrl, {
      headers: { authorization: `Bearer ${jwt}` },
    });
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } }))).toBe(
      '[fx] hi',
    );
    expect(principals).toHaveLength(1);
    expect(principals[0]).toMatchObject({
      type: 'user',
      id: 'alice',
      claims: {
        sub: 'alice',
        iss: ISSUER,
        aud: AUDIENCE,
        roles: ['auditor', 'admin'],
        tenant: 'acme',
      },
    });
    expect(issuer.fetches()).toBeGreaterThanOrEqual(1);
  });

  it.each([
    ['no Authorization header', async () => undefined],
    ['a non-bearer scheme', async () => 'Basic YWxpY2U6c2VjcmV0'],
    ['a token that is not a JWT', async () => 'Bearer not-a-jwt'],
    [
      'an expired token',
      async (key: SigningKey) =>
        `Bearer ${await token({ key, expiresAt: Math.floor(Date.now() / 1000) - 120 })}`,
    ],
    [
      'a token for another audience',
      async (key: SigningKey) => `Bearer ${await token({ key, audience: 'someone-else' })}`,
    ],
    [
      'a token from another issuer',
      async (key: SigningKey) =>
        `Bearer ${await token({ key, issuer: 'https://evil.example.com' })}`,
    ],
    [
      'a token signed by another key under the same kid',
      async () => {
        const { privateKey } = await generateKeyPair('ES256');
        return `Bearer ${await token({ key: privateKey })}`;
      },
    ],
    [
      'a valid token whose payload was altered',
      async (key: SigningKey) => {
        const [header, , signature] = (await token({ key })).split('.');
        const forged = Buffer.from(
          JSON.stringify({
            sub: 'mallory',
            iss: ISSUER,
            aud: AUDIENCE,
            exp: Math.floor(Date.now() / 1000) + 300,
          }),
        ).toString('base64url');
        return `Bearer ${header}.${forged}.${signature}`;
      },
    ],
  ])('refuses %s with HTTP 401 and a JSON-RPC error body', async (_what, authorization) => {
    const { issuer, gateway, principals } = await setup();
    const res = await post(gateway.mcpUrl, await authorization(issuer.privateKey));
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(res.body.jsonrpc).toBe('2.0');
    expect(typeof res.body.error?.code).toBe('number');
    expect(res.body.error?.code).toBe(-32600);
    expect(String(res.body.error?.message)).toMatch(/unauthorized/i);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(principals).toEqual([]);
  });

  it.each([
    ['refuses connections', 'closed'],
    ['answers 500', '500'],
    ['answers something that is not a key set', 'junk'],
  ] as const)(
    'answers 503 with Retry-After while the JWKS %s, and recovers',
    async (_what, how) => {
      const log = recordingLogger();
      const closed = `http://127.0.0.1:${await freePort()}/.well-known/jwks.json`;
      const { issuer, gateway, principals } = await setup({
        log,
        ...(how === 'closed' ? { jwksUrl: closed } : {}),
      });
      if (how !== 'closed') issuer.answer(how);
      const jwt = `Bearer ${await token({ key: issuer.privateKey })}`;
      for (let i = 0; i < 3; i++) {
        const res = await post(gateway.mcpUrl, jwt);
        // Not 401: the token may be good, and a client would throw it away.
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('5');
        expect(res.body.error?.code).toBe(-32603);
        expect(res.body.error?.message).toBe(
          'Service unavailable: the gateway cannot verify tokens right now',
        );
        expect(res.headers.get('mcp-session-id')).toBeNull();
      }
      // Logged once (then at most once a minute), with the JWKS URL and why, never the token.
      expect(log.warnings).toHaveLength(1);
      expect(log.warnings[0]?.msg).toBe(
        'cannot verify bearer tokens: the JWKS could not be fetched',
      );
      expect(log.warnings[0]?.obj).toMatchObject({
        failures: 1,
        jwksUrl: how === 'closed' ? closed : issuer.jwksUrl,
      });
      expect(JSON.stringify(log.warnings)).not.toContain(jwt.slice(7));
      if (how === 'closed') {
        const err = (log.warnings[0]?.obj as { err?: unknown } | undefined)?.err;
        expect(String(err)).toMatch(/ECONNREFUSED/);
        return;
      }
      // Keys back: the same token is accepted, no restart.
      issuer.answer('keys');
      const res = await post(gateway.mcpUrl, jwt);
      expect(res.status).toBe(200);
      expect(principals).toEqual([]);
    },
  );
});
