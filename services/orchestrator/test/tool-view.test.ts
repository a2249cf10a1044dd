/** Tool filtering and overrides from config: applied to tools/list, enforced on tools/call. */
import { startHttpBackend } from '@fleet/test-fixtures';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { ToolView } from '../src/tool-view.ts';
import { connectClient, defer, startGateway, textOf } from './harness.ts';

describe('ToolView', () => {
  const view = new ToolView({
    allow: ['shout', 'add*'],
    rename: { echo: 'shout' },
    describe: { shout: 'Loud echo' },
  });
  it.each([
    ['echo', 'shout'],
    ['add', 'add'],
    ['bump', undefined],
  ])('shows %s as %s', (name, visible) => {
    expect(view.visible(name)).toBe(visible);
  });
  it.each([
    ['shout', 'echo'],
    ['echo', undefined],
    ['add', 'add'],
    ['bump', undefined],
  ])('routes a call to %s to %s', (name, original) => {
    expect(view.original(name)).toBe(original);
  });
  it('is the identity without config', () => {
    const none = new ToolView({ rename: {}, describe: {} });
    expect(none.identity).toBe(true);
    const page = { tools: [{ name: 'x' }] };
    expect(none.applyToList(page)).toBe(page);
  });
});

describe('tools section of the config', () => {
  it('hides, renames and re-describes tools, and enforces it on calls', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\ntools:\n  allow: ["shout", "add", "bump"]\n  rename: {echo: shout}\n  describe: {shout: "Loud echo"}\n`,
      { redis: false },
    );
    const client = await connectClient(gateway.mcpUrl);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['add', 'bump', 'shout']);
    expect(tools.find((t) => t.name === 'shout')?.description).toBe('Loud echo');
    expect(textOf(await client.callTool({ name: 'shout', arguments: { text: 'hi' } }))).toBe(
      '[fx] hi',
    );
    for (const hidden of ['echo', 'many']) {
      const error = await client
        .callTool({ name: hidden, arguments: { text: 'hi', n: 1 } })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(-32602);
    }
    const before = backend.state.counter;
    await client.callTool({ name: 'bump', arguments: {} });
    expect(backend.state.counter).toBe(before + 1);
  });
});
