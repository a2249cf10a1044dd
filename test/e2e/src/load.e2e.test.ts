/**
 * Bounded load through the real fleet: many sessions at once, each minting reversible PII
 * tokens and sending them back, while every session's calls run interleaved with the
 * others'. What must hold under concurrency: a token is restored only for the session that
 * was given it, no call fails, and every call is in the audit trail exactly once. Counts and
 * time are bounded (8 sessions, 488 calls); speed is measured by `pnpm bench`, not here.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALICE_TOKEN,
  connectClient,
  type E2eFleet,
  startE2eFleet,
  resultText as text,
} from './fleet.ts';

const SESSIONS = 8;
const ROUNDS = 20;

/** The demo policy without its rate limit (this suite is the load the limit would refuse). */
const POLICY = 'version: 1\ndefault: allow\nevents: ["tools/call"]\n';

let e2e: E2eFleet;
const clients: Client[] = [];

beforeAll(async () => {
  e2e = await startE2eFleet({ postgres: true, policy: POLICY });
}, 180_000);

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await e2e?.stop();
}, 60_000);

async function connect(): Promise<Client> {
  const client = await connectClient(e2e.fleet.mcpUrl, ALICE_TOKEN, 'load');
  clients.push(client);
  return client;
}

const EMAIL_TOKEN = /<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/;

describe('load', () => {
  it('keeps every session’s tokens its own with 8 sessions at once, and audits every call once', async () => {
    const sessions = await Promise.all(Array.from({ length: SESSIONS }, connect));
    const traceIds: string[] = [];
    const call = (client: Client, name: string, args: Record<string, unknown>) => {
      const traceId = randomBytes(16).toString('hex');
      traceIds.push(traceId);
      return client.callTool({
        name,
        arguments: args,
        _meta: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      });
    };
    // Each session's token for the same address (customer 42): one per session, as the
    // vault scopes tokens to principal and session; all sessions are Alice's.
    const tokens = await Promise.all(
      sessions.map(async (client) => {
        const found = EMAIL_TOKEN.exec(text(await call(client, 'lookup_customer', { id: '42' })));
        expect(found).not.toBeNull();
        return found?.[0] as string;
      }),
    );
    expect(new Set(tokens).size).toBe(SESSIONS);

    const failures: string[] = [];
    await Promise.all(
      sessions.map(async (client, i) => {
        const own = tokens[i] as string;
        const other = tokens[(i + 1) % SESSIONS] as string;
        for (let round = 0; round < ROUNDS; round++) {
          const [looked, mine, theirs] = await Promise.all([
            call(client, 'lookup_customer', { id: round % 2 ? '7' : '42' }),
            call(client, 'send_email', { to: own, subject: `s${i}r${round}` }),
            call(client, 'send_email', { to: other, subject: `x${i}r${round}` }),
          ]);
          if (text(looked).includes('@example.')) failures.push(`session ${i}: raw email out`);
          if (!text(mine).startsWith('Delivered'))
            failures.push(`session ${i}: own token not restored: ${text(mine)}`);
          if (!text(theirs).startsWith('Could not deliver'))
            failures.push(`session ${i}: another session's token restored: ${text(theirs)}`);
        }
      }),
    );
    expect(failures).toEqual([]);

    // Every call: one request and one response record in the store.
    const db = new pg.Client({ connectionString: e2e.databaseUrl as string });
    await db.connect();
    try {
      const deadline = Date.now() + 60_000;
      let counts = new Map<string, number>();
      while (Date.now() < deadline) {
        const { rows } = await db.query<{ trace: string; n: string }>(
          `SELECT record->>'traceId' AS trace, count(*) AS n FROM audit_records
           WHERE record->>'kind' = 'chain' AND record->>'traceId' = ANY($1) GROUP BY 1`,
          [traceIds],
        );
        counts = new Map(rows.map((r) => [r.trace, Number(r.n)]));
        if (traceIds.every((t) => (counts.get(t) ?? 0) >= 2)) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      expect(traceIds.length).toBe(SESSIONS * (1 + 3 * ROUNDS));
      expect(traceIds.filter((t) => counts.get(t) !== 2)).toEqual([]);
    } finally {
      await db.end();
    }
  }, 180_000);
});
