import { startHttpBackend } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';
import { defer, startGateway, waitFor } from './harness.ts';
import { pipelineForFile } from './pipeline.ts';
import { openRawSession, rawPost, SESSION_INIT } from './raw-http.ts';

const pipeline = pipelineForFile();

/** `fleet_ingress_rejections_total` by `fleet_rejection_kind`, from a scrape. */
async function rejections(): Promise<Record<string, number>> {
  const text = await pipeline.scrape();
  const counts: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const kind = /^fleet_ingress_rejections_total\{[^}]*fleet_rejection_kind="([^"]+)"/.exec(
      line,
    )?.[1];
    if (kind !== undefined) counts[kind] = (counts[kind] ?? 0) + Number(line.split(' ').at(-1));
  }
  return counts;
}

describe('the ingress', () => {
  it('counts what it refuses by kind', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\n` +
        'limits: {maxBodyBytes: 4096, maxSessionsPerPrincipal: 1}\n' +
        'auth:\n  mode: tokens\n  tokens:\n    - {token: alice-token-0001, principal: {id: alice}}\n',
      { redis: false },
    );
    const alice = { authorization: 'Bearer alice-token-0001' };
    const before = await rejections();

    expect((await rawPost(gateway.mcpUrl, SESSION_INIT)).status).toBe(401);
    expect(
      (await rawPost(gateway.mcpUrl, SESSION_INIT, { authorization: 'Bearer wrong-token-000' }))
        .status,
    ).toBe(401);
    expect(
      (await rawPost(gateway.mcpUrl, SESSION_INIT, { ...alice, host: 'evil.example' })).status,
    ).toBe(403);
    const padded = { ...SESSION_INIT, params: { ...SESSION_INIT.params, pad: 'x'.repeat(8192) } };
    expect((await rawPost(gateway.mcpUrl, padded, alice)).status).toBe(413);
    expect((await rawPost(gateway.mcpUrl, SESSION_INIT, alice)).status).toBe(200);
    expect((await rawPost(gateway.mcpUrl, SESSION_INIT, alice)).status).toBe(429);

    const after = await rejections();
    const grew = (kind: string) => (after[kind] ?? 0) - (before[kind] ?? 0);
    expect(grew('unauthorized')).toBe(2);
    expect(grew('forbidden')).toBe(1);
    expect(grew('payload_too_large')).toBe(1);
    expect(grew('too_many_requests')).toBe(1);
    // Nothing else was counted: the served initialize is no refusal.
    const total = Object.keys(after).reduce((n, kind) => n + grew(kind), 0);
    expect(total).toBe(5);
  });

  it('counts a request over limits.maxInFlightPerSession as overloaded', async () => {
    const backend = await startHttpBackend({ name: 'fx' });
    defer(() => backend.close());
    const gateway = await startGateway(
      `backends:\n  - {id: fx, url: "${backend.url}"}\nlimits: {maxInFlightPerSession: 1}\n`,
      { redis: false },
    );
    const headers = await openRawSession(gateway.mcpUrl);
    const call = (id: number, ms: number) =>
      rawPost(
        gateway.mcpUrl,
        { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow', arguments: { ms } } },
        headers,
      );
    const before = await rejections();
    const held = call(1, 500);
    await waitFor(() => backend.state.sessions.size > 0, 5000, 'the first call at the backend');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const refused = await call(2, 0);
    expect(refused.json.error?.data).toMatchObject({ reason: 'overloaded' });
    expect((await held).json.result).toBeDefined();
    const after = await rejections();
    expect((after.overloaded ?? 0) - (before.overloaded ?? 0)).toBe(1);
  });
});
