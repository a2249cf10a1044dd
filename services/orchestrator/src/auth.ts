/**
 * Ingress authentication: `none` (anonymous), static bearer `tokens` (token → principal), or
 * `jwt` (issuer, audience, JWKS URL; claims become `principal.claims`).
 */
import { timingSafeEqual } from 'node:crypto';
import { FleetError, type Principal } from '@fleet/core';
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from 'jose';
import type { AuthConfig } from './config.ts';

/** Resolves the caller of a request from its `Authorization` header. */
export interface Authenticator {
  /** @throws {FleetError} `UNAUTHORIZED` for missing or invalid credentials. */
  authenticate(authorization: string | undefined): Promise<Principal>;
}

const ANONYMOUS: Principal = { type: 'anonymous' };

function bearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

function unauthorized(message: string): FleetError {
  return new FleetError('UNAUTHORIZED', message);
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
          if (token === undefined) throw unauthorized('a bearer token is required');
          const entry = entries.find((e) => sameSecret(e.token, token));
          if (entry === undefined) throw unauthorized('the bearer token is not valid');
          return {
            type: entry.principal.type,
            id: entry.principal.id,
            claims: entry.principal.claims,
          };
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
        async authenticate(header) {
          const token = bearer(header);
          if (token === undefined) throw unauthorized('a bearer token is required');
          try {
            const { payload } = await jwtVerify(token, jwks, {
              issuer: config.issuer,
              audience: config.audience,
            });
            const principal: Principal = { type: 'user', claims: pick(payload) };
            if (typeof payload.sub === 'string') principal.id = payload.sub;
            return principal;
          } catch (error) {
            throw new FleetError(
              'UNAUTHORIZED',
              'the bearer token is not a valid JWT for this gateway',
              { cause: error },
            );
          }
        },
      };
    }
  }
}
