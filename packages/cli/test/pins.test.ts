/**
 * `fleet pins`, `fleet pins approve` and `fleet pins forget` against real policy-validator
 * processes started from source: one with `pinning: {enabled: true}` and a FLEET_TOKEN, one
 * with pinning off. Drifts are made as the orchestrator makes them: `tool-filter` on a
 * `tools/list` answer, then the same tool with another description. The services keep their
 * pins in Redis database 9 (the pin hashes have a fixed name), under tool names of this run,
 * and audit pin changes on a queue of this run there: both deleted afterwards.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  deleteKeys,
  freePort,
  type KeyScanner,
  type ServiceProcess,
  sourceCommand,
  startServiceProcess,
} from '@fleet/test-fixtures';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fleet, REPO_ROOT, redisCommand } from './helpers.ts';

const REDIS_DB = 9;
const TOKEN = `pins-${randomUUID()}`;
const RUN = randomUUID().slice(0, 8);
/** The services' AUDIT_QUEUE: pin changes are audited there, not on the shared `fleet-audit`. */
const AUDIT_QUEUE = `cli-pins-audit-${RUN}`;
/** Tool names of this run: `pin-<run>-<name>`. */
const toolName = (name: string) => `pin-${RUN}-${name}`;
const used = new Set<string>();

let dir: string;
let on: ServiceProcess;
let off: ServiceProcess;

async function startPolicyValidator(policy: string, env: Record<string, string> = {}) {
  const path = join(dir, `policy-${randomUUID()}.yaml`);
  await writeFile(path, policy);
  const redis = new URL(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  redis.pathname = `/${REDIS_DB}`;
  return startServiceProcess({
    ...sourceCommand(join(REPO_ROOT, 'services/policy-validator/src/main.ts')),
    cwd: dir,
    env: {
      PORT: '0',
      HOST: '127.0.0.1',
      POLICY_FILE: path,
      REDIS_URL: redis.href,
      AUDIT_QUEUE,
      LOG_LEVEL: 'warn',
      OTEL_TRACES_EXPORTER: 'none',
      OTEL_METRICS_EXPORTER: 'none',
      ...env,
    },
    readyTimeoutMs: 60_000,
  });
}

/** SCAN and DEL in {@link REDIS_DB}, for {@link deleteKeys}. */
const keysInDb: KeyScanner = {
  scan: async (...args) =>
    (await redisCommand(['SCAN', ...args.map(String)], 2_000, REDIS_DB)) as [string, string[]],
  del: async (...keys) => Number(await redisCommand(['DEL', ...keys], 2_000, REDIS_DB)),
};

/** The records waiting in {@link AUDIT_QUEUE} (one job each: the service does not batch). */
async function queuedRecords(): Promise<Array<Record<string, unknown>>> {
  const ids = await redisCommand(
    ['LRANGE', `bull:${AUDIT_QUEUE}:wait`, '0', '-1'],
    2_000,
    REDIS_DB,
  );
  const records = [];
  for (const id of Array.isArray(ids) ? ids : []) {
    const data = await redisCommand(['HGET', `bull:${AUDIT_QUEUE}:${id}`, 'data'], 2_000, REDIS_DB);
    if (typeof data === 'string') records.push(JSON.parse(data) as Record<string, unknown>);
  }
  return records;
}

/**
 * The first record in {@link AUDIT_QUEUE} of `event` on `target`, waited for up to 5 s: the
 * producer sends it a moment after the answer.
 */
async function queuedRecord(
  event: string,
  target: string,
): Promise<Record<string, unknown> | undefined> {
  for (let wait = 0; wait < 50; wait++) {
    const record = (await queuedRecords()).find((r) => r.event === event && r.target === target);
    if (record) return record;
    await new Promise((tick) => setTimeout(tick, 100));
  }
  return undefined;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fleet-cli-pins-'));
  [on, off] = await Promise.all([
    startPolicyValidator('version: 1\ndefault: allow\npinning: {enabled: true}\n', {
      FLEET_TOKEN: TOKEN,
    }),
    startPolicyValidator('version: 1\ndefault: allow\n'),
  ]);
}, 90_000);

afterAll(async () => {
  await Promise.all([on?.stop('SIGTERM', 5_000), off?.stop('SIGTERM', 5_000)]);
  if (used.size > 0)
    for (const hash of ['fleet:pins:digests', 'fleet:pins:drifts'])
      await redisCommand(['HDEL', hash, ...used], 2_000, REDIS_DB).catch(() => undefined);
  await deleteKeys(keysInDb, `bull:${AUDIT_QUEUE}:*`).catch(() => undefined);
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A tool definition as an MCP server lists it. */
const tool = (name: string, description: string) => {
  used.add(name);
  return { name, description, inputSchema: { type: 'object' } };
};

/** `tools/list` answered with `tools`, through the enabled service's tool-filter. */
async function list(...tools: unknown[]): Promise<string[]> {
  const reply = await fetch(`${on.url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${TOKEN}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'interceptor/invoke',
      params: {
        name: 'tool-filter',
        event: 'tools/list',
        phase: 'response',
        payload: { tools },
        context: { principal: { type: 'user', id: 'op' }, timestamp: new Date().toISOString() },
      },
    }),
  });
  const body = (await reply.json()) as { result: { payload: { tools: Array<{ name: string }> } } };
  return body.result.payload.tools.map((t) => t.name);
}

/** A tool pinned as `v1`, then listed as `v2`: drifted. */
async function drifted(name: string) {
  const v1 = tool(toolName(name), `${name} v1`);
  expect(await list(v1)).toEqual([v1.name]);
  expect(await list({ ...v1, description: `${name} v2` })).toEqual([]);
  return v1.name;
}

/** The enabled service's own answer. */
async function pinsState() {
  const res = await fetch(`${on.url}/policy/pins`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  return (await res.json()) as {
    enabled: boolean;
    pins: Array<{ tool: string; digest: string; pinnedAt: string }>;
    drifts: Array<{ tool: string; pinned: string; seen: string; firstSeen: string }>;
  };
}

const pins = (argv: readonly string[], env: Record<string, string> = { FLEET_TOKEN: TOKEN }) =>
  fleet(['pins', ...argv], { env: { FLEET_POLICY_URL: on.url, ...env }, cwd: dir });

describe('fleet pins', () => {
  it('lists a drifted tool first, marked, with short digests and the command to approve it', async () => {
    const stable = tool(toolName('aaa-stable'), 'never changes');
    await list(stable);
    const name = await drifted('zzz-drift');
    const drift = (await pinsState()).drifts.find((d) => d.tool === name);
    expect(drift).toBeDefined();
    const run = await pins([]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toMatch(
      /^\d+ of \d+ tools DRIFTED: hidden from tools\/list and refused until approved$/,
    );
    expect(lines[1]).toMatch(/^ {3}TOOL +STATUS +PINNED +SEEN +SINCE$/);
    const row = lines.findIndex((l) => l.includes(name));
    const stableRow = lines.findIndex((l) => l.includes(stable.name));
    // Drifted (sorted 'zzz') before pinned ('aaa').
    expect(row).toBeGreaterThan(1);
    expect(row).toBeLessThan(stableRow);
    expect(lines[row]).toMatch(
      new RegExp(
        `^! +${name} +DRIFTED +${drift?.pinned.slice(0, 12)} +${drift?.seen.slice(0, 12)} +\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ$`,
      ),
    );
    expect(lines[stableRow]).toMatch(new RegExp(`^ +${stable.name} +pinned +[0-9a-f]{12} +- +`));
    expect(run.stdout).not.toContain(drift?.seen);
    expect(run.stdout).toContain(
      `review each new definition, then approve it (--digest: the SEEN you reviewed):\n`,
    );
    expect(run.stdout).toContain(
      `  fleet pins approve ${name} --digest ${drift?.seen.slice(0, 12)}\n`,
    );
  });

  it('--json prints the service answer, full digests', async () => {
    const name = await drifted('json');
    const run = await pins(['--json']);
    expect(run.code).toBe(0);
    const printed = JSON.parse(run.stdout) as Awaited<ReturnType<typeof pinsState>>;
    expect(printed.enabled).toBe(true);
    const drift = printed.drifts.find((d) => d.tool === name);
    expect(drift?.seen).toMatch(/^[0-9a-f]{64}$/);
    expect((await pinsState()).drifts.find((d) => d.tool === name)).toEqual(drift);
  });

  it('pins approve clears the drift, pins the seen definition, says so', async () => {
    const name = await drifted('approve');
    const seen = (await pinsState()).drifts.find((d) => d.tool === name)?.seen ?? '';
    const run = await pins(['approve', name]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      new RegExp(
        `^approved ${name}: pinned ${seen.slice(0, 12)} at \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ; it is listed and callable again\\n  sha256 ${seen}\\n$`,
      ),
    );
    const state = await pinsState();
    expect(state.drifts.map((d) => d.tool)).not.toContain(name);
    expect(state.pins.find((p) => p.tool === name)?.digest).toBe(seen);
    // The approved definition is listed again.
    expect(await list({ ...tool(name, 'approve v2') })).toEqual([name]);
    const listed = await pins([]);
    expect(listed.stdout).toMatch(new RegExp(`\\n +${name} +pinned +${seen.slice(0, 12)} `));
  });

  it('pins approve leaves its admin record on the AUDIT_QUEUE of the service', async () => {
    const name = await drifted('audited');
    expect((await pins(['approve', name])).code).toBe(0);
    expect(await queuedRecord('admin/pins/approve', name)).toMatchObject({
      kind: 'admin',
      event: 'admin/pins/approve',
      decision: 'allowed',
      principal: { type: 'service', id: 'FLEET_TOKEN' },
    });
  });

  it('pins approve --digest takes the short SEEN digest, --json prints the new pin', async () => {
    const name = await drifted('short');
    const seen = (await pinsState()).drifts.find((d) => d.tool === name)?.seen ?? '';
    const run = await pins([
      'approve',
      name,
      '--digest',
      seen.slice(0, 12).toUpperCase(),
      '--json',
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      tool: name,
      digest: seen,
      pinnedAt: expect.stringMatching(/^\d{4}-/),
    });
  });

  it('pins approve --digest refuses a definition that changed again (409), approves nothing', async () => {
    const name = await drifted('again');
    const reviewed = (await pinsState()).drifts.find((d) => d.tool === name)?.seen ?? '';
    expect(await list(tool(name, 'again v3'))).toEqual([]);
    const full = await pins(['approve', name, '--digest', reviewed]);
    expect(full.code).toBe(1);
    expect(full.stdout).toBe('');
    expect(full.stderr).toBe(
      `error: tool "${name}" changed again since ${reviewed.slice(0, 12)} was reviewed: nothing approved; review its new definition (fleet pins shows its digest) and approve that one\n  reviewed: ${reviewed}\n`,
    );
    const json = await pins(['approve', name, '--digest', reviewed, '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stderr)).toMatchObject({ code: 'PIN_CONFLICT', status: 409 });
    // The short form is checked against the drift before anything is sent.
    const short = await pins(['approve', name, '--digest', reviewed.slice(0, 12)]);
    expect(short.code).toBe(1);
    expect(short.stderr).toContain(`tool "${name}" changed again since ${reviewed.slice(0, 12)}`);
    expect((await pinsState()).drifts.map((d) => d.tool)).toContain(name);
  });

  it('pins approve of a tool without drift exits 1 with the 404 message', async () => {
    const name = toolName('steady');
    await list(tool(name, 'steady'));
    const run = await pins(['approve', name]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `error: tool "${name}" has no drift to approve at ${on.url}: nothing changed since it was pinned, or it was never listed (fleet pins shows the pins and drifts)\n`,
    );
    const json = await pins(['approve', name, '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stderr)).toEqual({
      error: expect.stringContaining('has no drift to approve'),
      code: 'NO_DRIFT',
      status: 404,
    });
    // A short --digest for it is refused the same way, from the list.
    const short = await pins(['approve', name, '--digest', 'abcdef012345']);
    expect(short.code).toBe(1);
    expect(short.stderr).toContain(`tool "${name}" has no drift to approve`);
  });

  it('pins forget removes the pin and the drift, says so; the next listing pins the tool afresh', async () => {
    // A name with a slash: one path segment, percent-encoded.
    const name = await drifted('fs/forget');
    const run = await pins(['forget', name]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      `forgot the pin of ${name}: the next tools/list that shows it pins its definition afresh\n`,
    );
    const state = await pinsState();
    expect(state.pins.map((p) => p.tool)).not.toContain(name);
    expect(state.drifts.map((d) => d.tool)).not.toContain(name);
    // Trust on first use again: the definition listed now is pinned, and listed.
    expect(await list(tool(name, 'fs/forget v2'))).toEqual([name]);
    expect((await pinsState()).pins.map((p) => p.tool)).toContain(name);
    const json = await pins(['forget', name, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ tool: name, forgotten: true });
  });

  it('pins forget leaves its admin record on the AUDIT_QUEUE of the service', async () => {
    const name = toolName('forget-audited');
    await list(tool(name, 'forget-audited'));
    expect((await pins(['forget', name])).code).toBe(0);
    expect(await queuedRecord('admin/pins/forget', name)).toMatchObject({
      kind: 'admin',
      event: 'admin/pins/forget',
      method: 'DELETE /policy/pins/{tool}',
      decision: 'allowed',
      principal: { type: 'service', id: 'FLEET_TOKEN' },
    });
  });

  it('pins forget of a tool that is not pinned exits 1 with the 404 message', async () => {
    const name = toolName('never-listed');
    const run = await pins(['forget', name]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `error: tool "${name}" is not pinned at ${on.url}: nothing to forget (fleet pins shows the pins and drifts)\n`,
    );
    const json = await pins(['forget', name, '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stderr)).toEqual({
      error: expect.stringContaining('is not pinned'),
      code: 'NO_PIN',
      status: 404,
    });
  });

  it('pins forget refuses an empty tool name before sending anything (exit 2)', async () => {
    const run = await fleet(['pins', 'forget', ' ', '--policy', 'http://127.0.0.1:1']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('error: the tool name is empty (fleet pins lists the pinned tools)\n');
  });

  it('pins approve refuses a malformed --digest before sending anything (exit 2)', async () => {
    const run = await fleet([
      'pins',
      'approve',
      'x',
      '--digest',
      'abc',
      '--policy',
      'http://127.0.0.1:1',
    ]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      'error: --digest must be the SEEN digest fleet pins shows (12 to 64 hex digits), got "abc"\n',
    );
  });

  it('needs the service token: none, or a wrong one (exit 1)', async () => {
    const none = await pins([], {});
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(
      `error: the policy-validator at ${on.url} needs a token (set FLEET_TOKEN to its FLEET_TOKEN)\n`,
    );
    const wrong = await pins(['approve', 'x'], { FLEET_TOKEN: 'nope' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe(
      `error: the policy-validator at ${on.url} refused the token (FLEET_TOKEN)\n`,
    );
    const forget = await pins(['forget', 'x', '--json'], {});
    expect(forget.code).toBe(1);
    expect(JSON.parse(forget.stderr)).toMatchObject({ code: 'POLICY_API_ERROR', status: 401 });
  });

  it('says pinning is off, and how to turn it on, hints as launched', async () => {
    const run = await fleet(['pins', '--policy', off.url], { launcher: 'pnpm fleet' });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout.split('\n').slice(0, 2)).toEqual([
      'pinning is off: the policy-validator neither pins nor checks tool definitions',
      '  turn it on: add "pinning: {enabled: true}" to its policy file (POLICY_FILE; pnpm fleet up runs packages/cli/demo-config/policy.yaml unless POLICY_FILE names another); the service reloads the file',
    ]);
    const json = await fleet(['pins', '--policy', off.url, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ enabled: false });
  });

  it('finds the service in the fleet.json of --state-dir, with the fleet token', async () => {
    const stateDir = join(dir, 'state');
    await mkdir(stateDir);
    await writeFile(
      join(stateDir, 'fleet.json'),
      JSON.stringify({
        urls: { 'policy-validator': on.url },
        fleetToken: TOKEN,
        pid: process.pid,
      }),
    );
    const run = await fleet(['pins', '--state-dir', stateDir, '--json']);
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toMatchObject({ enabled: true });
    // FLEET_POLICY_URL wins over fleet.json; without FLEET_TOKEN, no token is taken from it.
    const env = await fleet(['pins', '--state-dir', stateDir], {
      env: { FLEET_POLICY_URL: off.url },
    });
    expect(env.stdout).toContain('pinning is off');
  });

  it('says when the service cannot reach its pin store, Redis (503, exit 1)', async () => {
    const redisPort = await freePort();
    const lost = await startPolicyValidator(
      'version: 1\ndefault: allow\npinning: {enabled: true}\n',
      {
        REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      },
    );
    try {
      const run = await fleet(['pins', '--policy', lost.url]);
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(
        `error: the policy-validator at ${lost.url} cannot reach its tool pin store: the tool pin store is unavailable (is Redis running at the service's REDIS_URL?)\n`,
      );
      const approve = await fleet(['pins', 'approve', 'x', '--policy', lost.url, '--json']);
      expect(JSON.parse(approve.stderr)).toMatchObject({
        code: 'PIN_STORE_UNAVAILABLE',
        status: 503,
      });
      const forget = await fleet(['pins', 'forget', 'x', '--policy', lost.url]);
      expect(forget.code).toBe(1);
      expect(forget.stderr).toBe(run.stderr);
    } finally {
      await lost.stop('SIGTERM', 5_000);
    }
  }, 60_000);

  it('says the service is unreachable and how to start it, as launched (exit 1)', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const run = await fleet(['pins', '--policy', url, '--state-dir', '/tmp/b'], {
      launcher: 'pnpm fleet',
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `error: cannot reach the policy-validator at ${url}: is the fleet running? (pnpm fleet up --state-dir /tmp/b, or pass --policy)\n  reason: ECONNREFUSED\n`,
    );
    const approve = await fleet(['pins', 'approve', 'x', '--json'], {
      env: { FLEET_POLICY_URL: url },
    });
    expect(approve.code).toBe(1);
    expect(JSON.parse(approve.stderr)).toMatchObject({ code: 'POLICY_UNREACHABLE' });
    const forget = await fleet(['pins', 'forget', 'x', '--json'], {
      env: { FLEET_POLICY_URL: url },
    });
    expect(forget.code).toBe(1);
    expect(JSON.parse(forget.stderr)).toMatchObject({ code: 'POLICY_UNREACHABLE' });
  });
});
