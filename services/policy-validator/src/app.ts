/**
 * The policy-validator service's composition root: the interceptors over the current
 * policy, served with the kit (the descriptors follow the policy's events across reloads).
 * Does not listen (see main.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  createInterceptorHost,
  createInterceptorHttpApp,
  type InterceptorHost,
  type InterceptorHttpApp,
  type InvokedEvent,
  type Logger,
  requireBearer,
} from '@fleet/interceptor-kit';
import { createPolicyInterceptors, type RateLimiter } from './interceptors.ts';
import type { PolicySource } from './policy-source.ts';

export { createPolicyInterceptors, type RateLimiter } from './interceptors.ts';
export { createPolicySource, type PolicySource } from './policy-source.ts';
export { RedisRateLimiter } from './rate-limit.ts';

/** What the service is built from. */
export interface PolicyValidatorDeps {
  source: PolicySource;
  limiter?: RateLimiter | undefined;
  log: Logger;
  /** Bearer token required on `/mcp` and `/policy` (FLEET_TOKEN). */
  token?: string | undefined;
  metricsHandler?: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  /** Told of every invocation (metrics, failure logs: see `observeInvocations`). */
  onInvoked?: ((event: InvokedEvent) => void) | undefined;
}

/** The built service. */
export interface PolicyValidatorApp extends InterceptorHttpApp {
  host: InterceptorHost;
  /** Rebuild the descriptors from the current policy (after a reload). */
  refresh(): void;
}

/** Build the service. */
export function createPolicyValidatorApp(deps: PolicyValidatorDeps): PolicyValidatorApp {
  const build = () =>
    createInterceptorHost(
      createPolicyInterceptors({
        policy: () => deps.source.current(),
        limiter: deps.limiter,
        onLimiterError: (rule, error, failedOpen) =>
          deps.log.warn(
            { rule, err: String(error), failedOpen },
            failedOpen
              ? 'rate limit store unavailable; allowing (failOpen)'
              : 'rate limit store unavailable; denying (fail closed)',
          ),
      }),
      deps.onInvoked ? { onInvoked: deps.onInvoked } : {},
    );
  let current = build();
  // Delegates to the host of the policy in force, so a reload that changes the policy's
  // events changes what interceptors/list advertises without restarting.
  const host: InterceptorHost = {
    get interceptors() {
      return current.interceptors;
    },
    list: (params) => current.list(params),
    invoke: (params, options) => current.invoke(params, options),
    supportedEvents: () => current.supportedEvents(),
  };
  const http = createInterceptorHttpApp(host, {
    name: 'policy-validator',
    version: '0.1.0',
    token: deps.token,
    logger: deps.log,
    extend: (app) => {
      // File path, fingerprint and the last rejected edit: behind the same token as /mcp.
      app.get('/policy', requireBearer(deps.token), (_req, res) => {
        res.json(deps.source.status());
      });
      if (deps.metricsHandler) {
        const handler = deps.metricsHandler;
        app.get('/metrics', (req, res) => handler(req, res));
      }
    },
  });
  return {
    ...http,
    host,
    refresh() {
      current = build();
    },
  };
}
