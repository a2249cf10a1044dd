/** Serve an interceptor host over stdio (for desktop clients and spawned services). */

import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { InterceptorHost } from './host.ts';
import type { InvokeLimits } from './limits.ts';
import { createInterceptorMcpServer, type ServerIdentity } from './mcp-server.ts';

/** Connect `host` to this process's stdin/stdout. Resolves once connected. */
export async function serveStdio(
  host: InterceptorHost,
  identity: ServerIdentity & InvokeLimits,
): Promise<Server> {
  const server = createInterceptorMcpServer(host, identity);
  await server.connect(new StdioServerTransport());
  return server;
}
