/** The MCP server one client session talks to: SDK `Server` whose requests go to the gateway. */
import {
  INTERCEPTORS_EXTENSION,
  interceptorCapability,
  JsonRpcCode,
  type Principal,
  ProtocolError,
} from '@fleet/core';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  ErrorCode,
  McpError,
  type Result,
  type ServerCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import type { ClientSession, Gateway, RequestContext } from './gateway.ts';
import type { Registry } from './registry.ts';
import type { DirectRequestHandler } from './session-transport.ts';

/** The gateway's identity in `initialize` (and in `_meta` of stateless results). */
export const GATEWAY_INFO = { name: 'interceptor-fleet', version: '0.1.0' };

/** What the gateway tells clients about itself. */
export const GATEWAY_INSTRUCTIONS =
  'Interceptor Fleet gateway: tools, prompts and resources of the configured MCP servers, governed by interceptors.';

/** The capabilities the gateway declares: the backends' union plus the interceptor extension. */
export function gatewayCapabilities(gateway: Gateway, registry: Registry): ServerCapabilities {
  const events = registry.interceptors().flatMap((i) => i.hooks.flatMap((h) => h.events));
  const capability = interceptorCapability(events);
  return {
    ...gateway.capabilities(),
    extensions: { [INTERCEPTORS_EXTENSION]: capability },
    experimental: { [INTERCEPTORS_EXTENSION]: capability },
  };
}

/**
 * A client request the SDK server does not answer itself (everything but initialize and
 * ping), for sessions and stateless requests alike: the interceptor extension's methods
 * here, everything else through the gateway.
 */
export function handleClientRequest(
  gateway: Gateway,
  registry: Registry,
  session: ClientSession,
  method: string,
  params: Record<string, unknown> | undefined,
  context: RequestContext,
): Promise<Result> {
  if (method === 'interceptors/list') {
    return Promise.resolve({ interceptors: registry.interceptors().map((i) => i.descriptor) });
  }
  if (method === 'interceptor/invoke') {
    return Promise.reject(
      new ProtocolError(
        JsonRpcCode.METHOD_NOT_FOUND,
        'interceptor/invoke is not exposed by the gateway; call the interceptor service directly',
      ),
    );
  }
  return gateway.handle(session, method, withoutTaskAugmentation(params), context);
}

/**
 * The params of a request as the gateway processes it: without task augmentation. The
 * gateway declares no `tasks` capability, and a receiver that does not declare it for a
 * request type MUST process such requests normally, ignoring the `task` metadata (MCP
 * 2025-11-25, Tasks: Behavior Requirements). Nor does it reach interceptors or backends: a
 * backend with tasks would answer with a task the client cannot follow through the gateway.
 */
export function withoutTaskAugmentation(
  params: Record<string, unknown> | undefined,
): Record<string, unknown> | undefined {
  if (params === undefined || params === null || !('task' in params)) return params;
  const { task: _ignored, ...rest } = params;
  return rest;
}

/**
 * The SDK server refuses task-augmented requests when no task capability is declared; the
 * specification says to process them normally instead ({@link withoutTaskAugmentation}).
 */
class GatewayServer extends Server {
  protected override assertTaskHandlerCapability(): void {}
}

/** Requests the SDK server answers itself. */
const SDK_ANSWERED = new Set(['initialize', 'ping']);

/**
 * The direct path of a session's requests (see `SessionTransport.direct`): everything the
 * SDK server would hand to the gateway anyway, with the same context it would build (the
 * SDK server still sends the request's notifications and server-to-client requests, tied
 * to it). Task-augmented requests are processed as plain ones ({@link withoutTaskAugmentation}).
 */
export function directRequestHandler(
  gateway: Gateway,
  registry: Registry,
  session: ClientSession & { server: Server },
): DirectRequestHandler {
  return (request, info, signal) => {
    if (SDK_ANSWERED.has(request.method)) return undefined;
    const params = request.params;
    const related = { relatedRequestId: request.id };
    const context: RequestContext = {
      signal,
      authInfo: info.authInfo,
      requestInfo: { headers: info.headers },
      sendNotification: async (notification) => {
        if (signal.aborted) return;
        await session.server.notification(notification, related);
      },
      sendRequest: async (r, schema, options) => {
        if (signal.aborted) throw new McpError(ErrorCode.ConnectionClosed, 'Request was cancelled');
        return session.server.request(r, schema, { ...options, ...related });
      },
    };
    return handleClientRequest(gateway, registry, session, request.method, params, context);
  };
}

/** Build a session: its SDK server answers initialize/ping itself and hands everything else to the gateway. */
export function createClientSession(
  gateway: Gateway,
  registry: Registry,
  principal?: Principal,
): ClientSession & { server: Server } {
  const server = new GatewayServer(GATEWAY_INFO, {
    capabilities: gatewayCapabilities(gateway, registry),
    instructions: GATEWAY_INSTRUCTIONS,
  });
  const session = { id: undefined, server, subscriptions: new Set<string>() } as ClientSession & {
    server: Server;
  };
  if (principal) session.principal = principal;
  // The SDK answers logging/setLevel locally when logging is declared; the backends must hear it.
  server.removeRequestHandler('logging/setLevel');
  server.fallbackRequestHandler = async (request, extra) =>
    handleClientRequest(
      gateway,
      registry,
      session,
      request.method,
      request.params as Record<string, unknown> | undefined,
      extra,
    );
  server.fallbackNotificationHandler = (notification) => gateway.onClientNotification(notification);
  return session;
}
