/** Aggregation and routing across two real backends (Streamable HTTP and stdio) with prefixes. */
import { startHttpBackend, stdioBackendCommand } from '@fleet/test-fixtures';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, startGateway, textOf } from './harness.ts';

async function twoBackends() {
  const alpha = await startHttpBackend({ name: 'alpha' });
  defer(() => alpha.close());
  const stdio = stdioBackendCommand({ name: 'beta' });
  const config = `
backends:
  - {id: alpha, url: "${alpha.url}", prefix: "a_"}
  - id: beta
    command: ${JSON.stringify(stdio.command)}
    args: ${JSON.stringify(stdio.args)}
    prefix: "b_"
`;
  const gateway = await startGateway(config, { redis: false });
  return { gateway, alpha };
}

/** Walk every page of a list method and collect one field of each item. */
async function listAll(
  list: (params: { cursor?: string }) => Promise<Record<string, unknown>>,
  items: string,
  field = 'name',
): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 20; pages++) {
    const page = await list(cursor === undefined ? {} : { cursor });
    out.push(...(page[items] as Array<Record<string, string>>).map((i) => String(i[field])));
    cursor = page.nextCursor as string | undefined;
    if (cursor === undefined) break;
  }
  return out;
}

describe('aggregation and routing', () => {
  it('merges tools, prompts and resources with prefixes and routes calls by prefix', async () => {
    const { gateway } = await twoBackends();
    const client = await connectClient(gateway.mcpUrl);
    const caps = client.getServerCapabilities();
    expect(caps?.tools).toBeDefined();
    expect(caps?.resources?.subscribe).toBe(true);

    const tools: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== undefined && pages < 10);
    expect(pages).toBeGreaterThanOrEqual(2); // one page per backend at least
    expect(tools).toContain('a_echo');
    expect(tools).toContain('b_echo');
    expect(tools.filter((t) => !t.startsWith('a_') && !t.startsWith('b_'))).toEqual([]);

    expect(textOf(await client.callTool({ name: 'a_echo', arguments: { text: 'hi' } }))).toBe(
      '[alpha] hi',
    );
    expect(textOf(await client.callTool({ name: 'b_echo', arguments: { text: 'yo' } }))).toBe(
      '[beta] yo',
    );

    const prompts = await listAll((c) => client.listPrompts(c), 'prompts');
    expect(prompts).toEqual(
      expect.arrayContaining(['a_greeting', 'b_greeting', 'a_plain', 'b_plain']),
    );
    const prompt = await client.getPrompt({ name: 'b_greeting', arguments: { name: 'Ada' } });
    expect(JSON.stringify(prompt.messages)).toContain('Ada');

    const uris = await listAll((c) => client.listResources(c), 'resources', 'uri');
    expect(uris).toEqual(expect.arrayContaining(['a_fixture://static', 'b_fixture://static']));
    const read = await client.readResource({ uri: 'a_fixture://static' });
    expect(read.contents[0]).toMatchObject({ uri: 'a_fixture://static', text: 'static text' });
    const templates = await listAll(
      (c) => client.listResourceTemplates(c),
      'resourceTemplates',
      'uriTemplate',
    );
    expect(templates).toEqual(
      expect.arrayContaining(['a_fixture://items/{id}', 'b_fixture://items/{id}']),
    );
  });

  it('answers an unknown tool the way a single server would', async () => {
    const { gateway } = await twoBackends();
    const client = await connectClient(gateway.mcpUrl);
    const error = await client
      .callTool({ name: 'zzz_nothing', arguments: {} })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32602);
    expect((error as McpError).message).toContain('zzz_nothing');
  });

  it('names what a completion could not find: an unknown prompt or resource', async () => {
    const { gateway } = await twoBackends();
    const client = await connectClient(gateway.mcpUrl);
    const complete = (
      ref: { type: 'ref/prompt'; name: string } | { type: 'ref/resource'; uri: string },
    ) => client.complete({ ref, argument: { name: 'a', value: 'b' } }).catch((e: unknown) => e);
    const prompt = (await complete({ type: 'ref/prompt', name: 'zzz' })) as McpError;
    expect([prompt.code, prompt.data]).toEqual([-32602, { name: 'zzz' }]);
    expect(prompt.message).toContain('Unknown prompt: zzz');
    const resource = (await complete({ type: 'ref/resource', uri: 'zz://x' })) as McpError;
    expect([resource.code, resource.data]).toEqual([-32602, { uri: 'zz://x' }]);
    expect(resource.message).toContain('Unknown resource: zz://x');
  });

  it('rejects a forged cursor with -32602', async () => {
    const { gateway } = await twoBackends();
    const client = await connectClient(gateway.mcpUrl);
    const error = await client.listTools({ cursor: 'not-a-cursor' }).catch((e: unknown) => e);
    expect((error as McpError).code).toBe(-32602);
  });

  it('passes a backend tool error through unchanged', async () => {
    const { gateway } = await twoBackends();
    const client = await connectClient(gateway.mcpUrl);
    const result = await client.callTool({ name: 'a_fail', arguments: {} });
    expect(result.isError).toBe(true);
  });
});
