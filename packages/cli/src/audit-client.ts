/**
 * A small client for the audit-logger's query API (DESIGN.md §3): records, one trace, stats. Every
 * failure becomes a {@link CliError}: `AUDIT_UNREACHABLE`, `INVALID_QUERY` (the API's 400,
 * exit 2) or `AUDIT_API_ERROR`.
 */
import type { AuditStats } from '@fleet/audit';
import { CliError, readApiProblem } from './errors.ts';
import { FLEET_BIN } from './hints.ts';
import { exchangeJson, type ServiceApi, serviceFailure } from './http-json.ts';

/** The audit-logger's API, as its errors name it. */
const AUDIT_API: ServiceApi = {
  name: 'the audit API',
  service: 'the audit-logger',
  flag: '--audit',
  apiCode: 'AUDIT_API_ERROR',
  unreachableCode: 'AUDIT_UNREACHABLE',
};

/** One audit record, as far as the CLI shows it. */
export interface AuditRecordView {
  id: string;
  timestamp: string;
  kind: string;
  traceId?: string;
  phase: string;
  method: string;
  target?: string;
  decision: string;
  status: string;
  durationMs: number;
  principal?: { type: string; id?: string };
  interceptors: Array<{ name: string; outcome: string; durationMs: number; mode: string }>;
  abortReasons: Array<{ interceptor: string; reason: string }>;
}

/** Options for {@link createAuditClient}. */
export interface AuditClientOptions {
  /** The audit-logger's base URL, e.g. `http://127.0.0.1:8083`. */
  baseUrl: string;
  /** `AUDIT_READ_TOKEN`, sent as a bearer token when set. */
  token?: string | undefined;
  fetch: typeof fetch;
  /** Budget for one request. Default 10 000 ms. */
  timeoutMs?: number;
  /**
   * The command line that starts a fleet, for the message when nothing answers: written as
   * the user launched the CLI (`pnpm fleet up`). Default `fleet up`.
   */
  startHint?: string;
}

/** The audit API, one method per endpoint the CLI uses. */
export interface AuditClient {
  readonly baseUrl: string;
  /** `GET /api/audit/config` (needs no token): resolves with what is wrong, or undefined. */
  check(): Promise<CliError | undefined>;
  /** `GET /api/audit/records?...`. */
  records(query: URLSearchParams): Promise<{ records: AuditRecordView[]; nextCursor?: string }>;
  /** `GET /api/audit/traces/{traceId}`. */
  /** `truncated` when the service holds more records than one answer carries. */
  trace(
    traceId: string,
  ): Promise<{ traceId: string; records: AuditRecordView[]; truncated?: boolean }>;
  /** `GET /api/audit/stats?since=&until=`. */
  stats(query: URLSearchParams): Promise<AuditStats>;
}

/** Create a client for the audit API at `baseUrl`. */
export function createAuditClient(options: AuditClientOptions): AuditClient {
  const {
    baseUrl,
    token,
    fetch: doFetch,
    timeoutMs = 10_000,
    startHint = `${FLEET_BIN} up`,
  } = options;

  const get = async <T>(path: string): Promise<T> => {
    const { response: res, json: body } = await exchangeJson(
      doFetch,
      `${baseUrl}${path}`,
      { headers: token ? { authorization: `Bearer ${token}` } : {} },
      timeoutMs,
      (failure) => serviceFailure(failure, AUDIT_API, { baseUrl, path, timeoutMs, startHint }),
    );
    if (res.ok) return body as T;
    const problem = readApiProblem(body);
    if (res.status === 401)
      throw new CliError(
        'AUDIT_API_ERROR',
        token
          ? 'the audit API refused the token (AUDIT_READ_TOKEN)'
          : 'the audit API needs a token (set AUDIT_READ_TOKEN)',
        { status: 401 },
      );
    if (res.status === 400 && problem.code === 'INVALID_QUERY')
      throw new CliError(
        'INVALID_QUERY',
        Array.isArray(problem.details) && problem.details.length > 0
          ? 'the audit API refused the query'
          : `the audit API refused the query: ${problem.message ?? 'invalid'}`,
        { status: 400, details: problem.details },
      );
    // The audit API has every path the CLI asks for: a 404 is another server.
    const wrongServer = res.status === 404 ? `: is ${baseUrl} the audit-logger?` : '';
    throw new CliError(
      'AUDIT_API_ERROR',
      `the audit API answered ${res.status}: ${problem.message ?? (res.statusText || 'error')}${wrongServer}`,
      { status: res.status, details: problem.details },
    );
  };

  return {
    baseUrl,
    check: () =>
      get('/api/audit/config').then(
        () => undefined,
        (error: unknown) => {
          if (error instanceof CliError) return error;
          throw error;
        },
      ),
    records: (query) => get(`/api/audit/records?${query.toString()}`),
    trace: (traceId) => get(`/api/audit/traces/${encodeURIComponent(traceId)}`),
    stats: (query) => get(`/api/audit/stats?${query.toString()}`),
  };
}
