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
  /** MCP 2026-07-28: an `MCP-Protocol-Version`, `Mcp-Method` or `Mcp-Name` header disagrees with the body. */
  HEADER_MISMATCH: -32020,
  /** MCP 2026-07-28: serving the request needs a client capability it did not declare. */
  MISSING_REQUIRED_CLIENT_CAPABILITY: -32021,
  /** MCP 2026-07-28: the request names a protocol revision the server does not serve. */
  UNSUPPORTED_PROTOCOL_VERSION: -32022,
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

/**
 * Each way the MCP HTTP ingress answers with an error, as its HTTP status and JSON-RPC code:
 * the one table the ingress (guards, session transport, stateless requests) answers from.
 */
export const HTTP_ERROR_CODES = {
  /** The body is not JSON (or not UTF-8). */
  PARSE_ERROR: { http: 400, jsonrpc: JsonRpcCode.PARSE_ERROR },
  /** JSON that is not an acceptable JSON-RPC message (batch, primitive, bad envelope, no session). */
  INVALID_REQUEST: { http: 400, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** A request whose params (or required protocol metadata) are malformed. */
  INVALID_PARAMS: { http: 400, jsonrpc: JsonRpcCode.INVALID_PARAMS },
  /** A standard MCP header disagrees with the body, or is missing. */
  HEADER_MISMATCH: { http: 400, jsonrpc: JsonRpcCode.HEADER_MISMATCH },
  /** Serving the request needs a client capability it did not declare. */
  MISSING_REQUIRED_CLIENT_CAPABILITY: {
    http: 400,
    jsonrpc: JsonRpcCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
  },
  /** A protocol revision the gateway does not serve. */
  UNSUPPORTED_PROTOCOL_VERSION: { http: 400, jsonrpc: JsonRpcCode.UNSUPPORTED_PROTOCOL_VERSION },
  /** Missing or invalid credentials. */
  UNAUTHORIZED: { http: 401, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** A foreign Host or Origin, or a session of another principal. */
  FORBIDDEN: { http: 403, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** An `Mcp-Session-Id` the gateway does not know (expired or never issued). */
  SESSION_NOT_FOUND: { http: 404, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** A method the gateway does not serve (a stateless request). */
  METHOD_NOT_FOUND: { http: 404, jsonrpc: JsonRpcCode.METHOD_NOT_FOUND },
  /** An HTTP method `/mcp` does not serve. */
  METHOD_NOT_ALLOWED: { http: 405, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** An `Accept` header without the media types the transport needs. */
  NOT_ACCEPTABLE: { http: 406, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** A second standalone stream on one session. */
  CONFLICT: { http: 409, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** A body over the configured limit. */
  PAYLOAD_TOO_LARGE: { http: 413, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** A content encoding or charset the ingress cannot read. */
  UNSUPPORTED_MEDIA_TYPE: { http: 415, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** A client over its share (e.g. the sessions one principal may hold). */
  TOO_MANY_REQUESTS: { http: 429, jsonrpc: JsonRpcCode.INVALID_REQUEST },
  /** The gateway failed. */
  INTERNAL: { http: 500, jsonrpc: JsonRpcCode.INTERNAL_ERROR },
  /** The gateway cannot take more work (too many sessions). */
  UNAVAILABLE: { http: 503, jsonrpc: JsonRpcCode.INTERNAL_ERROR },
} as const satisfies Record<string, { http: number; jsonrpc: number }>;

/** One way the HTTP ingress answers with an error. */
export type HttpErrorCode = keyof typeof HTTP_ERROR_CODES;

/**
 * The HTTP status for a JSON-RPC error that answers a request, where the transport lets the
 * status vary (a plain-JSON answer to a stateless request): 403 for an interceptor's denial
 * (-32602 whose `data` lists `validationErrors`, DESIGN.md §2), else the status of the
 * {@link HTTP_ERROR_CODES} entry that owns `code`, when exactly one does (-32700, -32602,
 * -32601, -32020..-32022); otherwise 200 and the body alone carries the error (e.g.
 * -32603, which is a fault of the gateway or a backend, not of the HTTP exchange).
 */
export function httpStatusOfJsonRpcError(code: number, data?: unknown): number {
  if (code === JsonRpcCode.INVALID_PARAMS && isDenial(data)) return 403;
  return STATUS_OF_JSONRPC.get(code) ?? 200;
}

/** Whether an error's `data` is an interceptor denial's (it lists `validationErrors`). */
export function isDenial(data: unknown): boolean {
  return (
    typeof data === 'object' &&
    data !== null &&
    Array.isArray((data as { validationErrors?: unknown }).validationErrors)
  );
}

/** JSON-RPC code → HTTP status, for the codes that exactly one table entry owns. */
const STATUS_OF_JSONRPC: ReadonlyMap<number, number> = (() => {
  const statuses = new Map<number, Set<number>>();
  for (const { http, jsonrpc } of Object.values(HTTP_ERROR_CODES)) {
    statuses.set(jsonrpc, (statuses.get(jsonrpc) ?? new Set()).add(http));
  }
  return new Map(
    [...statuses].flatMap(([code, set]) => (set.size === 1 ? [[code, [...set][0] as number]] : [])),
  );
})();

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
