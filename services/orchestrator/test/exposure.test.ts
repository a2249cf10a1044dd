/**
 * Start-up warnings for a gateway that listens beyond loopback without protection: the admin
 * API can register a service that sees every payload, and `auth.mode: none` makes every MCP
 * caller anonymous. Loopback (the default) warns about nothing.
 */

import { isLoopbackName } from '@fleet/interceptor-kit';
import { describe, expect, it } from 'vitest';
import { exposureWarnings, parseConfig } from '../src/app.ts';

const JWT =
  'auth: {mode: jwt, issuer: "https://as.example.com", jwksUrl: "https://as.example.com/jwks"';

describe('isLoopbackName, as the listen address exposureWarnings reads', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.0.0.2', true],
    ['localhost', true],
    ['LOCALHOST', true],
    ['::1', true],
    ['[::1]', true],
    ['0.0.0.0', false],
    ['::', false],
    ['10.0.0.5', false],
    ['127.0.0.1.example.com', false],
    ['gateway.internal', false],
  ])('%s → %s', (host, loopback) => {
    expect(isLoopbackName(host)).toBe(loopback);
  });
});

describe('exposureWarnings', () => {
  it('says nothing on loopback, whatever is configured', () => {
    expect(exposureWarnings(parseConfig(''), '127.0.0.1', undefined)).toEqual([]);
    expect(exposureWarnings(parseConfig(''), '::1', undefined)).toEqual([]);
  });

  it('names the open admin API and anonymous MCP beyond loopback', () => {
    const warnings = exposureWarnings(parseConfig(''), '0.0.0.0', undefined);
    expect(warnings).toEqual([
      expect.stringMatching(
        /^the admin API is open to anyone who can reach 0\.0\.0\.0: .*set FLEET_ADMIN_TOKEN or auth\.adminScopes$/,
      ),
      expect.stringMatching(
        /^MCP clients are not authenticated \(auth\.mode: none\) on 0\.0\.0\.0/,
      ),
    ]);
  });

  it.each([
    ['FLEET_ADMIN_TOKEN', `${JWT}}`, 'admin-token'],
    ['auth.adminScopes', `${JWT}, adminScopes: [fleet:admin]}`, undefined],
  ])(
    'is quiet about the admin API with %s, and about MCP with jwt auth',
    (_what, config, token) => {
      expect(exposureWarnings(parseConfig(config), '0.0.0.0', token)).toEqual([]);
    },
  );

  it('still names anonymous MCP when only the admin API is protected', () => {
    expect(exposureWarnings(parseConfig(''), '10.0.0.5', 'admin-token')).toEqual([
      expect.stringMatching(/^MCP clients are not authenticated/),
    ]);
  });
});
