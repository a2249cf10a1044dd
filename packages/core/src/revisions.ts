/**
 * MCP protocol revisions on one endpoint: the session-based revisions (2025-11-25 and
 * earlier: `initialize`, then `Mcp-Session-Id`) and the stateless 2026-07-28 revision, where
 * every request carries its protocol version, client info and client capabilities in
 * `params._meta` and mirrors its method (and target) in HTTP headers.
 *
 * {@link classifyRequest} decides which one a POSTed message speaks and checks a stateless
 * request's metadata and headers. It never reads a stateless request as a session one: a
 * message that signals 2026-07-28 either passes every check or is refused.
 */
import { JsonRpcCode, ProtocolError } from './errors.ts';
import { MCP_META_PREFIX, McpMetaKey } from './meta.ts';
import { decodeHeaderValue } from './param-headers.ts';

/** Revisions served statelessly, per request. */
export const STATELESS_PROTOCOL_VERSIONS = ['2026-07-28'] as const;

/** Revisions served in sessions opened by `initialize`, newest first. */
export const SESSION_PROTOCOL_VERSIONS = [
  '2025-11-25',
  '2025-06-18',
  '2025-03-26',
  '2024-11-05',
  '2024-10-07',
] as const;

/** Every revision served, newest first (the `supported` list of -32022). */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly string[] = [
  ...STATELESS_PROTOCOL_VERSIONS,
  ...SESSION_PROTOCOL_VERSIONS,
];

/** The `_meta` keys a 2025-11-25 session may carry; they do not signal a stateless request. */
const SESSION_META_KEYS = new Set(['io.modelcontextprotocol/related-task']);

/** The methods whose target an `Mcp-Name` header mirrors, and the param holding it. */
export const MCP_NAME_PARAM: Readonly<Record<string, 'name' | 'uri'>> = {
  'tools/call': 'name',
  'resources/read': 'uri',
  'prompts/get': 'name',
};

/** MCP logging levels, least severe first. */
export const LOGGING_LEVELS = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
] as const;

/** An MCP logging level. */
export type LoggingLevel = (typeof LOGGING_LEVELS)[number];

/**
 * Whether a log line at `level` is one a client that asked for `threshold` (logging/setLevel,
 * or a stateless request's log level) wants: that level or a more severe one. A line whose
 * level is not an MCP level is not.
 */
export function reachesLogLevel(level: unknown, threshold: LoggingLevel): boolean {
  const rank = LOGGING_LEVELS.indexOf(level as LoggingLevel);
  return rank >= 0 && rank >= LOGGING_LEVELS.indexOf(threshold);
}

/** The more verbose of two levels (the one that lets more lines through). */
export function moreVerbose(a: LoggingLevel, b: LoggingLevel): LoggingLevel {
  return LOGGING_LEVELS.indexOf(a) <= LOGGING_LEVELS.indexOf(b) ? a : b;
}

/** What a stateless request declared about its client. */
export interface StatelessRequestMeta {
  protocolVersion: string;
  clientCapabilities: Record<string, unknown>;
  clientInfo?: { name: string; version: string; [key: string]: unknown };
  /** Least severe log level the client wants as `notifications/message` on this request. */
  logLevel?: LoggingLevel;
}

/** The revision a message speaks. */
export type RequestRevision =
  | { kind: 'session' }
  | { kind: 'stateless'; meta: StatelessRequestMeta };

/** HTTP request headers as node gives them (lower-case names). */
export type HeaderMap = Readonly<Record<string, string | string[] | undefined>>;

/** The parts of a JSON-RPC message {@link classifyRequest} reads. */
export interface ClassifiableMessage {
  method?: unknown;
  id?: unknown;
  params?: unknown;
}

function header(headers: HeaderMap, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const NEWEST_SESSION_VERSION = SESSION_PROTOCOL_VERSIONS[0];

/**
 * True when an `MCP-Protocol-Version` value names a stateless revision: a known one, or any
 * later date than the newest session revision (which the version check then refuses with
 * -32022 instead of mistaking it for a session request).
 */
export function isStatelessVersion(version: string): boolean {
  return (
    (STATELESS_PROTOCOL_VERSIONS as readonly string[]).includes(version) ||
    (DATE.test(version) && version > NEWEST_SESSION_VERSION)
  );
}

function invalidMeta(message: string, key: string): ProtocolError {
  return new ProtocolError(JsonRpcCode.INVALID_PARAMS, `Invalid params: ${message}`, {
    field: `_meta.${key}`,
  });
}

function mismatch(headerName: string, message: string, expected?: string): ProtocolError {
  return new ProtocolError(JsonRpcCode.HEADER_MISMATCH, `Header mismatch: ${message}`, {
    header: headerName,
    ...(expected === undefined ? {} : { expected }),
  });
}

/**
 * Which revision `message` (a POSTed JSON-RPC request or notification) speaks, checking a
 * stateless request's protocol metadata and standard headers.
 *
 * - `initialize` is always a session request.
 * - A `_meta` key with the `io.modelcontextprotocol/` prefix (other than ones a 2025-11-25
 *   session uses) or an `MCP-Protocol-Version` header naming a stateless revision makes it
 *   a stateless request; anything else is a session request.
 *
 * @throws {ProtocolError} for a stateless request that does not hold together:
 * -32602 when `_meta` lacks the protocol version or holds malformed protocol metadata;
 * -32021 `{requiredCapabilities}` when it declares no client capabilities at all; -32020 when `MCP-Protocol-Version`, `Mcp-Method` or `Mcp-Name` is
 * missing or disagrees with the body (header values may be `=?base64?…?=` encoded);
 * -32022 `{supported, requested}` for a revision not served statelessly.
 */
export function classifyRequest(message: ClassifiableMessage, headers: HeaderMap): RequestRevision {
  const method = message.method;
  if (method === 'initialize') return { kind: 'session' };
  const params = isObject(message.params) ? message.params : undefined;
  const meta = isObject(params?._meta) ? params._meta : undefined;
  const headerVersion = header(headers, 'mcp-protocol-version');
  const reserved = Object.keys(meta ?? {}).filter(
    (k) => k.startsWith(MCP_META_PREFIX) && !SESSION_META_KEYS.has(k),
  );
  const statelessHeader = headerVersion !== undefined && isStatelessVersion(headerVersion);
  if (reserved.length === 0 && !statelessHeader) return { kind: 'session' };

  const version = meta?.[McpMetaKey.PROTOCOL_VERSION];
  if (version === undefined)
    throw invalidMeta(
      `a request with MCP protocol metadata must carry _meta["${McpMetaKey.PROTOCOL_VERSION}"]`,
      McpMetaKey.PROTOCOL_VERSION,
    );
  if (typeof version !== 'string')
    throw invalidMeta(
      `_meta["${McpMetaKey.PROTOCOL_VERSION}"] must be a string`,
      McpMetaKey.PROTOCOL_VERSION,
    );
  if (headerVersion === undefined)
    throw mismatch('MCP-Protocol-Version', 'the MCP-Protocol-Version header is missing', version);
  if (headerVersion !== version)
    throw mismatch(
      'MCP-Protocol-Version',
      `MCP-Protocol-Version "${headerVersion.slice(0, 64)}" differs from the body's "${version.slice(0, 64)}"`,
      version,
    );
  if (!(STATELESS_PROTOCOL_VERSIONS as readonly string[]).includes(version))
    throw new ProtocolError(
      JsonRpcCode.UNSUPPORTED_PROTOCOL_VERSION,
      (SESSION_PROTOCOL_VERSIONS as readonly string[]).includes(version)
        ? `Unsupported protocol version: ${version} is served in sessions (initialize), not per request`
        : 'Unsupported protocol version',
      { supported: [...SUPPORTED_PROTOCOL_VERSIONS], requested: version },
    );

  const capabilities = meta?.[McpMetaKey.CLIENT_CAPABILITIES];
  if (capabilities === undefined)
    // The client declared nothing, so it lacks whatever serving the request needs: -32021,
    // as issue #9 specifies (the 2026-07-28 text also allows reading this as malformed).
    throw new ProtocolError(
      JsonRpcCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
      `Missing required client capabilities: a request must declare _meta["${McpMetaKey.CLIENT_CAPABILITIES}"] (an empty object declares none)`,
      { requiredCapabilities: {}, field: `_meta.${McpMetaKey.CLIENT_CAPABILITIES}` },
    );
  if (!isObject(capabilities))
    throw invalidMeta(
      `_meta["${McpMetaKey.CLIENT_CAPABILITIES}"] must be an object`,
      McpMetaKey.CLIENT_CAPABILITIES,
    );
  const out: StatelessRequestMeta = { protocolVersion: version, clientCapabilities: capabilities };
  const clientInfo = meta?.[McpMetaKey.CLIENT_INFO];
  if (clientInfo !== undefined) {
    if (
      !isObject(clientInfo) ||
      typeof clientInfo.name !== 'string' ||
      typeof clientInfo.version !== 'string'
    )
      throw invalidMeta(
        `_meta["${McpMetaKey.CLIENT_INFO}"] must be an object with string name and version`,
        McpMetaKey.CLIENT_INFO,
      );
    out.clientInfo = clientInfo as StatelessRequestMeta['clientInfo'] & object;
  }
  const logLevel = meta?.[McpMetaKey.LOG_LEVEL];
  if (logLevel !== undefined) {
    if (!(LOGGING_LEVELS as readonly unknown[]).includes(logLevel))
      throw invalidMeta(
        `_meta["${McpMetaKey.LOG_LEVEL}"] must be one of ${LOGGING_LEVELS.join(', ')}`,
        McpMetaKey.LOG_LEVEL,
      );
    out.logLevel = logLevel as LoggingLevel;
  }

  const methodHeader = header(headers, 'mcp-method');
  if (typeof method === 'string') {
    if (methodHeader === undefined)
      throw mismatch('Mcp-Method', 'the Mcp-Method header is missing', method);
    if (decodeHeaderValue(methodHeader) !== method)
      throw mismatch('Mcp-Method', "Mcp-Method differs from the body's method", method);
  }
  const nameParam = typeof method === 'string' ? MCP_NAME_PARAM[method] : undefined;
  if (nameParam !== undefined && message.id !== undefined) {
    const target = params?.[nameParam];
    const nameHeader = header(headers, 'mcp-name');
    if (nameHeader === undefined)
      throw mismatch(
        'Mcp-Name',
        `the Mcp-Name header is missing (it mirrors params.${nameParam})`,
        typeof target === 'string' ? target : undefined,
      );
    const decoded = decodeHeaderValue(nameHeader);
    if (decoded === undefined)
      throw mismatch('Mcp-Name', 'Mcp-Name is not valid =?base64?…?= encoding');
    if (decoded !== target)
      throw mismatch(
        'Mcp-Name',
        `Mcp-Name differs from params.${nameParam}`,
        typeof target === 'string' ? target : undefined,
      );
  }
  return { kind: 'stateless', meta: out };
}
