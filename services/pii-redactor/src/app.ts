/**
 * The pii-redactor service's composition root: the engine for the config in force, the
 * token vault and the two interceptors, served with the kit. Does not listen (main.ts does).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  createInterceptorHost,
  createInterceptorHttpApp,
  type InterceptorHttpApp,
  type InvokedEvent,
  type Logger,
  requireBearer,
} from '@fleet/interceptor-kit';
import { createPiiEngine, type PiiConfig, type PiiEngine, parsePiiConfig } from '@fleet/pii';
import { parse as parseYaml } from 'yaml';
import { createPiiInterceptors, type TokenStore } from './interceptors.ts';

export { createPiiInterceptors, scopeOf, type TokenStore } from './interceptors.ts';
export {
  MAX_VAULT_ENTRIES_PER_PRINCIPAL,
  MAX_VAULT_ENTRIES_PER_SCOPE,
  RedisTokenVault,
  type TokenVaultOptions,
  VaultFullError,
  type VaultScope,
} from './vault.ts';

/** Parse the YAML text of a PII_CONFIG file (throws a message naming each bad path). */
export function parsePiiConfigText(text: string): PiiConfig {
  let raw: unknown;
  try {
    raw = text.trim() === '' ? {} : parseYaml(text);
  } catch (error) {
    throw new Error(`PII_CONFIG is not valid YAML: ${(error as Error).message}`);
  }
  return parsePiiConfig(raw ?? {});
}

/** What the service is built from. */
export interface PiiRedactorDeps {
  /** The engine for the config in force (reloads swap it). */
  engine: () => PiiEngine;
  vault: TokenStore;
  /** Bearer token required on `/mcp` and `/config` (FLEET_TOKEN). */
  token?: string | undefined;
  /** Reported at `/config`. */
  status?: () => Record<string, unknown>;
  metricsHandler?: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  /** Told of every invocation (metrics, failure logs: see `observeInvocations`). */
  onInvoked?: ((event: InvokedEvent) => void) | undefined;
  /** The service's logger (answers that cannot be sent). */
  logger?: Logger | undefined;
}

/** Build the service. */
export function createPiiRedactorApp(deps: PiiRedactorDeps): InterceptorHttpApp {
  const host = createInterceptorHost(
    createPiiInterceptors({ engine: deps.engine, vault: deps.vault }),
    deps.onInvoked ? { onInvoked: deps.onInvoked } : {},
  );
  return createInterceptorHttpApp(host, {
    name: 'pii-redactor',
    version: '0.1.0',
    token: deps.token,
    ...(deps.logger ? { logger: deps.logger } : {}),
    extend: (app) => {
      if (deps.status) {
        const status = deps.status;
        // File paths and the last rejected edit: behind the same token as /mcp.
        app.get('/config', requireBearer(deps.token), (_req, res) => {
          res.json(status());
        });
      }
      if (deps.metricsHandler) {
        const handler = deps.metricsHandler;
        app.get('/metrics', (req, res) => handler(req, res));
      }
    },
  });
}

/** Build an engine for a config and the service's HMAC key. */
export function engineFor(config: PiiConfig, hmacKey: string | undefined): PiiEngine {
  return createPiiEngine({ config, ...(hmacKey ? { hmacKey } : {}) });
}
