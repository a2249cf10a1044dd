/**
 * The bearer check of `/mcp` (also used by the orchestrator's admin API and the audit API):
 * the auth scheme is case-insensitive (RFC 7235 §2.1), the token is compared exactly.
 */
import { describe, expect, it } from 'vitest';
import { allow, bearerMatches, defineValidator, requireBearer } from '../src/index.ts';
import { expectErrorReply, rawPost } from '../src/testing.ts';
import { serveInterceptors } from './helpers.ts';

const LIST = { jsonrpc: '2.0', id: 1, method: 'interceptors/list', params: {} };
const validator = defineValidator({
  name: 'v',
  hooks: [{ events: ['tools/call'], phase: 'request' }],
  handler: () => allow(),
});

describe('bearerMatches', () => {
  it.each([
    ['Bearer s3cret', true],
    ['bearer s3cret', true],
    ['BEARER s3cret', true],
    ['bEaReR   s3cret', true],
    ['Bearer s3cret ', true],
    ['Bearer s3cre', false],
    ['Bearer s3crett', false],
    ['Bearer S3CRET', false],
    ['Basic s3cret', false],
    ['Bearers3cret', false],
    ['Bearer', false],
    ['Bearer ', false],
    ['s3cret', false],
    ['', false],
  ])('%j → %s', (header, ok) => {
    expect(bearerMatches(header, 's3cret')).toBe(ok);
  });

  it('passes everything when no token is configured and nothing when a header is missing', () => {
    expect(bearerMatches(undefined, undefined)).toBe(true);
    expect(bearerMatches('junk', '')).toBe(true);
    expect(bearerMatches(undefined, 's3cret')).toBe(false);
  });
});

describe('/mcp bearer over HTTP', () => {
  it('accepts the scheme in any case and refuses a wrong token with 401', async () => {
    const { url } = await serveInterceptors([validator], { token: 's3cret' });
    for (const authorization of ['Bearer s3cret', 'bearer s3cret', 'BEARER s3cret']) {
      const reply = await rawPost(url, LIST, { authorization });
      expect(reply.status, authorization).toBe(200);
      expect(reply.json.result).toMatchObject({ interceptors: [{ name: 'v' }] });
    }
    for (const authorization of ['bearer wrong', 'Basic s3cret']) {
      const reply = await rawPost(url, LIST, { authorization });
      expectErrorReply(reply, 401, reply.json.error?.code ?? 0);
      expect(reply.headers['www-authenticate']).toBe('Bearer');
    }
  });
});

describe("requireBearer on a service's own endpoints", () => {
  const withStatus = (token: string | undefined) =>
    serveInterceptors([validator], {
      token,
      extend: (app) => {
        app.get('/status', requireBearer(token), (_req, res) => {
          res.json({ path: '/etc/secret.yaml' });
        });
      },
    });

  it('answers 401 with a JSON body without the token, and the route with it', async () => {
    const { base } = await withStatus('s3cret');
    const refused: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer wrong' },
      { authorization: 's3cret' },
    ];
    for (const headers of refused) {
      const res = await fetch(`${base}/status`, { headers });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      const body = await res.text();
      expect(JSON.parse(body)).toEqual({
        error: { code: 'UNAUTHORIZED', message: 'a valid bearer token is required' },
      });
      expect(body).not.toContain('secret.yaml');
    }
    for (const authorization of ['Bearer s3cret', 'bearer s3cret']) {
      const res = await fetch(`${base}/status`, { headers: { authorization } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ path: '/etc/secret.yaml' });
    }
    // Health stays open for probes.
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  it('passes everything when no token is configured', async () => {
    const { base } = await withStatus(undefined);
    expect((await fetch(`${base}/status`)).status).toBe(200);
  });
});
