/**
 * The floor of the 3-interceptor topology on this machine: the same processes and the same
 * HTTP exchanges per `tools/call` as the gateway row, with no logic at all.
 *
 *   floor.ts service <name>   answers every POST with a small JSON object once its body is read
 *   floor.ts relay            (env BACKEND_URL, SERVICE_URLS=validator,mutator,observer)
 *
 * The relay forwards every POST to the backend as it came and passes the answer back; for a
 * `tools/call` it first posts the call's params to the validator, then to the mutator, and
 * after the backend's answer to the mutator again, while the observer gets one post per
 * phase that nothing waits for: the gateway's exchanges without its chain engine, MCP
 * handling, checks, telemetry or audit. Both roles are served by the kit's `listen`, with the
 * server settings the kit's interceptor services use. What the gateway row adds on top of this row is
 * what the gateway itself costs; what this row adds to the direct one is the price of the
 * hops on this machine, which no gateway avoids.
 */
import { listen, readBody } from '@fleet/interceptor-kit';
import { Pool } from 'undici';

/** Bodies here are a few hundred bytes; the bound only keeps a stray request honest. */
const MAX_BODY = 1 << 20;

const ANSWER = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { valid: true } });

async function service(name: string): Promise<void> {
  await listen(
    (req, res) => {
      void readBody(req, MAX_BODY).then(
        () => res.writeHead(200, { 'content-type': 'application/json' }).end(ANSWER),
        () => res.writeHead(413).end(),
      );
    },
    { service: `floor-${name}` },
  );
}

async function relay(): Promise<void> {
  const backendUrl = new URL(process.env.BACKEND_URL ?? '');
  const backend = new Pool(backendUrl.origin);
  const [validator, mutator, observer] = (process.env.SERVICE_URLS ?? '')
    .split(',')
    .map((url) => new Pool(url));
  if (!validator || !mutator || !observer) throw new Error('SERVICE_URLS needs three URLs');
  const post = async (pool: Pool, body: string): Promise<void> => {
    const res = await pool.request({
      path: '/mcp',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    await res.body.text();
  };
  const FORWARDED = ['content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version'];
  await listen(
    (req, res) => {
      void (async () => {
        const body = (await readBody(req, MAX_BODY)).toString('utf8');
        const message = JSON.parse(body) as { method?: string; params?: unknown };
        const invocation =
          message.method === 'tools/call'
            ? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'invoke', params: message.params })
            : undefined;
        if (invocation) {
          void post(observer, invocation);
          await post(validator, invocation);
          await post(mutator, invocation);
        }
        const headers: Record<string, string> = {};
        for (const name of FORWARDED) {
          const value = req.headers[name];
          if (typeof value === 'string') headers[name] = value;
        }
        const answer = await backend.request({
          path: backendUrl.pathname,
          method: 'POST',
          headers,
          body,
        });
        const text = await answer.body.text();
        if (invocation) {
          void post(observer, invocation);
          await post(mutator, invocation);
        }
        const out: Record<string, string> = {};
        for (const name of ['content-type', 'mcp-session-id']) {
          const value = answer.headers[name];
          if (typeof value === 'string') out[name] = value;
        }
        res.writeHead(answer.statusCode, out).end(text);
      })().catch((error: unknown) => {
        res.writeHead(502).end(String(error));
      });
    },
    { service: 'floor-relay' },
  );
}

const [role, name] = process.argv.slice(2);
if (role === 'service') await service(name ?? 'service');
else if (role === 'relay') await relay();
else throw new Error('usage: floor.ts service <name> | relay');
process.on('SIGTERM', () => process.exit(0));
