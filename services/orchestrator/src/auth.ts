/**
 * Ingress authentication: `none` (anonymous), static bearer `tokens` (token → principal), or
 * `jwt` (issuer, audience or resource, JWKS URL; claims become `principal.claims`; required
 * scopes). A refusal says why, in RFC 6750's terms, so the ingress can answer with the
 * right status and `WWW-Authenticate` challenge (see oauth.ts).
 */
import { timingSafeEqual } from 'node:crypto';
import { FleetError, type Principal } from '@fleet/core';
import { bearerMatches } from '@fleet/interceptor-kit';
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from 'jose';
import type { AuthConfig } from './config.ts';

/** Who made a request, and what its token allows. */
export interface Credentials {
  principal: Principal;
  /** The token's scopes (`scope` / `scp` claims of a JWT); empty for other modes. */
  scopes: string[];
}

/**
 * Why credentials were refused (RFC 6750 §3.1): `missing` (no bearer token: HTTP 401, a
 * challenge without an error code), `invalid_token` (401), `insufficient_scope` (403); or
 * `unavailable`: the gateway cannot check them now (its JWKS cannot be fetched: 503, so a
 * client does not throw away a good token).
 */
export type AuthRefusal = 'missing' | 'invalid_token' | 'insufficient_scope' | 'unavailable';

/** What a client refused as `unavailable` (JWKS outage) is told to wait (`Retry-After`, s). */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

/** Refused credentials; `message` is fixed text that never repeats the token. */
export class AuthError extends FleetError {
  override readonly name = 'AuthError';
  readonly refusal: AuthRefusal;
  constructor(refusal: AuthRefusal, message: string, options?: { cause?: unknown }) {
    super('UNAUTHORIZED', message, options);
    this.refusal = refusal;
  }
}

/** Resolves the caller of a request from its `Authorization` header. */
export interface Authenticator {
  /**
   * `resource` is the gateway's MCP endpoint as the request reached it (jwt mode: a token
   * issued for it is accepted, RFC 8707). `scopes` replaces the scopes a JWT must carry
   * (`auth.scopes`), e.g. with the admin API's.
   * @throws {AuthError} for missing, invalid or under-scoped credentials.
   */
  authenticate(
    authorization: string | undefined,
    resource?: string,
    scopes?: readonly string[],
  ): Promise<Credentials>;
}

const ANONYMOUS: Credentials = { principal: { type: 'anonymous' }, scopes: [] };
const MISSING = 'a bearer token is required';
const NO_AUDIENCE = 'the gateway cannot tell which audience a token must carry';

function bearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/**
 * Whether jose failed to get the keys rather than found the token bad: the JWKS could not be
 * fetched (`fetch failed`), timed out, answered other than 200, or is not a key set.
 */
function keysUnavailable(error: unknown): boolean {
  if (error instanceof TypeError) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ERR_JWKS_TIMEOUT' || code === 'ERR_JWKS_INVALID' || code === 'ERR_JOSE_GENERIC';
}

/** A JWT's scopes: `scope` (RFC 9068, space-separated) or `scp` (a list, or a string). */
export function scopesOf(payload: JWTPayload): string[] {
  const raw = payload.scope ?? payload.scp;
  const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(' ') : [];
  return list.filter((s): s is string => typeof s === 'string' && s !== '');
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Build the authenticator for an auth configuration. */
export function createAuthenticator(config: AuthConfig): Authenticator {
  switch (config.mode) {
    case 'none':
      return { authenticate: async () => ANONYMOUS };
    case 'tokens': {
      const entries = config.tokens;
      return {
        async authenticate(header) {
          const token = bearer(header);
          if (token === undefined) throw new AuthError('missing', MISSING);
          const entry = entries.find((e) => sameSecret(e.token, token));
          if (entry === undefined)
            throw new AuthError('invalid_token', 'the bearer token is not valid');
          const { type, id, claims } = entry.principal;
          return { principal: { type, id, claims }, scopes: [] };
        },
      };
    }
    case 'jwt': {
      const jwks = createRemoteJWKSet(new URL(config.jwksUrl));
      const pick = (payload: JWTPayload): Record<string, unknown> => {
        if (config.claims === undefined) return { ...payload };
        return Object.fromEntries(
          config.claims.filter((c) => c in payload).map((c) => [c, payload[c]]),
        );
      };
      return {
        async authenticate(header, resource, required = config.scopes ?? []) {
          const token = bearer(header);
          if (token === undefined) throw new AuthError('missing', MISSING);
          const audience = [config.audience, config.resource ?? resource].filter(
            (a) => a !== undefined,
          );
          if (audience.length === 0) throw new AuthError('invalid_token', NO_AUDIENCE);
          let payload: JWTPayload;
          try {
            ({ payload } = await jwtVerify(token, jwks, { issuer: config.issuer, audience }));
          } catch (error) {
            if (keysUnavailable(error))
              throw new AuthError('unavailable', 'the gateway cannot verify tokens right now', {
                cause: error,
              });
            throw new AuthError(
              'invalid_token',
              'the bearer token is not a valid JWT for this gateway',
              { cause: error },
            );
          }
          const scopes = scopesOf(payload);
          const lacking = required.filter((s) => !scopes.includes(s));
          if (lacking.length > 0)
            throw new AuthError(
              'insufficient_scope',
              `the bearer token lacks the scope${lacking.length > 1 ? 's' : ''} ${lacking.map((s) => `"${s}"`).join(', ')}`,
            );
          const principal: Principal = { type: 'user', claims: pick(payload) };
          if (typeof payload.sub === 'string') principal.id = payload.sub;
          return { principal, scopes };
        },
      };
    }
  }
}

/**
 * Who is using the admin API: the principal of an admitted request (the operator), or why
 * a request is refused.
 */
export type AdminVerdict = { operator: Principal } | { refused: AuthError };

/** Decides whether a request may use the admin API, and as whom. */
export type AdminAuthorizer = (
  authorization: string | undefined,
  resource?: string,
) => Promise<AdminVerdict>;

const ADMIN_TOKEN_REQUIRED = 'a valid admin bearer token is required';

/**
 * The operator of a request admitted by FLEET_ADMIN_TOKEN: the credential, not a person
 * (everyone who holds the token is this operator).
 */
export const ADMIN_TOKEN_OPERATOR: Principal = { type: 'service', id: 'FLEET_ADMIN_TOKEN' };
/** The operator of an admin API that checks nothing (neither token nor admin scopes set). */
export const OPEN_ADMIN_OPERATOR: Principal = { type: 'anonymous' };

/** The scopes that admit a JWT to the admin API (`auth.adminScopes`), if any. */
export function adminScopesOf(config: AuthConfig): readonly string[] | undefined {
  return config.mode === 'jwt' ? config.adminScopes : undefined;
}

/**
 * Who may use the admin API: the holder of `adminToken` (FLEET_ADMIN_TOKEN, operator
 * {@link ADMIN_TOKEN_OPERATOR}) and, with jwt auth and `auth.adminScopes`, the bearer of a
 * JWT that `authenticator` (the ingress's: one key set) accepts with all of them (operator:
 * the token's principal, its `sub`). With neither configured, everyone (DESIGN.md §3 asks
 * for the token only when it is set; operator {@link OPEN_ADMIN_OPERATOR}).
 */
export function createAdminAuthorizer(
  config: AuthConfig,
  adminToken: string | undefined,
  authenticator: Authenticator,
): AdminAuthorizer {
  const token = adminToken === '' ? undefined : adminToken;
  const scopes = adminScopesOf(config);
  if (token === undefined && scopes === undefined)
    return async () => ({ operator: OPEN_ADMIN_OPERATOR });
  return async (authorization, resource) => {
    if (token !== undefined && bearerMatches(authorization, token))
      return { operator: ADMIN_TOKEN_OPERATOR };
    if (scopes === undefined)
      return {
        refused: new AuthError(
          bearer(authorization) === undefined ? 'missing' : 'invalid_token',
          ADMIN_TOKEN_REQUIRED,
        ),
      };
    try {
      const { principal } = await authenticator.authenticate(authorization, resource, scopes);
      return { operator: principal };
    } catch (error) {
      return {
        refused:
          error instanceof AuthError
            ? error
            : new AuthError('invalid_token', ADMIN_TOKEN_REQUIRED, { cause: error }),
      };
    }
  };
}
