/**
 * MCP authorization with `auth: {mode: jwt}`: the gateway publishes its OAuth protected
 * resource metadata (RFC 9728) and points refusals at it (RFC 6750 challenges), so the MCP
 * SDK's own client finds the authorization server, gets a token for the gateway (RFC 8707
 * `resource`) with the required scopes, and connects — with no configuration but its client
 * credentials. The authorization server is a small one in this file (client_credentials
 * grant, RFC 8414 metadata, JWKS): no real one runs on these machines.
 */
import { createServer, type ServerResponse } from 'node:http';
import { startHttpBackend } from '@fleet/test-fixtures';
import {
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import type { AdminAction } from '../src/app.ts';
import { parseConfig } from '../src/config.ts';
import {
  connectClient,
  defer,
  gatewayRecordingPrincipals,
  listenLoopback,
  type StartGatewayOptions,
  startGateway,
  textOf,
} from './harness.ts';
import { SESSION_INIT } from './raw-http.ts';

const CLIENT_ID = 'reporting-agent';
const CLIENT_SECRET = 'correct horse battery staple';
const KID = 'as-key-1';

interface TokenRequest {
  grantType: string | null;
  resource: string | null;
  scope: string | null;
}

/**
 * An OAuth authorization server on 127.0.0.1: RFC 8414 metadata, a token endpoint for the
 * client_credentials grant (client_secret_basic or _post) that issues ES256 JWTs whose `aud`
 * is the requested `resource` and whose `scope` is the requested scope, and its JWKS.
 */
async function startAuthorizationServer() {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: KID, alg: 'ES256', use: 'sig' };
  const requests: TokenRequest[] = [];
  let issuer = '';
  const json = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/.well-known/oauth-authorization-server') {
      return json(res, 200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
        grant_types_supported: ['client_credentials'],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      });
    }
    if (path === '/jwks') return json(res, 200, { keys: [jwk] });
    if (path === '/token' && req.method === 'POST') {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString('utf8');
      });
      req.on('end', () => {
        const form = new URLSearchParams(body);
        const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        const [id, secret] = basic
          ? Buffer.from(basic, 'base64')
              .toString('utf8')
              .split(':')
              .map((s) => decodeURIComponent(s))
          : [form.get('client_id'), form.get('client_secret')];
        const request = {
          grantType: form.get('grant_type'),
          resource: form.get('resource'),
          scope: form.get('scope'),
        };
        requests.push(request);
        if (id !== CLIENT_ID || secret !== CLIENT_SECRET)
          return json(res, 401, { error: 'invalid_client' });
        if (request.grantType !== 'client_credentials')
          return json(res, 400, { error: 'unsupported_grant_type' });
        const now = Math.floor(Date.now() / 1000);
        const claims = request.scope === null ? {} : { scope: request.scope };
        void new SignJWT(claims)
          .setProtectedHeader({ alg: 'ES256', kid: KID, typ: 'at+jwt' })
          .setIssuer(issuer)
          .setSubject(CLIENT_ID)
          .setAudience(request.resource ?? 'no-resource-requested')
          .setIssuedAt(now)
          .setExpirationTime(now + 300)
          .sign(privateKey)
          .then((token) =>
            json(res, 200, {
              access_token: token,
              token_type: 'Bearer',
              expires_in: 300,
              ...claims,
            }),
          );
      });
      return;
    }
    res.writeHead(404).end();
  });
  issuer = await listenLoopback(server);
  return { issuer, requests };
}

async function setup(authExtra = '', options: StartGatewayOptions = {}) {
  const as = await startAuthorizationServer();
  const { gateway, principals } = await gatewayRecordingPrincipals(
    `{mode: jwt, issuer: "${as.issuer}", jwksUrl: "${as.issuer}/jwks"${authExtra}}`,
    options,
  );
  return { as, gateway, principals };
}

/** An SDK client that gets its token by itself (client_credentials), as an agent would. */
async function oauthClient(mcpUrl: string, issuer: string, scope?: string) {
  const client = new Client({ name: 'oauth-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    authProvider: new ClientCredentialsProvider({
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      expectedIssuer: issuer,
      ...(scope === undefined ? {} : { scope }),
    }),
  });
  defer(() => client.close());
  await client.connect(transport);
  return client;
}

function initialize(url: string, authorization?: string) {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(authorization === undefined ? {} : { authorization }),
    },
    body: JSON.stringify(SESSION_INIT),
  });
}

describe('MCP authorization (jwt mode)', () => {
  it('publishes protected resource metadata the SDK discovers from a refusal', async () => {
    const { as, gateway } = await setup(', scopes: [mcp:tools, "audit:read"]');
    const refused = await initialize(gateway.mcpUrl);
    expect(refused.status).toBe(401);
    const challenge = refused.headers.get('www-authenticate') ?? '';
    // No token at all: a challenge without an error code (RFC 6750 §3.1).
    expect(challenge).not.toMatch(/error=/);
    const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(refused);
    expect(resourceMetadataUrl?.href).toBe(
      `${gateway.base}/.well-known/oauth-protected-resource/mcp`,
    );
    expect(scope).toBe('mcp:tools audit:read');

    const metadata = await discoverOAuthProtectedResourceMetadata(gateway.mcpUrl);
    expect(metadata).toMatchObject({
      resource: gateway.mcpUrl,
      authorization_servers: [as.issuer],
      bearer_methods_supported: ['header'],
      scopes_supported: ['mcp:tools', 'audit:read'],
    });
    // The root form answers the same, readable from any origin (browser-based clients).
    const root = await fetch(`${gateway.base}/.well-known/oauth-protected-resource`, {
      headers: { origin: 'https://inspector.example.com' },
    });
    expect(root.status).toBe(200);
    expect(root.headers.get('access-control-allow-origin')).toBe('*');
    expect(await root.json()).toEqual(metadata);
    const preflight = await fetch(`${gateway.base}/.well-known/oauth-protected-resource/mcp`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://inspector.example.com',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'mcp-protocol-version',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/mcp-protocol-version/);
    const post = await fetch(`${gateway.base}/.well-known/oauth-protected-resource`, {
      method: 'POST',
    });
    expect(post.status).toBe(405);
  });

  it('lets the SDK client get a token for the gateway by itself and call a tool', async () => {
    const { as, gateway, principals } = await setup(', scopes: [mcp:tools]');
    // The SDK's client_credentials provider asks for its configured scope (1.32 does not
    // take the challenge's for this grant).
    const client = await oauthClient(gateway.mcpUrl, as.issuer, 'mcp:tools');
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } }))).toBe(
      '[fx] hi',
    );
    // It found the authorization server and asked it for a token for this gateway (RFC 8707).
    expect(as.requests).toHaveLength(1);
    expect(as.requests[0]).toEqual({
      grantType: 'client_credentials',
      resource: gateway.mcpUrl,
      scope: 'mcp:tools',
    });
    expect(principals).toHaveLength(1);
    expect(principals[0]).toMatchObject({
      type: 'user',
      id: CLIENT_ID,
      claims: { aud: gateway.mcpUrl, scope: 'mcp:tools', iss: as.issuer },
    });
  });

  it('refuses a token without a required scope with 403 insufficient_scope', async () => {
    const { as, gateway } = await setup(', scopes: [mcp:tools, mcp:admin]');
    // A client that insists on its own scope gets a token without mcp:admin.
    const attempt = oauthClient(gateway.mcpUrl, as.issuer, 'mcp:tools');
    await expect(attempt).rejects.toThrow();
    const token = await issue(as.issuer, gateway.mcpUrl, 'mcp:tools');
    const res = await initialize(gateway.mcpUrl, `Bearer ${token}`);
    expect(res.status).toBe(403);
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer /);
    expect(challenge).toContain('error="insufficient_scope"');
    expect(challenge).toContain('scope="mcp:tools mcp:admin"');
    expect(challenge).toContain(
      `resource_metadata="${gateway.base}/.well-known/oauth-protected-resource/mcp"`,
    );
    const body = (await res.json()) as { error: { code: number; message: string } };
    expect(body.error.code).toBe(-32600);
    expect(body.error.message).toBe('Forbidden: the bearer token lacks the scope "mcp:admin"');
    expect(res.headers.get('mcp-session-id')).toBeNull();

    // The same token with both scopes is accepted (`scp` as a list works too).
    const both = await issue(as.issuer, gateway.mcpUrl, 'mcp:admin mcp:tools');
    expect((await initialize(gateway.mcpUrl, `Bearer ${both}`)).status).toBe(200);
  });

  it('refuses a token for another resource with 401 invalid_token', async () => {
    const { as, gateway } = await setup();
    const elsewhere = await issue(as.issuer, 'http://127.0.0.1:1/mcp', undefined);
    const res = await initialize(gateway.mcpUrl, `Bearer ${elsewhere}`);
    expect(res.status).toBe(401);
    const params = extractWWWAuthenticateParams(res);
    expect(params.error).toBe('invalid_token');
    expect(params.resourceMetadataUrl?.href).toBe(
      `${gateway.base}/.well-known/oauth-protected-resource/mcp`,
    );
    expect(res.headers.get('www-authenticate')).not.toContain(elsewhere);
    // `audience` still accepts an identity provider's own audience value.
    const { as: as2, gateway: gateway2 } = await setup(', audience: fleet-gateway');
    const forAudience = await issue(as2.issuer, 'fleet-gateway', undefined);
    expect((await initialize(gateway2.mcpUrl, `Bearer ${forAudience}`)).status).toBe(200);
  });

  it('serves the metadata under a configured resource and names it in challenges', async () => {
    const resource = 'https://gateway.example.com/tenants/acme/mcp';
    const { as, gateway } = await setup(`, resource: "${resource}"`);
    const res = await fetch(
      `${gateway.base}/.well-known/oauth-protected-resource/tenants/acme/mcp`,
    );
    expect(await res.json()).toMatchObject({ resource, authorization_servers: [as.issuer] });
    const refused = await initialize(gateway.mcpUrl);
    expect(extractWWWAuthenticateParams(refused).resourceMetadataUrl?.href).toBe(
      'https://gateway.example.com/.well-known/oauth-protected-resource/tenants/acme/mcp',
    );
    // Tokens are for that resource, not for the address the request happened to use.
    const local = await issue(as.issuer, gateway.mcpUrl, undefined);
    expect((await initialize(gateway.mcpUrl, `Bearer ${local}`)).status).toBe(401);
    const right = await issue(as.issuer, resource, undefined);
    expect((await initialize(gateway.mcpUrl, `Bearer ${right}`)).status).toBe(200);
  });

  it('refuses to build metadata for a Host it does not accept', async () => {
    const { gateway } = await setup();
    const url = new URL(`${gateway.base}/.well-known/oauth-protected-resource/mcp`);
    const res = await rawGet(url, 'attacker.example.com');
    expect(res.status).toBe(403);
    expect(res.body).not.toContain('attacker.example.com/mcp');
  });

  it('has no metadata without jwt auth, and static tokens get plain challenges', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}
auth: {mode: tokens, tokens: [{token: "a-long-static-token", principal: {id: ci}}]}`,
      { redis: false },
    );
    const metadata = await fetch(`${gateway.base}/.well-known/oauth-protected-resource/mcp`);
    expect(metadata.status).toBe(404);
    expect((await initialize(gateway.mcpUrl)).headers.get('www-authenticate')).toBe('Bearer');
    const wrong = await initialize(gateway.mcpUrl, 'Bearer not-the-token');
    expect(wrong.status).toBe(401);
    expect(extractWWWAuthenticateParams(wrong).error).toBe('invalid_token');
    const client = await connectClient(gateway.mcpUrl, {
      headers: { authorization: 'Bearer a-long-static-token' },
    });
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'ok' } }))).toBe(
      '[fx] ok',
    );
  });

  it('admits admin-scoped JWTs to the admin API when auth.adminScopes is set', async () => {
    const actions: AdminAction[] = [];
    const { as, gateway } = await setup(', scopes: [mcp:tools], adminScopes: ["fleet:admin"]', {
      onAdminAction: (action) => actions.push(action),
    });
    const services = (authorization?: string) =>
      fetch(`${gateway.base}/admin/services`, {
        headers: authorization === undefined ? {} : { authorization },
      });

    const bare = await services();
    expect(bare.status).toBe(401);
    expect(extractWWWAuthenticateParams(bare)).toMatchObject({
      scope: 'fleet:admin',
      resourceMetadataUrl: new URL(`${gateway.base}/.well-known/oauth-protected-resource/mcp`),
    });
    expect(await bare.json()).toEqual({ error: 'a bearer token is required' });

    // A client's token is not an operator's.
    const client = await issue(as.issuer, gateway.mcpUrl, 'mcp:tools');
    const refused = await services(`Bearer ${client}`);
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
    expect(refused.headers.get('www-authenticate')).toContain('scope="fleet:admin"');
    expect(await refused.json()).toEqual({
      error: 'the bearer token lacks the scope "fleet:admin"',
    });

    const operator = await issue(as.issuer, gateway.mcpUrl, 'fleet:admin');
    const listed = await services(`Bearer ${operator}`);
    expect(listed.status).toBe(200);
    expect(await listed.json()).toMatchObject({ services: expect.any(Array) });
    // …and an admin JWT is no MCP token unless it has the MCP scopes too.
    expect((await initialize(gateway.mcpUrl, `Bearer ${operator}`)).status).toBe(403);

    // A change is audited as the token's subject; the client's refused attempt with no one.
    const [service] = gateway.orchestrator.registry.list();
    const refresh = (token: string) =>
      fetch(`${gateway.base}/admin/services/${service?.id}/refresh`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
    expect((await refresh(operator)).status).toBe(200);
    expect((await refresh(client)).status).toBe(403);
    expect(actions.map((a) => [a.action, a.outcome, a.operator?.id, a.reason])).toEqual([
      ['refresh', 'done', CLIENT_ID, undefined],
      ['refresh', 'refused', undefined, 'the bearer token lacks the scope "fleet:admin"'],
    ]);
  });

  it('keeps FLEET_ADMIN_TOKEN working beside admin JWTs, and plain without adminScopes', async () => {
    const adminToken = 'static-admin-token-1234';
    const { as, gateway } = await setup(', adminScopes: ["fleet:admin"]', { adminToken });
    const services = (authorization: string) =>
      fetch(`${gateway.base}/admin/services`, { headers: { authorization } });
    expect((await services(`Bearer ${adminToken}`)).status).toBe(200);
    const operator = await issue(as.issuer, gateway.mcpUrl, 'fleet:admin');
    expect((await services(`Bearer ${operator}`)).status).toBe(200);
    expect((await services('Bearer wrong-static-token')).status).toBe(401);

    // jwt auth without adminScopes: the admin API knows only the static token, and its
    // challenge does not send an operator to the OAuth metadata.
    const { as: as2, gateway: plain } = await setup('', { adminToken });
    const jwt = await issue(as2.issuer, plain.mcpUrl, 'fleet:admin');
    const res = await fetch(`${plain.base}/admin/services`, {
      headers: { authorization: `Bearer ${jwt}` },
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).not.toContain('resource_metadata');
    expect(await res.json()).toEqual({ error: 'a valid admin bearer token is required' });
  });

  it('rejects malformed jwt settings with the field named', () => {
    const base =
      'auth: {mode: jwt, issuer: "https://as.example.com", jwksUrl: "https://as.example.com/jwks"';
    expect(() => parseConfig(`${base}, resource: "ftp://gw.example.com/mcp"}`)).toThrow(
      /http\(s\) URL.*at auth\.resource/s,
    );
    expect(() => parseConfig(`${base}, scopes: ["two words"]}`)).toThrow(/at auth\.scopes\[0\]/);
    expect(() => parseConfig(`${base}, adminScopes: []}`)).toThrow(/at auth\.adminScopes/);
    expect(() => parseConfig(`${base}, authorizationServers: []}`)).toThrow(
      /auth\.authorizationServers/,
    );
    expect(() => parseConfig(`${base}, scope: [x]}`)).toThrow(/did you mean "scopes"/);
    expect(() =>
      parseConfig(
        'auth: {mode: jwt, issuer: "https://as.example.com", jwksUrl: "https://u:secret@as.example.com/jwks"}',
      ),
    ).toThrow(/must not carry credentials.*at auth\.jwksUrl/s);
    expect(parseConfig(`${base}}`).auth).toMatchObject({ mode: 'jwt' });
  });
});

/** Issue a token signed by a key the gateway does not trust is not needed: ask the server. */
async function issue(issuer: string, resource: string, scope: string | undefined) {
  const form = new URLSearchParams({
    grant_type: 'client_credentials',
    client_id: CLIENT_ID,
    client_secret: CLIENT_SECRET,
    resource,
    ...(scope === undefined ? {} : { scope }),
  });
  const res = await fetch(`${issuer}/token`, { method: 'POST', body: form });
  const body = (await res.json()) as { access_token: string };
  return body.access_token;
}

/** A GET with a Host header of our choosing (fetch will not send one). */
async function rawGet(url: URL, host: string): Promise<{ status: number; body: string }> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, headers: { host } },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c.toString('utf8');
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}
