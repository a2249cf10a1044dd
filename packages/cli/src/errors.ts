/**
 * The CLI's own errors: a string code, the exit code it ends the process with, and the facts
 * (HTTP status, the API's `details`) kept apart from the message.
 */

/**
 * Exit code of each error code: 2 for usage errors, 130 and 143 for a command a signal stopped
 * (SIGINT, SIGTERM), 1 for everything else.
 */
export const CLI_ERROR_CODES = {
  /** A malformed argument or option. */
  USAGE: 2,
  /** `fleet new interceptor` was given a name it cannot use. */
  INVALID_NAME: 2,
  /** The directory to scaffold into, or the file `audit export --out` writes, exists already. */
  TARGET_EXISTS: 1,
  /**
   * `audit export --out` names a directory, or a file in a directory that is missing or not
   * writable.
   */
  OUT_UNWRITABLE: 1,
  /** The services directory is not inside a fleet workspace. */
  NOT_A_WORKSPACE: 1,
  /** Nothing answers at the orchestrator URL (or it did not answer in time). */
  ORCHESTRATOR_UNREACHABLE: 1,
  /** The admin API answered 401. */
  ADMIN_UNAUTHORIZED: 1,
  /** The admin API answered another non-2xx status, or a body that is not JSON. */
  ADMIN_API_ERROR: 1,
  /** JSON that is not what the admin API (or, for `fleet demo`, an MCP endpoint) sends: wrong URL? */
  UNEXPECTED_RESPONSE: 1,
  /** Nothing answers at the audit API's URL (or it did not answer in time). */
  AUDIT_UNREACHABLE: 1,
  /** The audit API refused the query's parameters (400 `INVALID_QUERY`): a usage error. */
  INVALID_QUERY: 2,
  /** The audit API answered another non-2xx status (401 included), or a body that is not JSON. */
  AUDIT_API_ERROR: 1,
  /** Nothing answers at the policy-validator's URL (or it did not answer in time). */
  POLICY_UNREACHABLE: 1,
  /** The policy-validator answered another non-2xx status than those below (401 included), or a body that is not JSON. */
  POLICY_API_ERROR: 1,
  /** `fleet pins approve` named a tool without a drift (the service's 404 `NOT_FOUND`). */
  NO_DRIFT: 1,
  /** `fleet pins forget` named a tool that is not pinned (the service's 404 `NOT_FOUND`). */
  NO_PIN: 1,
  /** The drift's seen definition is no longer the `--digest` given (409 `CONFLICT`). */
  PIN_CONFLICT: 1,
  /** The policy-validator cannot reach its pin store, Redis (503 `STORE_UNAVAILABLE`). */
  PIN_STORE_UNAVAILABLE: 1,
  /** `fleet audit trace` found no record of the trace. */
  NO_RECORDS: 1,
  /** Another process's `fleet up` runs from the state directory a fleet was to start in. */
  FLEET_RUNNING: 1,
  /** Something the local fleet needs (Redis, a built service) is missing or did not start. */
  FLEET_UNAVAILABLE: 1,
  /**
   * A signal (Ctrl-C) arrived while the local fleet was starting (what had started is
   * stopped), or SIGINT during `audit export --out` (its temporary file is removed).
   */
  INTERRUPTED: 130,
  /** SIGTERM arrived during `audit export --out` (its temporary file is removed). */
  TERMINATED: 143,
} as const;

/** A {@link CliError} code. */
export type CliErrorCode = keyof typeof CLI_ERROR_CODES;

/** Options for {@link CliError}. */
export interface CliErrorOptions {
  /** The HTTP status the admin API answered with. */
  status?: number;
  /** The `details` of the admin API's error body, shown under the message. */
  details?: unknown;
  cause?: unknown;
}

/** A failure the CLI reports as one line (plus details) and an exit code. */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly code: CliErrorCode;
  readonly exitCode: number;
  readonly status: number | undefined;
  readonly details: unknown;

  constructor(code: CliErrorCode, message: string, options: CliErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.exitCode = CLI_ERROR_CODES[code];
    this.status = options.status;
    this.details = options.details;
  }
}

/** What an API's error body says: its message, its code when it has one, and the details. */
export interface ApiProblem {
  message: string | undefined;
  code: string | undefined;
  details: unknown;
}

/**
 * Read an error body in either shape the fleet's APIs answer with: the admin API's
 * `{error: "message", details?}` and the audit API's `{error: {code, message, issues?}}`
 * (a top-level `issues` is read as well).
 */
export function readApiProblem(body: unknown): ApiProblem {
  const top = (typeof body === 'object' && body !== null ? body : {}) as {
    error?: unknown;
    details?: unknown;
    issues?: unknown;
  };
  if (typeof top.error === 'object' && top.error !== null) {
    const inner = top.error as { code?: unknown; message?: unknown; issues?: unknown };
    return {
      message: typeof inner.message === 'string' ? inner.message : undefined,
      code: typeof inner.code === 'string' ? inner.code : undefined,
      details: inner.issues ?? top.issues ?? top.details,
    };
  }
  return {
    message: typeof top.error === 'string' ? top.error : undefined,
    code: undefined,
    details: top.details ?? top.issues,
  };
}

/**
 * Human lines for an API error's `details`: `[{path, message}]` (or the audit API's
 * `[{parameter, message}]`), an object, or text.
 */
export function formatDetails(details: unknown): string[] {
  if (details === undefined || details === null) return [];
  if (Array.isArray(details)) {
    return details.map((entry) => {
      if (typeof entry === 'object' && entry !== null && 'message' in entry) {
        const { path, parameter, message } = entry as {
          path?: unknown;
          parameter?: unknown;
          message: unknown;
        };
        const where = typeof path === 'string' && path !== '' ? path : parameter;
        return typeof where === 'string' && where !== ''
          ? `${where}: ${String(message)}`
          : String(message);
      }
      return typeof entry === 'string' ? entry : JSON.stringify(entry);
    });
  }
  if (typeof details === 'object') {
    const entries = Object.entries(details as Record<string, unknown>);
    return entries.map(([key, value]) =>
      typeof value === 'string' ? `${key}: ${value}` : `${key}: ${JSON.stringify(value)}`,
    );
  }
  return [String(details)];
}
