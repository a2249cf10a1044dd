/**
 * One JSON exchange with a fleet HTTP API (admin, audit, policy): a request under a time
 * budget, its body parsed as JSON. Each client turns the ways it can fail into a
 * {@link CliError} of its own codes through {@link serviceFailure}, which words them alike.
 */
import { CliError, type CliErrorCode } from './errors.ts';
import { fetchRefusesPort } from './http-url.ts';

/** Why an exchange gave no JSON answer. */
export type ExchangeFailure =
  /** No answer within the budget. */
  | { kind: 'timeout'; error: unknown }
  /** The request did not get through; `code` is the system error behind it, if any. */
  | { kind: 'unreachable'; error: unknown; code: string | undefined }
  /** An answer whose body is not JSON. */
  | { kind: 'not-json'; status: number };

/** The system error code (`ECONNREFUSED`, ...) behind a failed fetch, if there is one. */
export function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const errors = (current as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.length > 0) current = errors[0];
    else current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * `url` fetched with `init` within `timeoutMs`; the answer and its body as JSON (undefined
 * when empty). @throws what `failed` makes of an {@link ExchangeFailure}.
 */
export async function exchangeJson(
  doFetch: typeof fetch,
  url: string,
  init: RequestInit,
  timeoutMs: number,
  failed: (failure: ExchangeFailure) => CliError,
): Promise<{ response: Response; json: unknown }> {
  let response: Response;
  try {
    response = await doFetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch (error) {
    const name = (error as { name?: unknown }).name;
    throw failed(
      name === 'TimeoutError' || name === 'AbortError'
        ? { kind: 'timeout', error }
        : { kind: 'unreachable', error, code: causeCode(error) },
    );
  }
  const text = await response.text();
  if (text === '') return { response, json: undefined };
  try {
    return { response, json: JSON.parse(text) };
  } catch {
    throw failed({ kind: 'not-json', status: response.status });
  }
}

/** How a fleet service's API is named in the errors {@link serviceFailure} makes. */
export interface ServiceApi {
  /** As a sentence names it: `the audit API`. */
  name: string;
  /** The service a non-JSON answer asks whether the URL is: `the audit-logger`. */
  service: string;
  /** The option that points the CLI at it: `--audit`. */
  flag: string;
  /** For an answer that is not JSON. */
  apiCode: CliErrorCode;
  /** For no answer (timeout, connection refused, ...). */
  unreachableCode: CliErrorCode;
}

/**
 * The system errors of a request that found nothing listening at the URL (or no such host):
 * the fleet may not be running. Any other (a TLS failure, say) is named without that hint.
 */
const NOTHING_LISTENS_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);

/** The port of `baseUrl` (its scheme's default when it names none). */
function portOf(baseUrl: string): number {
  const url = new URL(baseUrl);
  return url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
}

/**
 * The error for an {@link ExchangeFailure} of `api` at `baseUrl` (the admin, audit and policy
 * clients word them alike); `startHint` is how to start the fleet, as the CLI was launched.
 * The system error behind a failed request, if any, is its `details.reason` (`BAD_PORT` for a
 * port fetch refuses to connect to).
 */
export function serviceFailure(
  failure: ExchangeFailure,
  api: ServiceApi,
  where: { baseUrl: string; path: string; timeoutMs: number; startHint: string },
): CliError {
  const { baseUrl, path, timeoutMs, startHint } = where;
  if (failure.kind === 'not-json')
    return new CliError(
      api.apiCode,
      `${baseUrl}${path} answered ${failure.status} with a body that is not JSON: is ${baseUrl} ${api.service}?`,
      { status: failure.status },
    );
  const code = failure.kind === 'unreachable' ? failure.code : causeCode(failure.error);
  const badPort = failure.kind === 'unreachable' ? fetchRefusesPort(portOf(baseUrl)) : undefined;
  if (badPort)
    return new CliError(
      api.unreachableCode,
      `cannot reach ${api.name} at ${baseUrl}: ${badPort}; use another port`,
      { cause: failure.error, details: { reason: 'BAD_PORT' } },
    );
  const message =
    failure.kind === 'timeout'
      ? `${api.name} at ${baseUrl} did not answer within ${timeoutMs} ms`
      : code === undefined || NOTHING_LISTENS_CODES.has(code)
        ? `cannot reach ${api.name} at ${baseUrl}: is the fleet running? (${startHint}, or pass ${api.flag})`
        : `cannot reach ${api.name} at ${baseUrl}`;
  return new CliError(api.unreachableCode, message, {
    cause: failure.error,
    ...(code === undefined ? {} : { details: { reason: code } }),
  });
}
