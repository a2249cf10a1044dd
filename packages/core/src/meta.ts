/**
 * Reserved `_meta` keys. MCP reserves every `_meta` key whose prefix (the dot-separated
 * labels before the first `/`) has a label `modelcontextprotocol` or `mcp`, e.g.
 * `io.modelcontextprotocol/protocolVersion`. Such keys speak for the party that sent the
 * message, so a gateway strips them where a message crosses it: a client's reach only the
 * gateway, a backend's never reach the client as if the gateway had said them. Unprefixed
 * keys (`progressToken`, `traceparent`, `tracestate`, `baggage`) and custom prefixes pass.
 */

/** The reserved `_meta` keys of MCP 2026-07-28 requests and results. */
export const McpMetaKey = {
  PROTOCOL_VERSION: 'io.modelcontextprotocol/protocolVersion',
  CLIENT_INFO: 'io.modelcontextprotocol/clientInfo',
  CLIENT_CAPABILITIES: 'io.modelcontextprotocol/clientCapabilities',
  LOG_LEVEL: 'io.modelcontextprotocol/logLevel',
  SERVER_INFO: 'io.modelcontextprotocol/serverInfo',
} as const;

/** The prefix of the MCP specification's own `_meta` keys. */
export const MCP_META_PREFIX = 'io.modelcontextprotocol/';

/** True for a `_meta` key reserved for MCP itself. */
export function isReservedMetaKey(key: string): boolean {
  const slash = key.indexOf('/');
  if (slash <= 0) return false;
  return key
    .slice(0, slash)
    .toLowerCase()
    .split('.')
    .some((label) => label === 'modelcontextprotocol' || label === 'mcp');
}

type Meta = Record<string, unknown>;

function isObject(value: unknown): value is Meta {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * `message` (a request's `params`, a notification's `params` or a result) without the
 * reserved keys of its `_meta`; the same object when there are none. A `_meta` left empty is
 * dropped.
 */
export function withoutReservedMeta<T extends Meta>(message: T): T;
export function withoutReservedMeta<T extends Meta>(message: T | undefined): T | undefined;
export function withoutReservedMeta<T extends Meta>(message: T | undefined): T | undefined {
  const meta = message?._meta;
  if (message === undefined || !isObject(meta)) return message;
  const keys = Object.keys(meta);
  if (!keys.some(isReservedMetaKey)) return message;
  const kept: Meta = {};
  for (const key of keys) if (!isReservedMetaKey(key)) kept[key] = meta[key];
  const out: Meta = { ...message };
  if (Object.keys(kept).length > 0) out._meta = kept;
  else delete out._meta;
  return out as T;
}
