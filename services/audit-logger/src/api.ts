/**
 * The audit query API (DESIGN.md §3), mounted at `/api/audit`:
 *
 * - `GET /records?traceId=&tool=&event=&principal=&decision=&kind=&interceptor=&since=&until=&limit=&cursor=`
 *   → `{records, nextCursor?}`, newest first (`kind`: `chain`, `invocation` or `admin`), at
 *   most `limit` records and 4 Mi characters of them (`nextCursor` continues after a page cut
 *   short by either);
 * - `GET /traces/{traceId}` → `{traceId, records, truncated?}`, oldest first, at most 5,000
 *   records and 16 Mi characters of them (`truncated: true` when more are stored);
 * - `GET /stats?since=&until=` → counts by decision, kind, tool, event, interceptor; latency
 *   percentiles;
 * - `GET /config` → what the viewer needs (`traceUrlTemplate`, `authRequired`); never secret.
 *
 * Everything but `/config` requires `Authorization: Bearer <AUDIT_READ_TOKEN>` when a token is
 * set (401 otherwise). A bad parameter is a 400 naming it. A read the store's statement timeout
 * stops (`AUDIT_QUERY_TIMEOUT_MS`) is a 503 `QUERY_TIMEOUT`; any other store failure a 503
 * `STORE_UNAVAILABLE`.
 */
import {
  AuditQueryError,
  AuditQueryTimeoutError,
  type AuditStore,
  normaliseTraceId,
  parseRecordQuery,
  parseStatsQuery,
} from '@fleet/audit';
import { bearerMatches } from '@fleet/interceptor-kit';
import { type NextFunction, type Request, type Response, Router } from 'express';
import type { Logger } from './logger.ts';

/** Options for {@link createAuditApiRouter}. */
export interface AuditApiOptions {
  store: AuditStore;
  /** Bearer token required to read; unset: open. */
  readToken?: string | undefined;
  /** e.g. `http://jaeger:16686/trace/{traceId}`, for the viewer's links. */
  traceUrlTemplate?: string | undefined;
  logger: Logger;
  /** The clock (tests). Default `() => new Date()`. */
  now?: () => Date;
}

/** The error body of every non-2xx answer. */
export interface ApiErrorBody {
  error: {
    code: 'INVALID_QUERY' | 'UNAUTHORIZED' | 'NOT_FOUND' | 'QUERY_TIMEOUT' | 'STORE_UNAVAILABLE';
    message: string;
    issues?: ReadonlyArray<{ parameter: string; message: string }>;
  };
}

function fail(res: Response, status: number, body: ApiErrorBody['error']): void {
  res.status(status).json({ error: body } satisfies ApiErrorBody);
}

function badQuery(res: Response, error: AuditQueryError): void {
  fail(res, 400, { code: 'INVALID_QUERY', message: error.message, issues: error.issues });
}

function badTraceId(): AuditQueryError {
  return new AuditQueryError([
    { parameter: 'traceId', message: 'must be a W3C trace id: 32 hex digits, not all zero' },
  ]);
}

/** Build the router (mount it at `/api/audit`). */
export function createAuditApiRouter(options: AuditApiOptions): Router {
  const { store, readToken, traceUrlTemplate, logger, now = () => new Date() } = options;
  const router = Router();
  const authRequired = readToken !== undefined && readToken !== '';

  // Answers from the store reflect writes up to now: never cache them.
  router.use((_req, res, next) => {
    res.setHeader('cache-control', 'no-store');
    next();
  });

  router.get('/config', (_req, res) => {
    res.json({ traceUrlTemplate: traceUrlTemplate ?? null, authRequired });
  });

  router.use((req, res, next) => {
    if (bearerMatches(req.headers.authorization, readToken)) return next();
    res.setHeader('www-authenticate', 'Bearer realm="audit"');
    fail(res, 401, {
      code: 'UNAUTHORIZED',
      message: 'a valid bearer token (AUDIT_READ_TOKEN) is required',
    });
  });

  router.get('/records', async (req, res, next) => {
    let parsed: ReturnType<typeof parseRecordQuery>;
    try {
      parsed = parseRecordQuery(req.query, now());
    } catch (error) {
      if (error instanceof AuditQueryError) return badQuery(res, error);
      return next(error);
    }
    try {
      res.json(await store.query(parsed.filters, parsed.page));
    } catch (error) {
      next(error);
    }
  });

  router.get('/traces/:traceId', async (req, res, next) => {
    const traceId = normaliseTraceId(String(req.params.traceId));
    if (traceId === undefined) return badQuery(res, badTraceId());
    try {
      res.json({ traceId, ...(await store.trace(traceId)) });
    } catch (error) {
      next(error);
    }
  });

  router.get('/stats', async (req, res, next) => {
    let window: ReturnType<typeof parseStatsQuery>;
    try {
      window = parseStatsQuery(req.query, now());
    } catch (error) {
      if (error instanceof AuditQueryError) return badQuery(res, error);
      return next(error);
    }
    try {
      res.json(await store.stats(window.since, window.until ?? now()));
    } catch (error) {
      next(error);
    }
  });

  router.use((req, res) => {
    fail(res, 404, { code: 'NOT_FOUND', message: `no audit endpoint ${req.method} ${req.path}` });
  });

  // Store failures: logged with their cause, answered without internals.
  router.use((error: unknown, req: Request, res: Response, _next: NextFunction) => {
    // The router could not percent-decode the trace id of the path (`/traces/%ZZ`): the
    // caller's parameter is at fault, not the store.
    if (error instanceof URIError && req.path.startsWith('/traces/'))
      return badQuery(res, badTraceId());
    // PostgreSQL stopped the read (a lock, a huge scan): the store is fine, this query was not.
    if (error instanceof AuditQueryTimeoutError) {
      logger.warn(
        { path: req.path, timeoutMs: error.timeoutMs },
        'audit query stopped by its statement timeout',
      );
      if (res.headersSent) return;
      return fail(res, 503, {
        code: 'QUERY_TIMEOUT',
        message: `the audit query took longer than ${error.timeoutMs} ms and was stopped: narrow it (a shorter since/until window, more filters) or try again later`,
      });
    }
    logger.error(
      {
        err: error instanceof Error ? { name: error.name, message: error.message } : String(error),
      },
      'audit query failed',
    );
    if (res.headersSent) return;
    fail(res, 503, { code: 'STORE_UNAVAILABLE', message: 'the audit store could not answer' });
  });

  return router;
}
