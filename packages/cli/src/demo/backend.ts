/**
 * The demo MCP backend `fleet up` starts: a small CRM with tools whose results carry PII
 * (so the redactor has work), a tool that needs the real value back (so token restore
 * shows), and tools the demo policy guards. Streamable HTTP, stateful, loopback; prints the
 * fleet start-up line when run through `main.ts`.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/** The demo CRM's records (the demo prints what the backend really returned). */
export const CUSTOMERS: Record<
  string,
  { name: string; email: string; phone: string; card: string; iban: string }
> = {
  '42': {
    name: 'Ada Lovelace',
    email: 'ada.lovelace@example.com',
    phone: '+1 415 555 0132',
    card: '4111 1111 1111 1111',
    iban: 'GB82 WEST 1234 5698 7654 32',
  },
  '7': {
    name: 'Alan Turing',
    email: 'alan.turing@example.org',
    phone: '+44 20 7946 0958',
    card: '5555 5555 5555 4444',
    iban: 'DE89 3704 0044 0532 0130 00',
  },
};

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

/** Build the demo server (one per session). */
export function createDemoServer(): McpServer {
  const server = new McpServer(
    { name: 'fleet-demo-crm', version: '0.1.0' },
    { capabilities: { logging: {} } },
  );
  server.registerTool(
    'lookup_customer',
    {
      description: 'Look up a customer record by id (try 42 or 7)',
      inputSchema: { id: z.string() },
    },
    ({ id }) => {
      const c = CUSTOMERS[id];
      if (!c) return { ...text(`No customer ${id}`), isError: true };
      return text(
        `Customer ${id}: ${c.name}, email ${c.email}, phone ${c.phone}, card ${c.card}, IBAN ${c.iban}`,
      );
    },
  );
  server.registerTool(
    'send_email',
    {
      description: 'Send an e-mail to a customer address',
      inputSchema: { to: z.string(), subject: z.string(), body: z.string().optional() },
    },
    ({ to, subject }) => {
      const known = Object.values(CUSTOMERS).some((c) => c.email === to);
      // The backend needs the real address: with a token it could not deliver.
      return text(
        known
          ? `Delivered "${subject}" to the customer's real address (verified against the CRM).`
          : `Could not deliver: "${to.slice(0, 24)}" is not a customer address.`,
      );
    },
  );
  server.registerTool(
    'delete_record',
    {
      description: 'Delete a customer record (admins only under the demo policy)',
      inputSchema: { id: z.string() },
    },
    ({ id }) => text(`Deleted record ${id}.`),
  );
  server.registerTool(
    'bank_transfer',
    {
      description: 'Transfer money (the demo policy refuses amounts over 10000)',
      inputSchema: { amount: z.number(), to: z.string() },
    },
    ({ amount }) => text(`Transferred ${amount}.`),
  );
  server.registerTool(
    'get_weather',
    { description: 'Weather for a city (no PII involved)', inputSchema: { city: z.string() } },
    ({ city }) => text(`Sunny in ${city}, 21 °C.`),
  );
  return server;
}

/** Serve the demo backend; resolves with its `/mcp` URL and a close function. */
export async function startDemoBackend(
  options: { host?: string; port?: number } = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (!req.url?.startsWith('/mcp')) {
      const ok = req.url === '/healthz' || req.url === '/readyz';
      res
        .writeHead(ok ? 200 : 404, { 'content-type': 'application/json' })
        .end(ok ? '{"status":"ok"}' : '{}');
      return;
    }
    const id = req.headers['mcp-session-id'];
    let transport = typeof id === 'string' ? sessions.get(id) : undefined;
    if (!transport) {
      if (typeof id === 'string') {
        res.writeHead(404).end();
        return;
      }
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => {
          sessions.set(sid, created);
        },
      });
      created.onclose = () => {
        if (created.sessionId) sessions.delete(created.sessionId);
      };
      await createDemoServer().connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) =>
    http.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve),
  );
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      for (const t of sessions.values()) await t.close();
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    },
  };
}
