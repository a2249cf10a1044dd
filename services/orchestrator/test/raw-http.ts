/** Raw HTTP against `/mcp` for tests that need exact statuses, headers and envelopes. */
import {
  type RawReply,
  rawPost,
  SESSION_INIT,
  SESSION_VERSION,
} from '@fleet/interceptor-kit/testing';
import { expect } from 'vitest';

export type { Envelope, RawReply } from '@fleet/interceptor-kit/testing';
export { rawPost, SESSION_INIT, SESSION_VERSION };

/**
 * Open a session with raw requests (`initialize`, then `notifications/initialized`) and
 * return the headers its later requests carry.
 */
export async function openRawSession(url: string): Promise<Record<string, string>> {
  const init = await rawPost(url, JSON.stringify(SESSION_INIT));
  expect(init.status).toBe(200);
  const sessionId = String(init.headers['mcp-session-id'] ?? '');
  expect(sessionId).not.toBe('');
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': SESSION_VERSION };
  const ready = await rawPost(
    url,
    JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    headers,
  );
  expect(ready.status).toBe(202);
  return headers;
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
