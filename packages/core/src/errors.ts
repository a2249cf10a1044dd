/**
 * The two error families. A {@link FleetError} is local: it carries a string code and never
 * crosses the wire as is. A {@link ProtocolError} is what a peer sees: a JSON-RPC code, a
 * message and structured `data`. {@link toProtocolError} is the one place that converts.
 */

/** JSON-RPC 2.0 error codes used by the fleet. */
export const JsonRpcCode = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
} as const;

/** Each local error code with the JSON-RPC code and HTTP status it maps to. */
export const FLEET_ERROR_CODES = {
  /** A wire message did not have the expected shape. */
  INVALID_WIRE_SHAPE: { jsonrpc: JsonRpcCode.INVALID_PARAMS, http: 400 },
  /** A request named an interceptor the service does not have. */
  UNKNOWN_INTERCEPTOR: { jsonrpc: JsonRpcCode.INVALID_PARAMS, http: 404 },
  /** An override tried to widen an interceptor's hooks. */
  OVERRIDE_WIDENS_HOOKS: { jsonrpc: JsonRpcCode.INVALID_PARAMS, http: 400 },
  /** An interceptor handler threw or returned something unusable. */
  INTERCEPTOR_FAILED: { jsonrpc: JsonRpcCode.INTERNAL_ERROR, http: 500 },
  /** An interceptor did not answer within its time budget. */
  INTERCEPTOR_TIMEOUT: { jsonrpc: JsonRpcCode.INTERNAL_ERROR, http: 504 },
  /** The peer could not be reached or answered with something that is not JSON-RPC. */
  TRANSPORT_ERROR: { jsonrpc: JsonRpcCode.INTERNAL_ERROR, http: 502 },
  /** The peer answered but is not an interceptor server. */
  NOT_AN_INTERCEPTOR_SERVER: { jsonrpc: JsonRpcCode.INTERNAL_ERROR, http: 422 },
  /** Missing or wrong credentials. */
  UNAUTHORIZED: { jsonrpc: JsonRpcCode.INVALID_REQUEST, http: 401 },
  /** The operation was cancelled by its caller. */
  CANCELLED: { jsonrpc: JsonRpcCode.INTERNAL_ERROR, http: 499 },
  /** Anything else: never a client-fault code. */
  INTERNAL: { jsonrpc: JsonRpcCode.INTERNAL_ERROR, http: 500 },
} as const;

/** A local error code. */
export type FleetErrorCode = keyof typeof FLEET_ERROR_CODES;

/** Options for {@link FleetError}. */
export interface FleetErrorOptions {
  /** Structured facts about the failure; becomes the JSON-RPC `data` when converted. */
  data?: Record<string, unknown>;
  /** The underlying error. */
  cause?: unknown;
}

/** A local error with a string code. Branch on `code`, never on `message`. */
export class FleetError extends Error {
  override readonly name: string = 'FleetError';
  readonly code: FleetErrorCode;
  readonly data: Record<string, unknown> | undefined;

  constructor(code: FleetErrorCode, message: string, options: FleetErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.data = options.data;
  }
}

/** One problem found while parsing a wire shape: where, and what. */
export interface WireIssue {
  /** Dotted path into the input, e.g. `hooks[0].phase` (empty for the root). */
  path: string;
  message: string;
}

/** A wire shape failed to parse; `issues` name every offending path. */
export class WireParseError extends FleetError {
  override readonly name = 'WireParseError';
  readonly issues: readonly WireIssue[];

  constructor(what: string, issues: readonly WireIssue[]) {
    const detail = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
    super('INVALID_WIRE_SHAPE', `invalid ${what}: ${detail}`, {
      data: { issues: issues.map((i) => ({ ...i })) },
    });
    this.issues = issues;
  }
}

/** A JSON-RPC error as it travels on the wire. */
export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** An error that a peer sees: JSON-RPC code, message and structured data. */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
  readonly code: number;
  readonly data: unknown;

  constructor(code: number, message: string, data?: unknown, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.data = data;
  }

  /** The wire form of this error. */
  toJSON(): JsonRpcErrorObject {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }
}

/** The JSON-RPC code a local error code maps to. */
export function jsonRpcCodeOf(code: FleetErrorCode): number {
  return FLEET_ERROR_CODES[code].jsonrpc;
}

/** The HTTP status a local error code maps to. */
export function httpStatusOf(code: FleetErrorCode): number {
  return FLEET_ERROR_CODES[code].http;
}

/**
 * Convert anything thrown into the error a peer sees. Protocol errors pass through, fleet
 * errors map through {@link FLEET_ERROR_CODES}, anything else becomes -32603 with no detail
 * beyond its class (an unknown failure is never reported as the client's fault).
 */
export function toProtocolError(error: unknown): ProtocolError {
  if (error instanceof ProtocolError) return error;
  if (error instanceof FleetError) {
    return new ProtocolError(jsonRpcCodeOf(error.code), error.message, error.data, {
      cause: error,
    });
  }
  return new ProtocolError(JsonRpcCode.INTERNAL_ERROR, 'Internal error', undefined, {
    cause: error,
  });
}
