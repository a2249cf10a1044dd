/**
 * `@modelcontextprotocol/server-everything` (Streamable HTTP, a real child process on
 * loopback) behind the gateway: the gateway lists what the server lists, and tools, resources
 * and prompts work through it. Its `get-env` tool is never called: it prints the server's
 * environment.
 */
import { type EverythingServer, startEverything } from '@fleet/test-fixtures';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { connectClient, startGateway, textOf } from './harness.ts';

/** What the gateway declares to its backends; a direct client declares the same, so the
 * server registers the same capability-dependent tools for both. */
const GATEWAY_CLIENT_CAPABILITIES = {
  sampling: {},
  elicitation: {},
  roots: { listChanged: true },
};

/** Every item of a paginated list, by one field. */
async function listAll<K extends string>(
  list: (params: { cursor?: string }) => Promise<{ nextCursor?: string } & Record<K, unknown>>,
  items: K,
  field = 'name',
): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 50; pages++) {
    const page = await list(cursor === undefined ? {} : { cursor });
    out.push(...(page[items] as Array<Record<string, unknown>>).map((i) => String(i[field])));
    cursor = page.nextCursor;
    if (cursor === undefined) return out;
  }
  throw new Error(`more than 50 pages of ${items}`);
}

describe('server-everything behind the gateway', () => {
  let everything: EverythingServer;
  beforeAll(async () => {
    everything = await startEverything();
    return () => everything.close();
  }, 30_000);

  async function clients(): Promise<{ direct: Client; gateway: Client }> {
    const gw = await startGateway(`backends:\n  - {id: everything, url: "${everything.url}"}\n`, {
      redis: false,
    });
    const [direct, gateway] = await Promise.all([
      connectClient(everything.url, {
        name: 'direct',
        capabilities: GATEWAY_CLIENT_CAPABILITIES,
      }),
      connectClient(gw.mcpUrl, { name: 'through-gateway' }),
    ]);
    return { direct, gateway };
  }

  it('lists the same tools, prompts, resources and templates as the server itself', async () => {
    const { direct, gateway } = await clients();
    const directTools = await listAll((p) => direct.listTools(p), 'tools');
    const gatewayTools = await listAll((p) => gateway.listTools(p), 'tools');
    expect(directTools).toContain('echo');
    expect(directTools).toContain('get-env');
    expect(gatewayTools.toSorted()).toEqual(directTools.toSorted());

    expect((await listAll((p) => gateway.listPrompts(p), 'prompts')).toSorted()).toEqual(
      (await listAll((p) => direct.listPrompts(p), 'prompts')).toSorted(),
    );
    expect((await listAll((p) => gateway.listResources(p), 'resources', 'uri')).toSorted()).toEqual(
      (await listAll((p) => direct.listResources(p), 'resources', 'uri')).toSorted(),
    );
    expect(
      (
        await listAll((p) => gateway.listResourceTemplates(p), 'resourceTemplates', 'uriTemplate')
      ).toSorted(),
    ).toEqual(
      (
        await listAll((p) => direct.listResourceTemplates(p), 'resourceTemplates', 'uriTemplate')
      ).toSorted(),
    );

    // The tool descriptions themselves pass through unchanged.
    const echoDirect = (await direct.listTools()).tools.find((t) => t.name === 'echo');
    const echoGateway = (await gateway.listTools()).tools.find((t) => t.name === 'echo');
    expect(echoGateway).toEqual(echoDirect);
  });

  it('calls echo, reads a resource and gets prompts through the gateway', async () => {
    const { gateway } = await clients();
    const echoed = await gateway.callTool({
      name: 'echo',
      arguments: { message: 'through the fleet' },
    });
    expect(echoed.isError).toBeFalsy();
    expect(textOf(echoed)).toBe('Echo: through the fleet');

    const sum = await gateway.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } });
    expect(textOf(sum)).toContain('42');

    const uris = await listAll((p) => gateway.listResources(p), 'resources', 'uri');
    const doc = uris.find((u) => u.endsWith('/instructions.md'));
    expect(doc).toBeDefined();
    const read = await gateway.readResource({ uri: doc as string });
    expect(read.contents[0]).toMatchObject({ uri: doc, mimeType: 'text/markdown' });
    expect((read.contents[0] as { text?: string }).text?.length).toBeGreaterThan(0);

    const templated = await gateway.readResource({ uri: 'demo://resource/dynamic/text/7' });
    expect(templated.contents[0]).toMatchObject({ uri: 'demo://resource/dynamic/text/7' });
    expect((templated.contents[0] as { text?: string }).text).toContain('Resource 7');

    const simple = await gateway.getPrompt({ name: 'simple-prompt' });
    expect(simple.messages[0]?.content).toEqual({
      type: 'text',
      text: 'This is a simple prompt without arguments.',
    });
    const withArgs = await gateway.getPrompt({
      name: 'args-prompt',
      arguments: { city: 'Lyon', state: 'Rhône' },
    });
    expect(withArgs.messages[0]?.content).toEqual({
      type: 'text',
      text: "What's weather in Lyon, Rhône?",
    });
  });
});
