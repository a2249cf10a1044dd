/**
 * A fixture backend for tests of a saturated backend (fairness, refusals): it serves only
 * tools, so the gateway reads one list on connecting and its own calls take no slot a test
 * counts on.
 */
import { serveMcpOverHttp } from '@fleet/test-fixtures';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { defer } from './harness.ts';

/**
 * A backend whose `hold` calls wait until the test lets them go (or they are cancelled), and
 * whose `echo` answers at once: the test knows exactly which calls reached it, and in which
 * order (`labels`: each `hold` call's `label` argument as it arrived).
 */
export async function startGateBackend() {
  const state = { arrived: 0, cancelled: 0, echoes: 0, labels: [] as string[] };
  const waiting: Array<() => void> = [];
  const served = await serveMcpOverHttp({
    create: () => {
      const server = new Server(
        { name: 'gate', version: '1.0.0' },
        { capabilities: { tools: {} } },
      );
      const tool = (name: string) => ({ name, inputSchema: { type: 'object' as const } });
      server.setRequestHandler(ListToolsRequestSchema, () => ({
        tools: [tool('hold'), tool('echo')],
      }));
      server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
        if (request.params.name === 'echo') {
          state.echoes++;
          return { content: [{ type: 'text', text: 'echo' }] };
        }
        state.arrived++;
        state.labels.push(String(request.params.arguments?.label));
        await new Promise<void>((resolve) => {
          waiting.push(resolve);
          extra.signal.addEventListener(
            'abort',
            () => {
              state.cancelled++;
              resolve();
            },
            { once: true },
          );
        });
        return { content: [{ type: 'text', text: 'held' }] };
      });
      return server;
    },
  });
  defer(() => served.close());
  /** Let every `hold` call waiting so far answer. */
  const release = () => {
    for (const resolve of waiting.splice(0)) resolve();
  };
  /** Let the `hold` call waiting longest answer. */
  const releaseOne = () => waiting.shift()?.();
  defer(async () => release());
  return { url: served.url, state, release, releaseOne };
}
