/**
 * MCP header values and parameter mirroring (SEP-2243, MCP 2026-07-28).
 *
 * A header value that is not safe as plain ASCII travels as `=?base64?<base64 of UTF-8>?=`.
 * A tool may annotate an input-schema property with `x-mcp-header: <Name>`; an HTTP client
 * then sends that argument, when present, as the header `Mcp-Param-<Name>` so that an
 * intermediary can route on it without parsing the body. {@link paramHeadersOf} checks the
 * annotations of one schema; {@link paramHeaderValues} renders the headers of one call.
 */
import { JsonRpcCode, ProtocolError } from './errors.ts';

const SENTINEL_PREFIX = '=?base64?';
const SENTINEL_SUFFIX = '?=';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** RFC 9110 `token`: one or more `tchar`. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const UNSAFE_ASCII = /[^\x20-\x7e]|^[ \t]|[ \t]$/;

/** True for an RFC 9110 token (a valid header field name). */
export function isHttpToken(value: string): boolean {
  return TOKEN.test(value);
}

/**
 * A header value as sent: as is when it is printable ASCII without surrounding whitespace
 * and does not itself look like the sentinel; otherwise the base64 sentinel of its UTF-8.
 */
export function encodeHeaderValue(value: string): string {
  const looksEncoded = value.startsWith(SENTINEL_PREFIX) && value.endsWith(SENTINEL_SUFFIX);
  if (!looksEncoded && !UNSAFE_ASCII.test(value)) return value;
  return `${SENTINEL_PREFIX}${Buffer.from(value, 'utf8').toString('base64')}${SENTINEL_SUFFIX}`;
}

/**
 * A header value as meant: the decoded text of a complete `=?base64?…?=` sentinel, or the
 * value itself. Undefined when the sentinel holds anything but canonical base64 of UTF-8.
 */
export function decodeHeaderValue(value: string): string | undefined {
  if (
    !value.startsWith(SENTINEL_PREFIX) ||
    !value.endsWith(SENTINEL_SUFFIX) ||
    value.length < SENTINEL_PREFIX.length + SENTINEL_SUFFIX.length
  )
    return value;
  const encoded = value.slice(SENTINEL_PREFIX.length, -SENTINEL_SUFFIX.length);
  if (encoded === '' || !BASE64.test(encoded)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(encoded, 'base64'));
  } catch {
    return undefined;
  }
}

/** The JSON Schema types an `x-mcp-header` may annotate. */
export type ParamHeaderType = 'string' | 'integer' | 'boolean';

/** One mirrored parameter of a tool. */
export interface ParamHeader {
  /** The annotation's value: the header is `Mcp-Param-<name>`. */
  name: string;
  /** Property names from the arguments object down to the parameter. */
  path: string[];
  type: ParamHeaderType;
}

/** The outcome of checking one tool's annotations. */
export type ParamHeadersCheck =
  | { ok: true; headers: ParamHeader[] }
  | { ok: false; reason: string };

/** Options for {@link paramHeadersOf}. */
export interface ParamHeadersOptions {
  /** Deepest subschema nesting walked (default 32). */
  maxDepth?: number;
  /** Most subschemas walked (default 10,000). */
  maxNodes?: number;
}

const ANNOTATION = 'x-mcp-header';
const TYPES = new Set<string>(['string', 'integer', 'boolean']);
/** Keywords holding one subschema, a map of them, or a list of them (never `properties`). */
const SINGLE = ['items', 'additionalProperties', 'unevaluatedProperties', 'unevaluatedItems'];
const SINGLE_MORE = ['not', 'if', 'then', 'else', 'contains', 'propertyNames'];
const MAPS = ['patternProperties', '$defs', 'definitions', 'dependentSchemas'];
// `items` is one subschema (2020-12) or a list of them (draft-07).
const LISTS = ['oneOf', 'anyOf', 'allOf', 'prefixItems', 'items'];

type Schema = Record<string, unknown>;

function isSchema(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function annotatedType(schema: Schema): ParamHeaderType | undefined {
  const { type } = schema;
  if (typeof type === 'string') return TYPES.has(type) ? (type as ParamHeaderType) : undefined;
  // A nullable parameter (`[T, "null"]`): null sends no header.
  if (Array.isArray(type)) {
    const others = type.filter((t) => t !== 'null');
    const [only] = others;
    return others.length === 1 && typeof only === 'string' && TYPES.has(only)
      ? (only as ParamHeaderType)
      : undefined;
  }
  return undefined;
}

function pointer(path: readonly string[]): string {
  return path.length === 0
    ? '(root)'
    : `/${path.map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
}

/**
 * The `x-mcp-header` annotations of a tool's `inputSchema`, or why they are invalid: a value
 * that is not a non-empty HTTP token, two values equal ignoring case, an annotation on
 * anything but a `string`, `integer` or `boolean` property, or one not reachable from the
 * root through `properties` alone (under `items`, `oneOf`/`anyOf`/`allOf`, `not`,
 * `if`/`then`/`else`, `$defs`, ...). The walk is bounded: a schema deeper or larger than
 * the bounds is refused rather than half checked.
 */
export function paramHeadersOf(
  inputSchema: unknown,
  options: ParamHeadersOptions = {},
): ParamHeadersCheck {
  const { maxDepth = 32, maxNodes = 10_000 } = options;
  const headers: ParamHeader[] = [];
  const seen = new Map<string, string>();
  // `path` is the property chain from the root, or null once the walk left `properties`.
  const stack: Array<{ node: unknown; path: string[] | null; at: string[]; depth: number }> = [
    { node: inputSchema, path: [], at: [], depth: 0 },
  ];
  let nodes = 0;
  while (stack.length > 0) {
    const { node, path, at, depth } = stack.pop() as (typeof stack)[number];
    if (!isSchema(node)) continue;
    nodes += 1;
    if (nodes > maxNodes)
      return { ok: false, reason: `inputSchema has more than ${maxNodes} subschemas` };
    if (depth > maxDepth)
      return { ok: false, reason: `inputSchema is nested deeper than ${maxDepth} levels` };
    if (Object.hasOwn(node, ANNOTATION)) {
      const name = node[ANNOTATION];
      const where = pointer(at);
      if (path === null || path.length === 0)
        return {
          ok: false,
          reason: `${ANNOTATION} at ${where} is not on a property reachable through "properties"`,
        };
      if (typeof name !== 'string' || !isHttpToken(name))
        return {
          ok: false,
          reason: `${ANNOTATION} at ${where} must be a non-empty HTTP token (RFC 9110)`,
        };
      const type = annotatedType(node);
      if (type === undefined)
        return {
          ok: false,
          reason: `${ANNOTATION} at ${where} annotates a property that is not a string, integer or boolean`,
        };
      const other = seen.get(name.toLowerCase());
      if (other !== undefined)
        return {
          ok: false,
          reason: `${ANNOTATION} "${name}" at ${where} repeats the header of ${other}`,
        };
      seen.set(name.toLowerCase(), where);
      headers.push({ name, path, type });
    }
    const push = (child: unknown, childPath: string[] | null, key: string[]): void => {
      stack.push({ node: child, path: childPath, at: [...at, ...key], depth: depth + 1 });
    };
    if (isSchema(node.properties)) {
      for (const [key, child] of Object.entries(node.properties))
        push(child, path === null ? null : [...path, key], ['properties', key]);
    }
    for (const keyword of [...SINGLE, ...SINGLE_MORE]) push(node[keyword], null, [keyword]);
    for (const keyword of MAPS) {
      const map = node[keyword];
      if (isSchema(map))
        for (const [key, child] of Object.entries(map)) push(child, null, [keyword, key]);
    }
    for (const keyword of LISTS) {
      const list = node[keyword];
      if (Array.isArray(list))
        for (const [i, child] of list.entries()) push(child, null, [keyword, String(i)]);
    }
  }
  return { ok: true, headers: headers.sort((a, b) => (a.name < b.name ? -1 : 1)) };
}

/** Longest header value (after encoding) mirrored from an argument. */
export const MAX_PARAM_HEADER_BYTES = 8192;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /\p{Cs}/u;

function refuse(param: ParamHeader, reason: string): ProtocolError {
  const parameter = param.path.join('.');
  return new ProtocolError(
    JsonRpcCode.INVALID_PARAMS,
    `Invalid params: argument "${parameter}" cannot be sent as header Mcp-Param-${param.name}: ${reason}`,
    { parameter, header: `Mcp-Param-${param.name}`, reason },
  );
}

function argumentAt(args: unknown, path: readonly string[]): unknown {
  let value: unknown = args;
  for (const key of path)
    value = isSchema(value) && Object.hasOwn(value, key) ? value[key] : undefined;
  return value;
}

/**
 * Check the `Mcp-Param-*` headers a client sent with a call against its arguments: each
 * annotated argument present (not null) must arrive as its header, whose value (decoded)
 * spells it (`true`/`false`, decimal integers, the string itself).
 * @throws {ProtocolError} -32020 naming the header that is missing or disagrees.
 */
export function checkParamHeaders(
  params: readonly ParamHeader[],
  args: unknown,
  headers: Readonly<Record<string, string | string[] | undefined>>,
): void {
  for (const param of params) {
    const value = argumentAt(args, param.path);
    if (value === undefined || value === null) continue;
    const header = `Mcp-Param-${param.name}`;
    const raw = headers[header.toLowerCase()];
    const received = Array.isArray(raw) ? raw.join(', ') : raw;
    const expected = typeof value === 'string' ? value : JSON.stringify(value);
    if (received === undefined || decodeHeaderValue(received.trim()) !== expected)
      throw new ProtocolError(
        JsonRpcCode.HEADER_MISMATCH,
        received === undefined
          ? `Header mismatch: ${header} is missing while argument "${param.path.join('.')}" is present`
          : `Header mismatch: ${header} differs from argument "${param.path.join('.')}"`,
        { header, parameter: param.path.join('.') },
      );
  }
}

/**
 * The `Mcp-Param-*` headers of one call: each annotated argument present (not null) in
 * `args`, rendered (`true`/`false`, decimal integers, strings encoded by
 * {@link encodeHeaderValue}).
 * @throws {ProtocolError} -32602 naming the parameter for a value that cannot travel in a
 * header: control characters (header injection), lone surrogates, an integer outside the
 * safe range, a value of the wrong type, or more than {@link MAX_PARAM_HEADER_BYTES}.
 */
export function paramHeaderValues(
  params: readonly ParamHeader[],
  args: unknown,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const param of params) {
    const value = argumentAt(args, param.path);
    if (value === undefined || value === null) continue;
    let text: string;
    if (param.type === 'string') {
      if (typeof value !== 'string') throw refuse(param, 'not a string');
      if (CONTROL.test(value)) throw refuse(param, 'it contains control characters');
      if (LONE_SURROGATE.test(value)) throw refuse(param, 'it is not well-formed Unicode');
      text = encodeHeaderValue(value);
    } else if (param.type === 'integer') {
      if (typeof value !== 'number' || !Number.isInteger(value))
        throw refuse(param, 'not an integer');
      if (!Number.isSafeInteger(value))
        throw refuse(param, 'it is outside the safe integer range (±(2^53 - 1))');
      text = String(value);
    } else {
      if (typeof value !== 'boolean') throw refuse(param, 'not a boolean');
      text = String(value);
    }
    if (text.length > MAX_PARAM_HEADER_BYTES)
      throw refuse(param, `it is longer than ${MAX_PARAM_HEADER_BYTES} bytes`);
    headers[`mcp-param-${param.name.toLowerCase()}`] = text;
  }
  return headers;
}
