/**
 * MCP authorization (`auth: {mode: jwt}`): the gateway is an OAuth 2.1 resource server. It
 * publishes its protected resource metadata (RFC 9728) and answers a missing, invalid or
 * under-scoped token with a `WWW-Authenticate` challenge pointing at it (RFC 6750 §3), so an
 * MCP client can find the authorization server, ask it for a token for this gateway (RFC
 * 8707 `resource`) with the scopes the gateway requires, and retry.
 *
 * The metadata is served at `/.well-known/oauth-protected-resource/mcp` (RFC 9728 §3.1: the
 * well-known segment inserted before the resource's path), at the root form that clients
 * try next, and under the path of a configured `resource` (a gateway behind a proxy that
 * mounts it elsewhere). It is public and readable from any origin (CORS), as browser-based
 * clients must read it before they hold a token.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthRefusal } from './auth.ts';
import type { AuthConfig } from './config.ts';

const WELL_KNOWN = '/.well-known/oauth-protected-resource';
const MCP_PATH = '/mcp';
/** How long clients may cache the metadata. */
const MAX_AGE_S = 300;

/** The metadata document and the challenges that point at it. */
export interface ProtectedResource {
  /** True for a request to one of the metadata documents' paths. */
  matches(url: string | undefined): boolean;
  /** Serve the metadata (GET, HEAD; OPTIONS for a CORS preflight). */
  handle(req: IncomingMessage, res: ServerResponse): void;
  /**
   * The resource a request reached: the configured `resource`, else `http://<Host>/mcp`
   * (undefined for a Host the ingress does not accept).
   */
  resourceOf(req: IncomingMessage): URL | undefined;
  /**
   * Extra parameters for a refusal's `WWW-Authenticate: Bearer` challenge; `scopes` replaces
   * `auth.scopes` as the scope asked for (the admin API's).
   */
  challengeParams(req: IncomingMessage, scopes?: readonly string[]): Record<string, string>;
}

/** An RFC 9110 quoted-string. */
function quoted(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/**
 * The `WWW-Authenticate` value for a refusal (RFC 6750 §3): a missing token gets no error
 * code, the others `invalid_token` / `insufficient_scope` with a fixed description.
 */
export function bearerChallenge(
  refusal: AuthRefusal,
  description: string,
  params: Record<string, string> = {},
): string {
  const all: Record<string, string> =
    refusal === 'missing' ? params : { error: refusal, error_description: description, ...params };
  const list = Object.entries(all).map(([k, v]) => `${k}=${quoted(v)}`);
  return list.length === 0 ? 'Bearer' : `Bearer ${list.join(', ')}`;
}

/** The path part of a request URL (no query). */
function pathOf(url: string | undefined): string {
  const path = url ?? '';
  const q = path.indexOf('?');
  return q === -1 ? path : path.slice(0, q);
}

/**
 * The protected resource of a `jwt` auth configuration, or undefined for the other modes
 * (static tokens have no authorization server to point at). `hostProblem` is the ingress's
 * Host check: a request URL is only ever built from an allowed Host.
 */
export function protectedResource(
  auth: AuthConfig,
  hostProblem: (req: IncomingMessage) => string | undefined,
): ProtectedResource | undefined {
  if (auth.mode !== 'jwt') return undefined;
  const configured = auth.resource === undefined ? undefined : new URL(auth.resource);
  /** RFC 9728 §3.1: the metadata of `https://h/p` is at `https://h/.well-known/…/p`. */
  const metadataPath = (resource: URL) =>
    `${WELL_KNOWN}${resource.pathname === '/' ? '' : resource.pathname.replace(/\/$/, '')}`;
  const paths = new Set([WELL_KNOWN, `${WELL_KNOWN}${MCP_PATH}`]);
  if (configured !== undefined) paths.add(metadataPath(configured));

  const resourceOf = (req: IncomingMessage): URL | undefined => {
    if (configured !== undefined) return configured;
    if (hostProblem(req) !== undefined) return undefined;
    try {
      return new URL(MCP_PATH, `http://${req.headers.host ?? ''}`);
    } catch {
      return undefined;
    }
  };
  const metadataUrl = (resource: URL): string => `${resource.origin}${metadataPath(resource)}`;
  const metadata = (resource: URL) => ({
    resource: resource.href,
    authorization_servers: auth.authorizationServers ?? [auth.issuer],
    bearer_methods_supported: ['header'],
    ...(auth.scopes === undefined ? {} : { scopes_supported: auth.scopes }),
    resource_name: 'Interceptor Fleet MCP gateway',
  });

  const send = (res: ServerResponse, status: number, body?: unknown, headers = {}) => {
    res.writeHead(status, {
      'access-control-allow-origin': '*',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    });
    res.end(body === undefined ? undefined : JSON.stringify(body));
  };

  return {
    matches: (url) => paths.has(pathOf(url)),
    resourceOf,
    handle(req, res) {
      if (req.method === 'OPTIONS') {
        send(res, 204, undefined, {
          'access-control-allow-methods': 'GET, HEAD, OPTIONS',
          'access-control-allow-headers': 'mcp-protocol-version, content-type',
          'access-control-max-age': String(MAX_AGE_S),
        });
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        send(res, 405, { error: 'use GET' }, { allow: 'GET, HEAD, OPTIONS' });
        return;
      }
      const resource = resourceOf(req);
      if (resource === undefined) {
        send(res, 403, { error: hostProblem(req) ?? 'Forbidden: the Host is not valid' });
        return;
      }
      send(res, 200, metadata(resource), { 'cache-control': `public, max-age=${MAX_AGE_S}` });
    },
    challengeParams(req, scopes = auth.scopes) {
      const resource = resourceOf(req);
      return {
        ...(resource === undefined ? {} : { resource_metadata: metadataUrl(resource) }),
        ...(scopes === undefined || scopes.length === 0 ? {} : { scope: scopes.join(' ') }),
      };
    },
  };
}
