/**
 * The interceptor host as a stock MCP SDK `Server`: used for stdio and for every HTTP
 * message the lean path does not take (initialize, ping, notifications).
 */
import {
  INTERCEPTORS_EXTENSION,
  INVOKE_BATCH_CAPABILITY,
  InterceptorMethod,
  interceptorCapability,
  MAX_INVOKE_BATCH,
} from '@fleet/core';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { z } from 'zod';
import { runInvokeBatch } from './batch.ts';
import type { InterceptorHost } from './host.ts';
import { checkInvokeDepth, type InvokeLimits, resolveMaxDepth } from './limits.ts';

/** Name and version the server reports in `initialize`. */
export interface ServerIdentity {
  name: string;
  version?: string;
  instructions?: string;
}

const ListRequestSchema = z.object({
  method: z.literal(InterceptorMethod.LIST),
  params: z.unknown().optional(),
});

const InvokeRequestSchema = z.object({
  method: z.literal(InterceptorMethod.INVOKE),
  params: z.unknown(),
});

const InvokeBatchRequestSchema = z.object({
  method: z.literal(InterceptorMethod.INVOKE_BATCH),
  params: z.unknown(),
});

/** The `capabilities` an interceptor server declares (current and legacy keys). */
export function interceptorServerCapabilities(host: InterceptorHost) {
  const capability = interceptorCapability(host.supportedEvents());
  return {
    extensions: { [INTERCEPTORS_EXTENSION]: capability },
    experimental: {
      [INTERCEPTORS_EXTENSION]: capability,
      [INVOKE_BATCH_CAPABILITY]: { maxItems: MAX_INVOKE_BATCH },
    },
  };
}

/**
 * Build an MCP SDK server that answers `interceptors/list` and `interceptor/invoke`, with the
 * same {@link InvokeLimits} as the HTTP lean path.
 */
export function createInterceptorMcpServer(
  host: InterceptorHost,
  identity: ServerIdentity & InvokeLimits,
): Server {
  const maxDepth = resolveMaxDepth(identity.maxDepth);
  const invoke = (params: unknown, signal: AbortSignal) => {
    checkInvokeDepth(params, maxDepth);
    return host.invoke(params, { signal });
  };
  const server = new Server(
    { name: identity.name, version: identity.version ?? '0.0.0' },
    {
      capabilities: interceptorServerCapabilities(host),
      ...(identity.instructions ? { instructions: identity.instructions } : {}),
    },
  );
  server.setRequestHandler(ListRequestSchema, async (request) => ({
    ...host.list(request.params),
  }));
  server.setRequestHandler(InvokeRequestSchema, async (request, extra) => ({
    ...(await invoke(request.params, extra.signal)),
  }));
  server.setRequestHandler(InvokeBatchRequestSchema, async (request, extra) =>
    runInvokeBatch(request.params, async (invocation) => invoke(invocation, extra.signal)),
  );
  return server;
}
