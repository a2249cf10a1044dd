/** The MCP server one client session talks to: SDK `Server` whose requests go to the gateway. */
import {
  INTERCEPTORS_EXTENSION,
  interceptorCapability,
  JsonRpcCode,
  type Principal,
  ProtocolError,
} from '@fleet/core';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { ClientSession, Gateway } from './gateway.ts';
import type { Registry } from './registry.ts';

/** The gateway's identity in `initialize`. */
export const GATEWAY_INFO = { name: 'interceptor-fleet', version: '0.1.0' };

/** Build a session: its SDK server answers initialize/ping itself and hands everything else to the gateway. */
export function createClientSession(
  gateway: Gateway,
  registry: Registry,
  principal?: Principal,
): ClientSession {
  const events = registry.interceptors().flatMap((i) => i.hooks.flatMap((h) => h.events));
  const capability = interceptorCapability(events);
  const server = new Server(GATEWAY_INFO, {
    capabilities: {
      ...gateway.capabilities(),
      extensions: { [INTERCEPTORS_EXTENSION]: capability },
      experimental: { [INTERCEPTORS_EXTENSION]: capability },
    },
    instructions:
      'Interceptor Fleet gateway: tools, prompts and resources of the configured MCP servers, governed by interceptors.',
  });
  const session: ClientSession = { id: undefined, server, subscriptions: new Set() };
  if (principal) session.principal = principal;
  // The SDK answers logging/setLevel locally when logging is declared; the backends must hear it.
  server.removeRequestHandler('logging/setLevel');
  server.fallbackRequestHandler = async (request, extra) => {
    if (request.method === 'interceptors/list') {
      return { interceptors: registry.interceptors().map((i) => i.descriptor) };
    }
    if (request.method === 'interceptor/invoke') {
      throw new ProtocolError(
        JsonRpcCode.METHOD_NOT_FOUND,
        'interceptor/invoke is not exposed by the gateway; call the interceptor service directly',
      );
    }
    return gateway.handle(
      session,
      request.method,
      request.params as Record<string, unknown> | undefined,
      extra,
    );
  };
  server.fallbackNotificationHandler = (notification) => gateway.onClientNotification(notification);
  return session;
}
