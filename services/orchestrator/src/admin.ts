/**
 * The admin API (DESIGN.md §3): register, list, remove and refresh interceptor services,
 * and show the chain an (event, phase) would run. Bearer `FLEET_ADMIN_TOKEN` when set.
 */
import { isNeverIntercepted, PhaseSchema } from '@fleet/core';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import { type AuthError, UNAVAILABLE_RETRY_AFTER_S } from './auth.ts';
import { type Registry, RegistryError } from './registry.ts';

const RegisterBodySchema = z.object({
  url: z.url().refine((u) => /^https?:\/\//.test(u), { message: 'must be an http(s) URL' }),
  token: z.string().optional(),
  overrides: z.record(z.string(), z.unknown()).optional(),
});

/** Options for {@link createAdminRouter}. */
export interface AdminRouterOptions {
  registry: Registry;
  /** Admits or refuses each request (FLEET_ADMIN_TOKEN, admin-scoped JWTs); default: all. */
  authorize?: (req: Request) => Promise<AuthError | undefined>;
  /** The `WWW-Authenticate` challenge for a refusal; default `Bearer`. */
  challenge?: (req: Request, refusal: AuthError) => string;
  /** `chain.speculativeMutators`: request-phase mutators start with the validators. */
  speculativeMutators?: boolean;
}

function problem(res: Response, status: number, message: string, details?: unknown): void {
  res.status(status).json(details === undefined ? { error: message } : { error: message, details });
}

/** Build the `/admin` router. */
export function createAdminRouter({
  registry,
  authorize = async () => undefined,
  challenge = () => 'Bearer',
  speculativeMutators = false,
}: AdminRouterOptions): Router {
  const router = express.Router();
  router.use(async (req: Request, res: Response, next: NextFunction) => {
    const refused = await authorize(req);
    if (refused === undefined) return next();
    if (refused.refusal === 'unavailable') {
      res.setHeader('retry-after', String(UNAVAILABLE_RETRY_AFTER_S));
      return problem(res, 503, refused.message);
    }
    res.setHeader('www-authenticate', challenge(req, refused));
    return problem(res, refused.refusal === 'insufficient_scope' ? 403 : 401, refused.message);
  });
  router.use(express.json({ limit: '256kb' }));
  router.use(
    (error: Error & { type?: string }, _req: Request, res: Response, next: NextFunction) => {
      if (error.type === 'entity.parse.failed')
        return problem(res, 400, 'the body is not valid JSON');
      if (error.type === 'entity.too.large') return problem(res, 413, 'the body is too large');
      next(error);
    },
  );

  const fail = (res: Response, error: unknown) => {
    if (error instanceof RegistryError)
      return problem(res, error.status, error.message, error.data);
    return problem(res, 500, 'internal error', String(error));
  };

  router.post('/services', async (req: Request, res: Response) => {
    const body = RegisterBodySchema.safeParse(req.body);
    if (!body.success)
      return problem(
        res,
        400,
        z.prettifyError(body.error),
        body.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
      );
    try {
      const { created, service } = await registry.register(body.data);
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
      fail(res, error);
    }
  });

  router.get('/services', (_req: Request, res: Response) => {
    res.json({ services: registry.list() });
  });

  router.delete('/services/:id', async (req: Request, res: Response) => {
    try {
      await registry.unregister(String(req.params.id));
      res.status(204).end();
    } catch (error) {
      fail(res, error);
    }
  });

  router.post('/services/:id/refresh', async (req: Request, res: Response) => {
    try {
      res.json(await registry.refresh(String(req.params.id)));
    } catch (error) {
      fail(res, error);
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
