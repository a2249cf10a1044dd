/**
 * The policy-validator service's composition root: the interceptors over the current
 * policy, served with the kit (the descriptors follow the policy's events across reloads).
 * Does not listen (see main.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { AdminChange, AdminEvent, AdminOperator } from '@fleet/audit';
import {
  bearerMatches,
  createInterceptorHost,
  createInterceptorHttpApp,
  type InterceptorHost,
  type InterceptorHttpApp,
  type InterceptorHttpOptions,
  type InvokedEvent,
  type Logger,
  requireBearer,
} from '@fleet/interceptor-kit';
import { createPolicyInterceptors, type RateLimiter } from './interceptors.ts';
import {
  NO_PIN_METRICS,
  type PinMetrics,
  type PinMetricsMeter,
  registerPinMetrics,
} from './pin-metrics.ts';
import type { ApproveOutcome, PinStore, UnpinnedAction } from './pinning.ts';
import type { PolicySource } from './policy-source.ts';

export {
  createPolicyInterceptors,
  PinStoreUnavailableError,
  type RateLimiter,
} from './interceptors.ts';
export {
  DEFAULT_PIN_COUNTS_TIMEOUT_MS,
  type PinMetricSources,
  type PinMetrics,
  type PinMetricsMeter,
  type PinMetricsOptions,
  registerPinMetrics,
} from './pin-metrics.ts';
export {
  type ApproveOutcome,
  DEFAULT_PIN_MAX_TOOLS,
  type DriftKind,
  MAX_PINNED_NAME_LENGTH,
  type PinCheck,
  type PinCounts,
  type PinStore,
  type PinVerdict,
  type RecordedDrift,
  RedisPinStore,
  type RedisPinStoreOptions,
  type ToolDrift,
  type ToolPin,
  toolDigest,
  type UnpinnedAction,
} from './pinning.ts';
export { createPolicySource, type PolicySource } from './policy-source.ts';
export { RedisRateLimiter } from './rate-limit.ts';

/** What the service is built from. */
export interface PolicyValidatorDeps {
  source: PolicySource;
  limiter?: RateLimiter | undefined;
  /** Tool pins (the policy's `pinning`); without a store pinning is off and `/policy/pins` 503. */
  pins?: PinStore | undefined;
  log: Logger;
  /** Bearer token required on `/mcp`, `/policy` and `/policy/pins` (FLEET_TOKEN). */
  token?: string | undefined;
  metricsHandler?: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  /**
   * The meter the tool pinning metrics are registered on, once per app (drifts, pins, tools
   * the full store could not pin); without one they are not recorded.
   */
  meter?: PinMetricsMeter | undefined;
  /** Told of every invocation (metrics, failure logs: see `observeInvocations`). */
  onInvoked?: ((event: InvokedEvent) => void) | undefined;
  /**
   * Told of every change made through the pin endpoints (an approval, a pin forgotten) and of
   * every attempt at one refused for its credentials (401): the `admin` audit records (main.ts
   * hands them to `@fleet/audit`'s `createAdminAuditor`). Called after the change, before the
   * answer is sent; a throw is ignored.
   */
  onAdminChange?: ((change: AdminChange) => void) | undefined;
}

/** The built service. */
export interface PolicyValidatorApp extends InterceptorHttpApp {
  host: InterceptorHost;
  /** Rebuild the descriptors from the current policy (after a reload). */
  refresh(): void;
}

/** The express app and response of the kit's HTTP front (the service does not depend on express). */
type Express = Parameters<NonNullable<InterceptorHttpOptions['extend']>>[0];
type Request = Parameters<ReturnType<typeof requireBearer>>[0];
type Response = Parameters<ReturnType<typeof requireBearer>>[1];
type Next = Parameters<ReturnType<typeof requireBearer>>[2];

/**
 * The operator of a pin change admitted by FLEET_TOKEN: the credential, not a person
 * (everyone who holds the token is this operator).
 */
export const FLEET_TOKEN_OPERATOR: AdminOperator = { type: 'service', id: 'FLEET_TOKEN' };
/** The operator of pin endpoints that check nothing (no FLEET_TOKEN). */
export const OPEN_OPERATOR: AdminOperator = { type: 'anonymous' };
/** Why a pin change without the token is refused (the kit's `requireBearer` answer). */
const TOKEN_REQUIRED = 'a valid bearer token is required';

/** Longest a tool name is written to a log line: backends choose names of any length. */
const LOGGED_TOOL_NAME_MAX = 128;
/** At most one "pin store full" warning per this period; the metric counts every tool. */
const STORE_FULL_WARN_INTERVAL_MS = 60_000;

/** `tool` as a log line shows it: cut to {@link LOGGED_TOOL_NAME_MAX} characters, saying so. */
function loggedToolName(tool: string): string {
  if (tool.length <= LOGGED_TOOL_NAME_MAX) return tool;
  let end = LOGGED_TOOL_NAME_MAX;
  // Not half a surrogate pair.
  const last = tool.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${tool.slice(0, end)}… (${tool.length} characters)`;
}

/**
 * Counts the tools the full pin store could not pin and warns about them at most once per
 * {@link STORE_FULL_WARN_INTERVAL_MS} (a backend listing many new names would otherwise write
 * a line per list), with how many were seen since the previous warning.
 */
function storeFullReporter(log: Logger, metrics: PinMetrics, maxTools: number | undefined) {
  let warnedAt: number | undefined;
  let since = 0;
  return (tools: readonly string[], action: UnpinnedAction) => {
    metrics.countUnpinned(tools.length, action);
    since += tools.length;
    const now = Date.now();
    if (warnedAt !== undefined && now - warnedAt < STORE_FULL_WARN_INTERVAL_MS) return;
    warnedAt = now;
    log.warn(
      { maxTools, action, unpinned: since, example: loggedToolName(tools[0] ?? '') },
      action === 'passed'
        ? 'tool pin store full: never-seen tools pass unpinned and unverified (pinning.failOpen); raise PINNING_MAX_TOOLS or forget stale pins (DELETE /policy/pins/{tool})'
        : 'tool pin store full: never-seen tools are hidden and refused (fail closed); raise PINNING_MAX_TOOLS or forget stale pins (DELETE /policy/pins/{tool})',
    );
    since = 0;
  };
}

/** `{error: {code, message}}`, the body of every error of the service's own endpoints. */
function sendError(res: Response, status: number, code: string, message: string): void {
  res.status(status).json({ error: { code, message } });
}

/**
 * The guard of a route that changes pins (`requireBearer`), and what reports the change as
 * `event` to `onAdminChange`: the guard a refused attempt, the route (`changed`) a change it
 * made. Reported where decided, not when the answer is sent: a client that hangs up after an
 * approval does not take it off the trail.
 */
function pinChange(deps: PolicyValidatorDeps, event: AdminEvent, method: string) {
  const { token, onAdminChange } = deps;
  const guard = requireBearer(token);
  const operator = token ? FLEET_TOKEN_OPERATOR : OPEN_OPERATOR;
  const started = new WeakMap<Request, number>();
  const report = (req: Request, outcome: AdminChange['outcome']) => {
    if (!onAdminChange) return;
    const change: AdminChange = {
      event,
      method,
      outcome,
      durationMs: performance.now() - (started.get(req) ?? performance.now()),
    };
    if (typeof req.params.tool === 'string') change.target = req.params.tool;
    if (outcome === 'done') change.operator = operator;
    else change.reason = TOKEN_REQUIRED;
    try {
      onAdminChange(change);
    } catch {
      // Auditing never breaks the request.
    }
  };
  return {
    guard(req: Request, res: Response, next: Next) {
      started.set(req, performance.now());
      if (!bearerMatches(req.headers.authorization, token)) report(req, 'refused');
      guard(req, res, next);
    },
    changed: (req: Request) => report(req, 'done'),
  };
}

/**
 * The operator's view of tool pinning, behind the same token as `/policy`: `GET /policy/pins`
 * (pins and drifts: names, digests, times), `POST /policy/pins/{tool}/approve[?digest=]`
 * (audited: `admin/pins/approve`) and `DELETE /policy/pins/{tool}` (audited:
 * `admin/pins/forget`).
 */
function mountPinRoutes(app: Express, deps: PolicyValidatorDeps): void {
  const guard = requireBearer(deps.token);
  const approval = pinChange(deps, 'admin/pins/approve', 'POST /policy/pins/{tool}/approve');
  const forgetting = pinChange(deps, 'admin/pins/forget', 'DELETE /policy/pins/{tool}');
  const unavailable = (res: Response, error?: unknown) => {
    if (error !== undefined) deps.log.warn({ err: String(error) }, 'tool pin store unavailable');
    sendError(
      res,
      503,
      'STORE_UNAVAILABLE',
      deps.pins ? 'the tool pin store is unavailable' : 'this service has no tool pin store',
    );
  };
  app.get('/policy/pins', guard, async (_req, res) => {
    if (!deps.pins) return unavailable(res);
    try {
      const { pins, drifts } = await deps.pins.list();
      res.json({ enabled: deps.source.current().pinning.enabled, pins, drifts });
    } catch (error) {
      unavailable(res, error);
    }
  });
  app.post('/policy/pins/:tool/approve', approval.guard, async (req, res) => {
    if (!deps.pins) return unavailable(res);
    const tool = typeof req.params.tool === 'string' ? req.params.tool : '';
    const expected = req.query.digest;
    if (expected !== undefined && (typeof expected !== 'string' || !DIGEST.test(expected))) {
      return sendError(res, 400, 'INVALID_REQUEST', 'digest must be 64 lowercase hex digits');
    }
    let outcome: ApproveOutcome;
    try {
      outcome = await deps.pins.approve(tool, expected);
    } catch (error) {
      return unavailable(res, error);
    }
    switch (outcome.status) {
      case 'no-drift':
        return sendError(res, 404, 'NOT_FOUND', `tool "${tool}" has no drift to approve`);
      case 'conflict':
        return sendError(
          res,
          409,
          'CONFLICT',
          `tool "${tool}" changed again: its seen definition is now ${outcome.seen}`,
        );
      case 'approved':
        deps.log.info(
          { tool: loggedToolName(tool), digest: outcome.pin.digest },
          'tool definition approved and pinned',
        );
        approval.changed(req);
        res.json(outcome.pin);
    }
  });
  app.delete('/policy/pins/:tool', forgetting.guard, async (req, res) => {
    if (!deps.pins) return unavailable(res);
    const tool = typeof req.params.tool === 'string' ? req.params.tool : '';
    let forgotten: boolean;
    try {
      forgotten = await deps.pins.forget(tool);
    } catch (error) {
      return unavailable(res, error);
    }
    if (!forgotten) return sendError(res, 404, 'NOT_FOUND', `tool "${tool}" is not pinned`);
    deps.log.info(
      { tool: loggedToolName(tool) },
      'tool pin forgotten: its next listing pins it afresh',
    );
    forgetting.changed(req);
    res.status(204).end();
  });
}

const DIGEST = /^[0-9a-f]{64}$/;

/** Build the service. */
export function createPolicyValidatorApp(deps: PolicyValidatorDeps): PolicyValidatorApp {
  const { pins } = deps;
  // Once per app, not per build: instruments and the warning's throttle outlive reloads.
  const pinMetrics =
    deps.meter && pins
      ? registerPinMetrics(deps.meter, {
          counts: () => pins.counts(),
          enabled: () => deps.source.current().pinning.enabled,
        })
      : NO_PIN_METRICS;
  const onUnpinned = storeFullReporter(deps.log, pinMetrics, pins?.maxTools);
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
        pins,
        // Digests and the (cut) tool name only: a poisoned description never reaches the logs.
        onDrift: (drift) => {
          pinMetrics.countDrift(drift.kind);
          deps.log.warn(
            {
              tool: loggedToolName(drift.tool),
              pinned: drift.pinned,
              seen: drift.seen,
              firstSeen: drift.firstSeen,
            },
            'tool definition drifted from its pin; hidden and refused until approved',
          );
        },
        onUnpinned,
        onPinStoreError: (error, failedOpen) =>
          deps.log.warn(
            { err: String(error), failedOpen },
            failedOpen
              ? 'tool pin store unavailable; not checking pins (pinning.failOpen)'
              : 'tool pin store unavailable; refusing (fail closed)',
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
      mountPinRoutes(app, deps);
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
