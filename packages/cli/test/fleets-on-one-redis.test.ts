/**
 * Two local fleets on one Redis, as two checkouts (or two users) on one machine run them:
 * fleet A started as `fleet up` starts it, fleet B by `fleet demo` in another state
 * directory. Each fleet keeps its own audit records; the demo says when it finds none.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFleetState } from '../src/fleet/local-fleet.ts';
import { type LocalFleet, startLocalFleet } from '../src/index.ts';
import { deleteRedisKeys, fleet, jsonServer } from './helpers.ts';

/** What the services of both fleets get (no OTLP exporter to complain about). */
const env: Record<string, string> = {
  LOG_LEVEL: 'warn',
  OTEL_TRACES_EXPORTER: 'none',
  OTEL_METRICS_EXPORTER: 'none',
  ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}),
};

const stateDirs: string[] = [];
let a: LocalFleet;

/** A fresh state directory, removed after the file's tests (with its fleet's Redis keys). */
function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fleet-redis-'));
  stateDirs.push(dir);
  return dir;
}

/** The audit queue a state directory's fleet.json names. */
const auditQueueOf = (dir: string): unknown =>
  (JSON.parse(readFileSync(join(dir, 'fleet.json'), 'utf8')) as { auditQueue?: unknown })
    .auditQueue;

beforeAll(async () => {
  a = await startLocalFleet({ port: 0, env, stateDir: stateDir(), restart: false });
}, 180_000);

afterAll(async () => {
  await a?.stop();
  for (const dir of stateDirs) {
    // The fleet's queue, its retention queue and its registry (`fleet-up-<id>`); never the
    // shared default queue of other fleets on this Redis.
    const id = /^fleet-audit-([0-9a-f]{8})$/.exec(String(auditQueueOf(dir)))?.[1];
    if (id !== undefined)
      await deleteRedisKeys([
        `bull:fleet-audit-${id}:*`,
        `bull:fleet-audit-${id}-retention:*`,
        `fleet-up-${id}:*`,
      ]);
    rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);

describe('two local fleets on one Redis', () => {
  it('each get an audit queue of their own, named in fleet.json with the config they run', () => {
    expect(a.auditQueue).toMatch(/^fleet-audit-[0-9a-f]{8}$/);
    // The id its state directory keeps for the next start.
    expect(a.auditQueue).toBe(
      `fleet-audit-${readFileSync(join(a.stateDir, 'fleet-id'), 'utf8').trim()}`,
    );
    expect(auditQueueOf(a.stateDir)).toBe(a.auditQueue);
    // What `fleet stdio` runs for this fleet: the generated config (or fleet up's --config).
    expect(readFleetState(a.stateDir)?.configPath).toBe(join(a.stateDir, 'fleet.yaml'));
  });

  // Both tours only use fleet A, so they run side by side: the second one spends most of its
  // time waiting out the demo's 10 s for records that never come, the first starting fleet B.
  describe.concurrent('fleet demo beside it', () => {
    it('keeps its own audit records: fleet demo in another state directory shows all of its calls, labelled by tool', async ({
      expect,
    }) => {
      const dir = stateDir();
      // Port 1 answers nothing, so the demo starts fleet B while fleet A runs.
      const run = await fleet(
        ['--orchestrator', 'http://127.0.0.1:1', 'demo', '--state-dir', dir],
        { env },
      );
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      const trail = run.stdout.slice(run.stdout.indexOf('5. The audit trail'));
      const calls = [...trail.matchAll(/^ {3}(\S+) {2}trace ([0-9a-f]{32})\n(.*)$/gm)];
      expect(calls.map((m) => m[1])).toEqual([
        'lookup_customer',
        'send_email',
        'delete_record',
        'get_weather',
      ]);
      // Each call's chain records follow its trace line (not the "no audit records" note).
      for (const [, tool, , first] of calls) expect(first, tool).toMatch(/^ {5}request {2}/);
      expect(trail).not.toContain('no audit records');
      // Fleet A's worker took none of them.
      for (const [, tool, traceId] of calls) {
        const inA = await fleet([
          'audit',
          'trace',
          traceId as string,
          '--audit',
          a.urls['audit-logger'],
        ]);
        expect({ tool, code: inA.code }).toEqual({ tool, code: 1 });
      }
      const queue = auditQueueOf(dir);
      expect(queue).toMatch(/^fleet-audit-[0-9a-f]{8}$/);
      expect(queue).not.toBe(a.auditQueue);
    }, 180_000);

    it('says so when no audit record of its calls arrives', async ({ expect, onTestFinished }) => {
      // An audit API that answers, but holds none of the tour's records.
      const { url: audit, close } = await jsonServer((request) => {
        const traceId = /\/api\/audit\/traces\/(\w+)/.exec(request.url ?? '')?.[1];
        return { body: traceId ? { traceId, records: [] } : {} };
      });
      onTestFinished(close);

      const run = await fleet(
        [
          '--orchestrator',
          a.urls.orchestrator,
          'demo',
          '--audit',
          audit,
          '--state-dir',
          a.stateDir,
        ],
        { env },
      );
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      const trail = run.stdout.slice(run.stdout.indexOf('5. The audit trail'));
      expect(trail.match(/^ {5}no audit records \(none arrived within 10 s\)$/gm)).toHaveLength(4);
      expect(trail).toContain(`No audit records of any of these calls reached ${audit}.`);
    }, 60_000);
  });
});
