/**
 * Parameter header mirroring (SEP-2243) through the gateway: `x-mcp-header` annotations are
 * checked when a backend's tools are listed (a tool with invalid ones is not offered and
 * cannot be called), and each annotated argument of a `tools/call` reaches an HTTP backend
 * as `Mcp-Param-<Name>`, encoded when needed and refused when it cannot travel safely.
 */
import { defineMutator, modified, unchanged } from '@fleet/interceptor-kit';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { type Logger, silentLogger } from '../src/app.ts';
import { connectClient, serveInterceptors, startGateway } from './harness.ts';
import { INVALID_TOOLS, startMirrorBackend } from './mirror-backend.ts';
import { postModern } from './raw-http.ts';

async function setup(extra = '') {
  const backend = await startMirrorBackend();
  const warnings: Array<Record<string, unknown>> = [];
  const log = {
    ...silentLogger,
    warn: (fields: unknown) => {
      warnings.push(fields as Record<string, unknown>);
    },
  } as Logger;
  const gateway = await startGateway(
    `backends:\n  - {id: mirror, url: "${backend.url}"}\n${extra}`,
    { redis: false, log },
  );
  return { backend, gateway, warnings };
}

const headersOf = (result: unknown) =>
  (result as { structuredContent?: { headers?: Record<string, string> } }).structuredContent
    ?.headers;

describe('x-mcp-header annotations at tool listing', () => {
  it('drops every tool with invalid annotations from tools/list (sessions and stateless)', async () => {
    const { gateway, warnings } = await setup();
    const client = await connectClient(gateway.mcpUrl);
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(names).toEqual(['ask', 'meta', 'route']);
    const stateless = await postModern(gateway.mcpUrl, 'tools/list');
    expect(stateless.status).toBe(200);
    const tools = ((stateless.json.result?.tools ?? []) as Array<{ name: string }>).map(
      (t) => t.name,
    );
    expect(tools.sort()).toEqual(['ask', 'meta', 'route']);
    // One warning per dropped tool, naming it and why, however often the tools are listed.
    expect(warnings.map((w) => w.tool).sort()).toEqual(Object.keys(INVALID_TOOLS).sort());
    expect(warnings.every((w) => w.backend === 'mirror' && typeof w.reason === 'string')).toBe(
      true,
    );
  });

  it('refuses a call to a dropped tool with -32602 naming the reason, before the backend', async () => {
    const { gateway, backend } = await setup();
    const client = await connectClient(gateway.mcpUrl);
    for (const name of Object.keys(INVALID_TOOLS)) {
      const error = await client.callTool({ name, arguments: {} }).catch((e: unknown) => e);
      expect(error, name).toBeInstanceOf(McpError);
      expect((error as McpError).code, name).toBe(-32602);
      expect((error as McpError).data, name).toMatchObject({
        name,
        reason: expect.stringContaining('x-mcp-header'),
      });
    }
    expect(backend.calls).toEqual([]);
  });
});

describe('Mcp-Param-* headers to HTTP backends', () => {
  it('sends each annotated argument present, nested ones too, and nothing for absent or null ones', async () => {
    const { gateway } = await setup();
    const client = await connectClient(gateway.mcpUrl);
    const result = await client.callTool({
      name: 'route',
      arguments: {
        region: 'eu-west-1',
        count: 42,
        dry: false,
        options: { tenant: 'acme' },
        query: 'q',
      },
    });
    expect(headersOf(result)).toEqual({
      'mcp-param-region': 'eu-west-1',
      'mcp-param-count': '42',
      'mcp-param-dryrun': 'false',
      'mcp-param-tenant': 'acme',
    });
    const sparse = await client.callTool({ name: 'route', arguments: { query: 'q' } });
    expect(headersOf(sparse)).toEqual({});
  });

  it('base64-encodes non-ASCII and look-alike values, and mirrors stateless calls too', async () => {
    const { gateway } = await setup();
    const reply = await postModern(
      gateway.mcpUrl,
      'tools/call',
      { name: 'route', arguments: { region: 'Zürich', options: { tenant: '=?base64?x?=' } } },
      // The client's own mirrored headers (checked below) are not what reaches the backend.
      {
        headers: {
          'mcp-param-region': '=?base64?WsO8cmljaA==?=',
          // A plain value that looks like the sentinel travels encoded too.
          'mcp-param-tenant': `=?base64?${Buffer.from('=?base64?x?=').toString('base64')}?=`,
        },
      },
    );
    expect(reply.status).toBe(200);
    expect(headersOf(reply.json.result)).toEqual({
      'mcp-param-region': '=?base64?WsO8cmljaA==?=',
      'mcp-param-tenant': `=?base64?${Buffer.from('=?base64?x?=').toString('base64')}?=`,
    });
  });

  it.each([
    ['CR LF (header injection)', { region: 'eu\r\nX-Evil: 1' }, 'region', 'control characters'],
    ['NUL', { region: 'eu\u0000' }, 'region', 'control characters'],
    ['an integer beyond 2^53', { count: 2 ** 53 + 2 }, 'count', 'safe integer'],
  ])(
    'refuses %s with -32602 naming the parameter, without calling the backend',
    async (_what, args, parameter, reason) => {
      const { gateway, backend } = await setup();
      const client = await connectClient(gateway.mcpUrl);
      const error = await client
        .callTool({ name: 'route', arguments: args })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(-32602);
      expect((error as McpError).message).toContain(reason);
      expect((error as McpError).data).toMatchObject({
        parameter,
        header: expect.stringMatching(/^Mcp-Param-/),
      });
      expect(backend.calls).toEqual([]);
    },
  );

  it('mirrors the arguments as forwarded, after request mutators changed them', async () => {
    const rewrite = defineMutator({
      name: 'region-pinner',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: (payload) => {
        const p = payload as { arguments?: Record<string, unknown> };
        if (p.arguments?.region === undefined) return unchanged();
        return modified({ ...p, arguments: { ...p.arguments, region: 'pinned-1' } });
      },
    });
    const served = await serveInterceptors([rewrite]);
    const { gateway } = await setup(`interceptors:\n  - url: "${served.url}"\n`);
    const client = await connectClient(gateway.mcpUrl);
    const result = await client.callTool({ name: 'route', arguments: { region: 'us-east-1' } });
    expect(headersOf(result)).toEqual({ 'mcp-param-region': 'pinned-1' });
  });
});

describe('Mcp-Param-* headers from stateless clients', () => {
  it.each([
    ['missing', {}],
    ['different', { 'mcp-param-region': 'us-east-1' }],
  ])('refuses a %s header with HTTP 400 and -32020, before the backend', async (_what, headers) => {
    const { gateway, backend } = await setup();
    const reply = await postModern(
      gateway.mcpUrl,
      'tools/call',
      { name: 'route', arguments: { region: 'eu-west-1' } },
      { headers },
    );
    expect(reply.status).toBe(400);
    expect(reply.json.error).toMatchObject({
      code: -32020,
      data: { header: 'Mcp-Param-Region', parameter: 'region' },
    });
    expect(backend.calls).toEqual([]);
  });
});
