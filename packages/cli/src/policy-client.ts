/**
 * A small client for the policy-validator's tool pinning endpoints: `GET /policy/pins`,
 * `POST /policy/pins/{tool}/approve[?digest=]` and `DELETE /policy/pins/{tool}`. Every failure
 * becomes a {@link CliError}: `POLICY_UNREACHABLE`, `NO_DRIFT` (404 of an approval), `NO_PIN`
 * (404 of a forget), `PIN_CONFLICT` (409), `USAGE` (400), `PIN_STORE_UNAVAILABLE` (503) or
 * `POLICY_API_ERROR`.
 */
import { type ApiProblem, CliError, readApiProblem } from './errors.ts';
import { FLEET_BIN } from './hints.ts';
import { exchangeJson, type ServiceApi, serviceFailure } from './http-json.ts';

/** The policy-validator's API, as its errors name it. */
const POLICY_API: ServiceApi = {
  name: 'the policy-validator',
  service: 'the policy-validator',
  flag: '--policy',
  apiCode: 'POLICY_API_ERROR',
  unreachableCode: 'POLICY_UNREACHABLE',
};

/** A pinned tool definition: its digest (SHA-256 hex) and when it was pinned (ISO 8601). */
export interface ToolPinView {
  tool: string;
  digest: string;
  pinnedAt: string;
}

/** A tool whose listed definition differs from its pin: hidden and refused until approved. */
export interface ToolDriftView {
  tool: string;
  /** The pinned definition's digest. */
  pinned: string;
  /** The digest of the last different definition seen: what approving pins. */
  seen: string;
  /** When a different definition was first seen, ISO 8601. */
  firstSeen: string;
}

/** `GET /policy/pins`: whether the policy turns pinning on, and the store's pins and drifts. */
export interface PinsView {
  enabled: boolean;
  pins: ToolPinView[];
  drifts: ToolDriftView[];
}

/** Options for {@link createPolicyClient}. */
export interface PolicyClientOptions {
  /** The policy-validator's base URL, e.g. `http://127.0.0.1:8082`. */
  baseUrl: string;
  /** The service's `FLEET_TOKEN`, sent as a bearer token when set. */
  token?: string | undefined;
  fetch: typeof fetch;
  /** Budget for one request. Default 10 000 ms. */
  timeoutMs?: number;
  /**
   * `fleet <words>` as a hint that works as printed (the CLI as the user launched it, with
   * its `--state-dir`). Default: `fleet <words>`.
   */
  hint?: (words: string) => string;
}

/** The policy-validator's pinning endpoints. */
export interface PolicyClient {
  readonly baseUrl: string;
  /** `GET /policy/pins`. */
  pins(): Promise<PinsView>;
  /** `POST /policy/pins/{tool}/approve[?digest=]`: the new pin. */
  approve(tool: string, digest?: string): Promise<ToolPinView>;
  /**
   * `DELETE /policy/pins/{tool}`: the tool's pin and any drift removed (its next listing pins
   * it afresh).
   */
  forget(tool: string): Promise<void>;
  /** The error of an approval the service refused with 404 `NOT_FOUND`: `tool` has no drift. */
  noDrift(tool: string): CliError;
}

/** Create a client for the policy-validator at `baseUrl`. */
export function createPolicyClient(options: PolicyClientOptions): PolicyClient {
  const {
    baseUrl,
    token,
    fetch: doFetch,
    timeoutMs = 10_000,
    hint = (words: string) => `${FLEET_BIN} ${words}`,
  } = options;

  /**
   * The JSON answer of `method path`. A non-2xx answer becomes `refused(status, problem)`'s
   * error when it makes one, else the generic one for its status.
   */
  const exchange = async (
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    refused: (status: number, problem: ApiProblem) => CliError | undefined = () => undefined,
  ): Promise<unknown> => {
    const { response, json } = await exchangeJson(
      doFetch,
      `${baseUrl}${path}`,
      { method, headers: token ? { authorization: `Bearer ${token}` } : {} },
      timeoutMs,
      (failure) =>
        serviceFailure(failure, POLICY_API, { baseUrl, path, timeoutMs, startHint: hint('up') }),
    );
    if (response.ok) return json;
    const problem = readApiProblem(json);
    const status = response.status;
    const said = problem.message ?? (response.statusText || 'error');
    const special = refused(status, problem);
    if (special) throw special;
    if (status === 401)
      throw new CliError(
        'POLICY_API_ERROR',
        token
          ? `the policy-validator at ${baseUrl} refused the token (FLEET_TOKEN)`
          : `the policy-validator at ${baseUrl} needs a token (set FLEET_TOKEN to its FLEET_TOKEN)`,
        { status },
      );
    if (status === 503 && problem.code === 'STORE_UNAVAILABLE')
      throw new CliError(
        'PIN_STORE_UNAVAILABLE',
        `the policy-validator at ${baseUrl} cannot reach its tool pin store: ${said} (is Redis running at the service's REDIS_URL?)`,
        { status },
      );
    // Only a service without the pinning endpoints answers 404 without our error code.
    const wrongServer =
      status === 404 && problem.code !== 'NOT_FOUND'
        ? `: is ${baseUrl} the policy-validator (one with tool pinning)?`
        : '';
    throw new CliError(
      'POLICY_API_ERROR',
      `the policy-validator answered ${status}: ${said}${wrongServer}`,
      {
        status,
        details: problem.details,
      },
    );
  };

  const noDrift = (tool: string) =>
    new CliError(
      'NO_DRIFT',
      `tool "${tool}" has no drift to approve at ${baseUrl}: nothing changed since it was pinned, or it was never listed (${hint('pins')} shows the pins and drifts)`,
      { status: 404 },
    );

  return {
    baseUrl,
    noDrift,
    pins: async () => (await exchange('GET', '/policy/pins')) as PinsView,
    async approve(tool, digest) {
      const query = digest === undefined ? '' : `?digest=${digest}`;
      const path = `/policy/pins/${encodeURIComponent(tool)}/approve${query}`;
      return (await exchange('POST', path, (status, problem) => {
        if (status === 404 && problem.code === 'NOT_FOUND') return noDrift(tool);
        if (status === 409 && problem.code === 'CONFLICT')
          return new CliError(
            'PIN_CONFLICT',
            `tool "${tool}" changed again since ${shortDigest(digest ?? '')} was reviewed: nothing approved; review its new definition (${hint('pins')} shows its digest) and approve that one`,
            { status, details: { reviewed: digest } },
          );
        if (status === 400)
          return new CliError(
            'USAGE',
            `the policy-validator refused the request: ${problem.message ?? 'invalid'}`,
            { status },
          );
        return undefined;
      })) as ToolPinView;
    },
    async forget(tool) {
      await exchange('DELETE', `/policy/pins/${encodeURIComponent(tool)}`, (status, problem) =>
        status === 404 && problem.code === 'NOT_FOUND'
          ? new CliError(
              'NO_PIN',
              `tool "${tool}" is not pinned at ${baseUrl}: nothing to forget (${hint('pins')} shows the pins and drifts)`,
              { status },
            )
          : undefined,
      );
    },
  };
}

/** Hex digits of a digest the tables show. */
export const SHORT_DIGEST_LENGTH = 12;

/** The first {@link SHORT_DIGEST_LENGTH} hex digits of `digest`. */
export function shortDigest(digest: string): string {
  return digest.slice(0, SHORT_DIGEST_LENGTH);
}
