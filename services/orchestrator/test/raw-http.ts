/** Raw HTTP against `/mcp` for tests that need exact statuses, headers and envelopes. */
import { request } from 'node:http';

/** One JSON-RPC message as received. */
export interface Envelope {
  jsonrpc?: unknown;
  id?: unknown;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown> & { _meta?: Record<string, unknown> };
  error?: { code: number; message: string; data?: unknown };
}

/** A raw answer: status, headers, the final message and any SSE messages before it. */
export interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The JSON body, or the last SSE message. */
  json: Envelope;
  /** Every SSE message in order (empty for a plain-JSON answer). */
  events: Envelope[];
  text: string;
}

/** POST `body` to `url` with MCP's Accept header (and `headers`), through node:http. */
export function rawPost(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  options: { signal?: AbortSignal; method?: string } = {},
): Promise<RawReply> {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: options.method ?? 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(options.method === undefined || options.method === 'POST'
            ? { 'content-length': Buffer.byteLength(payload) }
            : {}),
          ...headers,
        },
        ...(options.signal ? { signal: options.signal } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const sse = String(res.headers['content-type'] ?? '').startsWith('text/event-stream');
          const events = sse
            ? text
                .split('\n')
                .filter((l) => l.startsWith('data: '))
                .map((l) => JSON.parse(l.slice(6)) as Envelope)
            : [];
          let json: Envelope = {};
          try {
            json = sse ? (events.at(-1) ?? {}) : (JSON.parse(text) as Envelope);
          } catch {
            // empty (202) or not JSON
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, json, events, text });
        });
      },
    );
    req.on('error', reject);
    if (options.method === undefined || options.method === 'POST') req.end(payload);
    else req.end();
  });
}

/** The stateless protocol revision. */
export const MODERN = '2026-07-28';

/** The `_meta` a 2026-07-28 client puts on every request. */
export function modernMeta(
  capabilities: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientInfo': { name: 'raw-modern', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': capabilities,
    ...extra,
  };
}

/** A complete 2026-07-28 request: its body and the headers that mirror it. */
export function modernRequest(
  method: string,
  params: Record<string, unknown> = {},
  options: { id?: string | number; meta?: Record<string, unknown> } = {},
): { body: Record<string, unknown>; headers: Record<string, string> } {
  const headers: Record<string, string> = { 'mcp-protocol-version': MODERN, 'mcp-method': method };
  const target =
    method === 'resources/read'
      ? params.uri
      : method === 'tools/call' || method === 'prompts/get'
        ? params.name
        : undefined;
  if (typeof target === 'string')
    headers['mcp-name'] = /^[\x20-\x7e]*$/.test(target)
      ? target
      : `=?base64?${Buffer.from(target).toString('base64')}?=`;
  return {
    body: {
      jsonrpc: '2.0',
      id: options.id ?? 1,
      method,
      params: { ...params, _meta: { ...modernMeta(), ...options.meta } },
    },
    headers,
  };
}

/** Send {@link modernRequest} to `url`, with extra or overriding headers. */
export function postModern(
  url: string,
  method: string,
  params: Record<string, unknown> = {},
  options: {
    id?: string | number;
    meta?: Record<string, unknown>;
    headers?: Record<string, string>;
    signal?: AbortSignal;
  } = {},
): Promise<RawReply> {
  const { body, headers } = modernRequest(method, params, options);
  return rawPost(
    url,
    body,
    { ...headers, ...options.headers },
    options.signal ? { signal: options.signal } : {},
  );
}
