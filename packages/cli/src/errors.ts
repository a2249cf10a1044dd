/**
 * The CLI's own errors: a string code, the exit code it ends the process with, and the facts
 * (HTTP status, the API's `details`) kept apart from the message.
 */

/** Exit code of each error code: 2 for usage errors, 130 for an interrupted start, 1 for everything else. */
export const CLI_ERROR_CODES = {
  /** A malformed argument or option. */
  USAGE: 2,
  /** `fleet new interceptor` was given a name it cannot use. */
  INVALID_NAME: 2,
  /** The directory to scaffold into exists already. */
  TARGET_EXISTS: 1,
  /** The services directory is not inside a fleet workspace. */
  NOT_A_WORKSPACE: 1,
  /** Nothing answers at the orchestrator URL. */
  ORCHESTRATOR_UNREACHABLE: 1,
  /** The orchestrator did not answer in time. */
  ORCHESTRATOR_TIMEOUT: 1,
  /** The admin API answered 401. */
  ADMIN_UNAUTHORIZED: 1,
  /** The admin API answered another non-2xx status. */
  ADMIN_API_ERROR: 1,
  /** The answer was not what the admin API sends (wrong URL?). */
  UNEXPECTED_RESPONSE: 1,
  /** Something the local fleet needs (Redis, a built service) is missing or did not start. */
  FLEET_UNAVAILABLE: 1,
  /** A signal (Ctrl-C) arrived while the local fleet was starting; what had started is stopped. */
  INTERRUPTED: 130,
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

/** Human lines for an admin API error's `details` (`[{path, message}]`, an object, or text). */
export function formatDetails(details: unknown): string[] {
  if (details === undefined || details === null) return [];
  if (Array.isArray(details)) {
    return details.map((entry) => {
      if (typeof entry === 'object' && entry !== null && 'message' in entry) {
        const { path, message } = entry as { path?: unknown; message: unknown };
        return typeof path === 'string' && path !== ''
          ? `${path}: ${String(message)}`
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
