/**
 * The admin API (DESIGN.md §3): register, list, remove and refresh interceptor services,
 * and show the chain an (event, phase) would run. Bearer `FLEET_ADMIN_TOKEN` when set.
 * Every change it makes, and every refused attempt at one, is reported as an
 * {@link AdminAction} (the audit trail's `admin` records): who changed the chain, and when.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { isNeverIntercepted, PhaseSchema, type Principal, withKeyHints } from '@fleet/core';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import { type AdminVerdict, type AuthError, UNAVAILABLE_RETRY_AFTER_S } from './auth.ts';
import type { Logger } from './logger.ts';
import { type Registry, RegistryError } from './registry.ts';

/** A change the admin API makes to the registry. */
export type AdminActionName = 'register' | 'unregister' | 'refresh';

/**
 * One change made through the admin API, or one attempt at it refused for its credentials
 * (401/403). Requests that change nothing for other reasons (a malformed body, an unknown
 * id, a URL that is no interceptor server) are answered and logged, not reported.
 */
export interface AdminAction {
  action: AdminActionName;
  /** The route: `POST /admin/services`, `DELETE /admin/services/{id}`, `POST /admin/services/{id}/refresh`. */
  method: string;
  /** The service acted on; for a refused registration unknown (its body is not read). */
  service?: string;
  /** Who: absent when refused. See `createAdminAuthorizer`. */
  operator?: Principal;
  outcome: 'done' | 'refused';
  /** The HTTP status answered. */
  status: number;
  /** Why it was refused. */
  reason?: string;
  durationMs: number;
}

// The admin paths as express matches them: in any case, with or without a trailing slash.
const SERVICES = /^\/services\/?$/i;
const SERVICE = /^\/services\/([^/]+)\/?$/i;
const REFRESH = /^\/services\/([^/]+)\/refresh\/?$/i;
const CHAIN = /^\/chain\/?$/i;

const ROUTES: Array<[RegExp, string, AdminActionName, string]> = [
  [SERVICES, 'POST', 'register', 'POST /admin/services'],
  [SERVICE, 'DELETE', 'unregister', 'DELETE /admin/services/{id}'],
  [REFRESH, 'POST', 'refresh', 'POST /admin/services/{id}/refresh'],
];

/** The methods each admin path serves (HEAD with GET, as express answers it): a 405's `Allow`. */
const ALLOWED: Array<[RegExp, readonly string[]]> = [
  [SERVICES, ['GET', 'HEAD', 'POST']],
  [SERVICE, ['DELETE']],
  [REFRESH, ['POST']],
  [CHAIN, ['GET', 'HEAD']],
];

/** The registry change `req` asks for, if it asks for one. */
function actionOf(req: Request): Pick<AdminAction, 'action' | 'method' | 'service'> | undefined {
  for (const [pattern, verb, action, method] of ROUTES) {
    if (req.method !== verb) continue;
    const match = pattern.exec(req.path);
    if (!match) continue;
    let service: string | undefined;
    try {
      service = match[1] === undefined ? undefined : decodeURIComponent(match[1]);
    } catch {
      service = match[1];
    }
    return service === undefined ? { action, method } : { action, method, service };
  }
  return undefined;
}

// Strict, as the config file is: a misspelt "overides" must not register the service
// without the overrides the operator asked for.
const RegisterBodySchema = z.strictObject({
  url: z.url().refine((u) => /^https?:\/\//.test(u), { message: 'must be an http(s) URL' }),
  token: z.string().optional(),
  overrides: z.record(z.string(), z.unknown()).optional(),
});

/** Options for {@link createAdminRouter}. */
export interface AdminRouterOptions {
  registry: Registry;
  /** Admits (as whom) or refuses each request (FLEET_ADMIN_TOKEN, admin-scoped JWTs); default: all, anonymously. */
  authorize?: (req: Request) => Promise<AdminVerdict>;
  /** The `WWW-Authenticate` challenge for a refusal; default `Bearer`. */
  challenge?: (req: Request, refusal: AuthError) => string;
  /** `chain.speculativeMutators`: request-phase mutators start with the validators. */
  speculativeMutators?: boolean;
  /** Told of every change made and every attempt refused (the audit trail); must not throw. */
  onAction?: (action: AdminAction) => void;
  /**
   * Where an unexpected failure is logged, with the id its 500 answer carries. Without one it
   * goes to the app's error handler (logged there; answered 500 without its text either).
   */
  log?: Logger;
}

function problem(res: Response, status: number, message: string, details?: unknown): void {
  res.status(status).json(details === undefined ? { error: message } : { error: message, details });
}

/** Build the `/admin` router. */
export function createAdminRouter({
  registry,
  authorize = async () => ({ operator: { type: 'anonymous' } }),
  challenge = () => 'Bearer',
  speculativeMutators = false,
  onAction,
  log,
}: AdminRouterOptions): Router {
  const router = express.Router();
  router.use(async (req: Request, res: Response, next: NextFunction) => {
    const started = performance.now();
    const verdict = await authorize(req);
    const action = onAction && actionOf(req);
    if (onAction && action) {
      res.once('finish', () => {
        const { statusCode: status } = res;
        const done = status >= 200 && status < 300;
        const refused = status === 401 || status === 403;
        if (!done && !refused) return;
        const report: AdminAction = {
          ...action,
          outcome: done ? 'done' : 'refused',
          status,
          durationMs: performance.now() - started,
        };
        const service = (res.locals as { service?: string }).service;
        if (service !== undefined) report.service = service;
        if ('operator' in verdict) report.operator = verdict.operator;
        else report.reason = verdict.refused.message;
        try {
          onAction(report);
        } catch {
          // A listener of 'finish' that throws would take the process down; auditing never may.
        }
      });
    }
    if ('operator' in verdict) return next();
    const refused = verdict.refused;
    if (refused.refusal === 'unavailable') {
      res.setHeader('retry-after', String(UNAVAILABLE_RETRY_AFTER_S));
      return problem(res, 503, refused.message);
    }
    res.setHeader('www-authenticate', challenge(req, refused));
    return problem(res, refused.refusal === 'insufficient_scope' ? 403 : 401, refused.message);
  });
  // After the credentials (a caller without them learns nothing about the paths) and before
  // the body is read: a PUT's unparsable body is not what is wrong with it.
  router.use((req: Request, res: Response, next: NextFunction) => {
    const allowed = ALLOWED.find(([pattern]) => pattern.test(req.path))?.[1];
    if (allowed === undefined || allowed.includes(req.method)) return next();
    const allow = allowed.join(', ');
    res.setHeader('allow', allow);
    return problem(
      res,
      405,
      `${req.method} is not allowed on ${req.baseUrl}${req.path} (allowed: ${allow})`,
    );
  });
  // Any JSON text: one that is not an object is refused by the schema, saying so.
  router.use(express.json({ limit: '256kb', strict: false }));
  router.use(
    (error: Error & { type?: string }, _req: Request, res: Response, next: NextFunction) => {
      if (error.type === 'entity.parse.failed')
        return problem(res, 400, 'the body is not valid JSON');
      if (error.type === 'entity.too.large') return problem(res, 413, 'the body is too large');
      next(error);
    },
  );

  // Anything but the registry's own answer may name internals (addresses, paths): the caller
  // gets an id to quote, the log has the error under the same id.
  const fail = (req: Request, res: Response, next: NextFunction, error: unknown) => {
    if (error instanceof RegistryError)
      return problem(res, error.status, error.message, error.data);
    if (log === undefined) return next(error);
    const errorId = randomUUID();
    log.error(
      { err: String(error), errorId, method: req.method, path: `${req.baseUrl}${req.path}` },
      'admin request failed',
    );
    return problem(res, 500, 'internal error', { errorId });
  };

  router.post('/services', async (req: Request, res: Response, next: NextFunction) => {
    const body = RegisterBodySchema.safeParse(req.body);
    if (!body.success) {
      const error = withKeyHints(RegisterBodySchema, body.error);
      return problem(
        res,
        400,
        z.prettifyError(error),
        error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
      );
    }
    try {
      const { created, service } = await registry.register(body.data);
      res.locals.service = service.id;
      res.status(created ? 201 : 200).json({
        id: service.id,
        url: service.url,
        interceptors: service.interceptors,
        status: service.status,
        source: service.source,
        // What is in force: for a config-file service these are the file's, not the body's.
        overrides: service.overrides,
        hasToken: service.hasToken,
      });
    } catch (error) {
      fail(req, res, next, error);
    }
  });

  router.get('/services', (_req: Request, res: Response) => {
    res.json({ services: registry.list() });
  });

  router.delete('/services/:id', async (req: Request, res: Response, next: NextFunction) => {
    try {
      await registry.unregister(String(req.params.id));
      res.status(204).end();
    } catch (error) {
      fail(req, res, next, error);
    }
  });

  router.post('/services/:id/refresh', async (req: Request, res: Response, next: NextFunction) => {
    try {
      res.json(await registry.refresh(String(req.params.id)));
    } catch (error) {
      fail(req, res, next, error);
    }
  });

  router.get('/chain', (req: Request, res: Response) => {
    const raw = req.query.event;
    if (raw !== undefined && typeof raw !== 'string')
      return problem(res, 400, 'event must be given once, as one method name');
    const event = raw === undefined || raw === '' ? 'tools/call' : raw;
    if (event.length > 256 || /[\p{Cc}\s]/u.test(event))
      return problem(res, 400, 'event must be a method name (at most 256 characters, no spaces)');
    const phase = PhaseSchema.safeParse(req.query.phase ?? 'request');
    if (!phase.success) return problem(res, 400, 'phase must be "request" or "response"');
    if (event.includes('*'))
      return problem(res, 400, 'event must be a concrete method name (no wildcard)');
    if (isNeverIntercepted(event))
      return res.json({
        event,
        phase: phase.data,
        stages: [],
        note: `${event} is never intercepted`,
      });
    const plan = registry.plan(event, phase.data);
    // Under speculativeMutators a request-phase mutator stage that follows validators starts
    // together with them (its results count only if they pass).
    const speculative =
      speculativeMutators && phase.data === 'request' && plan.stages[0]?.kind === 'validators';
    res.json({
      event,
      phase: phase.data,
      stages: plan.stages.map((stage) => ({
        kind: stage.kind,
        ...(speculative && stage.kind === 'mutators' ? { speculative: true } : {}),
        interceptors: stage.steps.map(({ interceptor, priority }) => ({
          name: interceptor.name,
          service: interceptor.serviceId,
          type: interceptor.type,
          mode: interceptor.mode,
          priority,
          failOpen: interceptor.failOpen,
          timeoutMs: interceptor.timeoutMs ?? null,
        })),
      })),
    });
  });

  router.use((_req: Request, res: Response) => problem(res, 404, 'no such admin endpoint'));
  return router;
}
