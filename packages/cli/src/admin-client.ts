/**
 * A small client for the orchestrator's admin API (DESIGN.md §3). Every failure becomes a
 * {@link CliError} whose message says what to do about it: `ORCHESTRATOR_UNREACHABLE` (no
 * answer, or none in time) and `ADMIN_API_ERROR` (an answer that is not JSON), worded as the
 * audit and policy clients word theirs, `ADMIN_UNAUTHORIZED` (401), `ADMIN_API_ERROR` (another
 * non-2xx status) or `UNEXPECTED_RESPONSE` (JSON that is not the admin API's).
 */
import { CliError, readApiProblem } from './errors.ts';
import { FLEET_BIN } from './hints.ts';
import { exchangeJson, type ServiceApi, serviceFailure } from './http-json.ts';

/** Options for {@link createAdminClient}. */
export interface AdminClientOptions {
  /** The orchestrator's base URL, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <token>` when set. */
  token?: string | undefined;
  fetch: typeof fetch;
  /** Budget for one admin request. Default 30 000 ms (registration contacts the service). */
  timeoutMs?: number;
  /**
   * The command line that starts a fleet, for the message when nothing answers: written as
   * the user launched the CLI (`pnpm fleet up`). Default `fleet up`.
   */
  startHint?: string;
}

/** An interceptor descriptor as the admin API shows it (the wire `InterceptorInfo`). */
export interface AdminInterceptorInfo {
  name: string;
  type: 'validation' | 'mutation';
  hooks: Array<{ events: string[]; phase: string }>;
  mode?: string;
  failOpen?: boolean;
  priorityHint?: number | { request?: number; response?: number };
  description?: string;
  version?: string;
}

/** `POST /admin/services` answer. */
export interface RegisteredService {
  id: string;
  url: string;
  interceptors: AdminInterceptorInfo[];
  status?: string;
  source?: string;
  /** The overrides in force (orchestrators since session 9 answer with them). */
  overrides?: Record<string, Record<string, unknown>>;
  /** Whether a token is stored (never the token). */
  hasToken?: boolean;
}

/** One entry of `GET /admin/services`. */
export interface ServiceEntry {
  id: string;
  url: string;
  source: string;
  status: string;
  interceptors: AdminInterceptorInfo[];
  overrides?: Record<string, unknown>;
  lastError?: string;
}

/** One interceptor of a chain stage. */
export interface ChainEntry {
  name: string;
  service: string;
  type: string;
  mode: string;
  priority: number;
  failOpen: boolean;
  timeoutMs: number | null;
}

/** `GET /admin/chain` answer. */
export interface ChainView {
  event: string;
  phase: string;
  stages: Array<{
    kind: 'validators' | 'mutators';
    /** Started together with the validators (`chain.speculativeMutators`). */
    speculative?: boolean;
    interceptors: ChainEntry[];
  }>;
  note?: string;
}

/** A registration request. */
export interface RegisterRequest {
  url: string;
  token?: string;
  overrides?: Record<string, Record<string, unknown>>;
}

/** The admin API, one method per endpoint. */
export interface AdminClient {
  readonly baseUrl: string;
  /** `POST /admin/services`; `created` is false when the URL was registered already. */
  register(request: RegisterRequest): Promise<{ created: boolean; service: RegisteredService }>;
  /** `DELETE /admin/services/{id}`. */
  unregister(id: string): Promise<void>;
  /** `GET /admin/services`. */
  services(): Promise<{ services: ServiceEntry[] }>;
  /** `GET /admin/chain?event=&phase=`. */
  chain(event: string, phase: string): Promise<ChainView>;
}

/** The orchestrator's admin API, as its errors name it. */
const ADMIN_API: ServiceApi = {
  name: 'the orchestrator',
  service: 'the orchestrator',
  flag: '--orchestrator',
  apiCode: 'ADMIN_API_ERROR',
  unreachableCode: 'ORCHESTRATOR_UNREACHABLE',
};

/** Create a client for the admin API at `baseUrl`. */
export function createAdminClient(options: AdminClientOptions): AdminClient {
  const { token, fetch: doFetch, timeoutMs = 30_000, startHint = `${FLEET_BIN} up` } = options;
  const baseUrl = options.baseUrl.replace(/\/+$/, '');

  const call = async (
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: unknown }> => {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const { response, json } = await exchangeJson(
      doFetch,
      `${baseUrl}${path}`,
      { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) },
      timeoutMs,
      (failure) => serviceFailure(failure, ADMIN_API, { baseUrl, path, timeoutMs, startHint }),
    );
    if (response.status === 401) {
      throw new CliError(
        'ADMIN_UNAUTHORIZED',
        token
          ? 'the admin API refused the token (set FLEET_ADMIN_TOKEN or --admin-token)'
          : 'the admin API needs a token (set FLEET_ADMIN_TOKEN or --admin-token)',
        { status: 401 },
      );
    }
    if (response.status < 200 || response.status >= 300) {
      const problem = readApiProblem(json);
      const reason = problem.message ?? (response.statusText || 'error');
      throw new CliError(
        'ADMIN_API_ERROR',
        `the orchestrator answered ${response.status}: ${reason}`,
        { status: response.status, details: problem.details },
      );
    }
    return { status: response.status, json };
  };

  const expectObject = <T>(json: unknown, path: string, key: string): T => {
    if (typeof json !== 'object' || json === null || !(key in json)) {
      throw new CliError(
        'UNEXPECTED_RESPONSE',
        `${baseUrl}${path} did not answer like the admin API (no "${key}"): is ${baseUrl} the orchestrator?`,
      );
    }
    return json as T;
  };

  return {
    baseUrl,
    async register(request) {
      const { status, json } = await call('POST', '/admin/services', request);
      return {
        created: status === 201,
        service: expectObject<RegisteredService>(json, '/admin/services', 'id'),
      };
    },
    async unregister(id) {
      await call('DELETE', `/admin/services/${encodeURIComponent(id)}`);
    },
    async services() {
      const { json } = await call('GET', '/admin/services');
      return expectObject<{ services: ServiceEntry[] }>(json, '/admin/services', 'services');
    },
    async chain(event, phase) {
      const query = new URLSearchParams({ event, phase });
      const path = `/admin/chain?${query.toString()}`;
      const { json } = await call('GET', path);
      return expectObject<ChainView>(json, path, 'stages');
    },
  };
}
