/**
 * The PostgreSQL engine against a server that accepts connections and never answers (a
 * partition, a host gone without a TCP reset): queries fail within their timeouts instead of
 * hanging, which is what lets the worker notice an outage and hold its records.
 */
import { createServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createPostgresEngine } from './sql.ts';

const sockets = new Set<Socket>();
const servers: Array<{ close: () => void }> = [];
afterEach(() => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  for (const server of servers.splice(0)) server.close();
});

async function silentServer(): Promise<number> {
  const server = createServer((socket) => {
    sockets.add(socket); // accepted, never answered
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

describe('PostgreSQL engine timeouts', () => {
  it('fails a query to a server that never answers within connectTimeoutMs', async () => {
    const port = await silentServer();
    const engine = createPostgresEngine({
      connectionString: `postgres://fleet@127.0.0.1:${port}/audit`,
      connectTimeoutMs: 300,
    });
    const started = performance.now();
    await expect(engine.query('SELECT 1')).rejects.toThrow(/timeout/i);
    // Well before the default 10 s: the option is what ended it.
    expect(performance.now() - started).toBeLessThan(5_000);
    await engine.close();
  });
});
