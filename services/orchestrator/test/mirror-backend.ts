/**
 * A test backend (real SDK `Server` over stateful Streamable HTTP) that reports what crossed
 * the gateway: the `Mcp-Param-*` headers and the `_meta` each call arrived with, tools with
 * valid and invalid `x-mcp-header` annotations, and results, notifications and
 * server-to-client requests that carry reserved `_meta` keys of their own.
 */
import { serveMcpOverHttp } from '@fleet/test-fixtures';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  CreateMessageResultSchema,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { defer } from './harness.ts';

/** The reserved and unreserved `_meta` keys the backend adds to what it sends. */
export const BACKEND_META = {
  'io.modelcontextprotocol/serverInfo': { name: 'impostor', version: '6.6.6' },
  'io.modelcontextprotocol/related-task': { taskId: 'backend-task' },
  'mcp.dev/claim': true,
  'com.example/kept': 'yes',
};

const string = (header: string) => ({ type: 'string', 'x-mcp-header': header });
const object = (properties: Record<string, unknown>) => ({ type: 'object', properties });

/** Tools whose annotations the gateway must refuse, by name. */
export const INVALID_TOOLS: Record<string, Record<string, unknown>> = {
  bad_token: object({ a: string('Bad Header') }),
  bad_empty: object({ a: string('') }),
  bad_duplicate: object({ a: string('Region'), b: string('REGION') }),
  bad_number: object({ a: { type: 'number', 'x-mcp-header': 'Amount' } }),
  bad_items: object({ a: { type: 'array', items: string('Item') } }),
  bad_oneof: { type: 'object', oneOf: [object({ a: string('Choice') })] },
};

const TOOLS = [
  {
    name: 'route',
    description: 'Echo the Mcp-Param-* headers this call arrived with',
    inputSchema: object({
      region: string('Region'),
      count: { type: 'integer', 'x-mcp-header': 'Count' },
      dry: { type: 'boolean', 'x-mcp-header': 'DryRun' },
      options: object({ tenant: string('Tenant') }),
      query: { type: 'string' },
    }),
  },
  {
    name: 'meta',
    description: 'Echo the _meta this call arrived with; answer with reserved _meta keys',
    inputSchema: object({ progress: { type: 'boolean' } }),
  },
  {
    name: 'ask',
    description: 'Ask the client to sample, with reserved _meta on the request',
    inputSchema: object({}),
  },
  ...Object.entries(INVALID_TOOLS).map(([name, inputSchema]) => ({ name, inputSchema })),
];

/** What one `tools/call` arrived with at the backend. */
export interface MirrorCall {
  name: string;
  paramHeaders: Record<string, string>;
  meta: Record<string, unknown> | undefined;
}

/** Start the backend on 127.0.0.1; it is closed after the test. */
export async function startMirrorBackend(): Promise<{ url: string; calls: MirrorCall[] }> {
  const calls: MirrorCall[] = [];
  const served = await serveMcpOverHttp({
    create: () => {
      const server = new Server(
        { name: 'mirror', version: '1.0.0' },
        { capabilities: { tools: {}, logging: {} } },
      );
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS }));
      server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
        const paramHeaders: Record<string, string> = {};
        for (const [key, value] of Object.entries(extra.requestInfo?.headers ?? {})) {
          if (key.startsWith('mcp-param-') && typeof value === 'string') paramHeaders[key] = value;
        }
        const meta = request.params._meta as Record<string, unknown> | undefined;
        calls.push({ name: request.params.name, paramHeaders, meta });
        if (request.params.name === 'meta') {
          await extra.sendNotification({
            method: 'notifications/message',
            params: { level: 'error', data: 'from the backend', _meta: BACKEND_META },
          });
          const token = meta?.progressToken;
          if (token !== undefined)
            await extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken: token, progress: 1, total: 1, _meta: BACKEND_META },
            });
          return {
            content: [{ type: 'text', text: 'meta' }],
            structuredContent: { meta: meta ?? {} },
            _meta: BACKEND_META,
          };
        }
        if (request.params.name === 'ask') {
          const answer = await extra.sendRequest(
            {
              method: 'sampling/createMessage',
              params: {
                messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }],
                maxTokens: 5,
                _meta: BACKEND_META,
              },
            },
            CreateMessageResultSchema,
          );
          return {
            content: [{ type: 'text', text: 'asked' }],
            structuredContent: { answerMeta: answer._meta ?? {} },
          };
        }
        return {
          content: [{ type: 'text', text: JSON.stringify(paramHeaders) }],
          structuredContent: { headers: paramHeaders },
        };
      });
      return server;
    },
  });
  defer(() => served.close());
  return { url: served.url, calls };
}
