/**
 * A pii-redactor served over real HTTP on a free port with a given engine and vault, and a
 * stock MCP client invoking `pii-redactor` on it (closed by the test's `defer`).
 */
import { listen } from '@fleet/interceptor-kit';
import type { PiiEngine } from '@fleet/pii';
import { defer } from '@fleet/test-fixtures/cleanup';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { z } from 'zod';
import { createPiiRedactorApp, type RedisTokenVault } from '../src/app.ts';

const AnyResult = z.object({}).passthrough();

/** Invokes `pii-redactor` for `tools/call` with `context` (a timestamp is added). */
export type RedactorInvoke = (
  phase: 'request' | 'response',
  payload: unknown,
  context: Record<string, unknown>,
) => Promise<Record<string, unknown>>;

export async function serveRedactor(
  engine: PiiEngine,
  vault: RedisTokenVault,
): Promise<RedactorInvoke> {
  const app = createPiiRedactorApp({ engine: () => engine, vault });
  const listening = await listen(app.listener, { service: 'pii-redactor', announce: false });
  defer(() => listening.close(100));
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${listening.url}/mcp`)));
  defer(() => client.close());
  return (phase, payload, context) =>
    client.request(
      {
        method: 'interceptor/invoke',
        params: {
          name: 'pii-redactor',
          event: 'tools/call',
          phase,
          payload,
          context: { timestamp: new Date().toISOString(), ...context },
        },
      },
      AnyResult,
    );
}
