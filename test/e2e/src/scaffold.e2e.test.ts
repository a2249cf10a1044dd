/**
 * A scaffolded interceptor registered at runtime: `scaffoldInterceptor` writes a new
 * validation service into `services/zz-e2e-<run>` of this repository, it runs from source
 * as its own process, `fleet register` adds it to the running fleet, `fleet chain` shows it
 * among the validators, a tools/call with one of its blocked words is refused with -32602
 * naming it while other calls pass, and `fleet unregister` takes it out again.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm, stat, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { REPO_ROOT, scaffoldInterceptor } from '@fleet/cli';
import { type ServiceProcess, sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALICE_TOKEN,
  connectClient,
  type E2eFleet,
  resultText,
  runFleet,
  startE2eFleet,
} from './fleet.ts';

const PREFIX = 'zz-e2e-';
const RUN = randomBytes(4).toString('hex');
const NAME = `${PREFIX}${RUN}`;
const SERVICES_DIR = join(REPO_ROOT, 'services');
const DIR = join(SERVICES_DIR, NAME);
/** The scaffolded validator's configuration (`BLOCKED_WORDS`); the default is "forbidden". */
const BLOCKED = `contraband${RUN}`;

interface ChainView {
  event: string;
  phase: string;
  stages: Array<{
    kind: string;
    interceptors: Array<{ name: string; type: string; mode: string; service: string }>;
  }>;
}

let e2e: E2eFleet;
let service: ServiceProcess | undefined;
let client: Client | undefined;
let registered: string | undefined;
let base: string;

/** Leftovers of an interrupted run (older than 15 min), or a directory without package.json. */
async function removeStaleScaffolds(): Promise<void> {
  for (const entry of await readdir(SERVICES_DIR)) {
    if (!entry.startsWith(PREFIX)) continue;
    const path = join(SERVICES_DIR, entry);
    const stale = Date.now() - (await stat(path)).mtimeMs > 15 * 60_000;
    if (stale || !existsSync(join(path, 'package.json')))
      await rm(path, { recursive: true, force: true });
  }
}

/** What `pnpm install` would link for the new package: its workspace dependencies. */
async function linkWorkspaceDependencies(dir: string): Promise<void> {
  const scope = join(dir, 'node_modules', '@fleet');
  await mkdir(scope, { recursive: true });
  for (const name of ['core', 'interceptor-kit']) {
    await symlink(join(REPO_ROOT, 'packages', name), join(scope, name), 'dir');
  }
}

beforeAll(async () => {
  await removeStaleScaffolds();
  // The fleet starts while the service is scaffolded; when either fails, what the other
  // started is still handed to afterAll.
  const [started, scaffolded] = await Promise.allSettled([
    startE2eFleet(),
    scaffoldInterceptor({ name: NAME, type: 'validation', servicesDir: SERVICES_DIR }),
  ]);
  if (started.status === 'fulfilled') e2e = started.value;
  if (scaffolded.status === 'rejected') throw scaffolded.reason;
  if (started.status === 'rejected') throw started.reason;
  expect(scaffolded.value).toMatchObject({ dir: DIR, interceptor: NAME, type: 'validation' });
  await linkWorkspaceDependencies(DIR);
  base = e2e.fleet.urls.orchestrator;
  service = await startServiceProcess({
    ...sourceCommand(join(DIR, 'src/main.ts')),
    cwd: DIR,
    env: {
      PORT: '0',
      HOST: '127.0.0.1',
      FLEET_TOKEN: e2e.fleet.fleetToken,
      BLOCKED_WORDS: BLOCKED,
      LOG_LEVEL: 'warn',
    },
    readyTimeoutMs: 30_000,
  });
}, 180_000);

afterAll(async () => {
  await client?.close().catch(() => undefined);
  if (registered !== undefined && e2e)
    await runFleet(['unregister', registered, '--orchestrator', base]).catch(() => undefined);
  await service?.stop().catch(() => undefined);
  await rm(DIR, { recursive: true, force: true });
  await e2e?.stop();
}, 60_000);

async function chain(): Promise<ChainView> {
  const run = await runFleet(['chain', '--event', 'tools/call', '--json', '--orchestrator', base]);
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as ChainView;
}

const validatorsOf = (view: ChainView) =>
  view.stages
    .filter((stage) => stage.kind === 'validators')
    .flatMap((stage) => stage.interceptors.map((i) => i.name));

async function call(args: Record<string, unknown>): Promise<unknown> {
  client ??= await connectClient(e2e.fleet.mcpUrl, ALICE_TOKEN, 'e2e-scaffold');
  return client.callTool({ name: 'get_weather', arguments: args }).catch((e: unknown) => e);
}

describe('a scaffolded interceptor registered at runtime', { timeout: 60_000 }, () => {
  it('registers with `fleet register` and joins the validators of the tools/call chain', async () => {
    expect(service?.service).toBe(NAME);
    expect(validatorsOf(await chain())).not.toContain(NAME);

    const run = await runFleet([
      '--json',
      'register',
      `${service?.url}/mcp`,
      '--token',
      e2e.fleet.fleetToken,
      '--orchestrator',
      base,
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const added = JSON.parse(run.stdout) as {
      id: string;
      interceptors: Array<{ name: string; type: string }>;
    };
    registered = added.id;
    expect(added.interceptors).toEqual([
      expect.objectContaining({ name: NAME, type: 'validation' }),
    ]);

    const view = await chain();
    expect(view).toMatchObject({ event: 'tools/call', phase: 'request' });
    expect(validatorsOf(view)).toEqual(expect.arrayContaining([NAME, 'policy-validator']));
    const entry = view.stages.flatMap((s) => s.interceptors).find((i) => i.name === NAME);
    expect(entry).toMatchObject({ type: 'validation', mode: 'active', service: registered });
  });

  it('refuses a call carrying its blocked word with -32602 (policy denial) naming it; others pass', async () => {
    expect(registered, 'registered by the previous test').toBeDefined();
    const error = await call({ city: `Oslo ${BLOCKED.toUpperCase()} depot` });
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32602);
    const data = JSON.stringify((error as McpError).data);
    expect(data).toContain(NAME);
    expect(data).toContain('arguments.city');
    expect(`${(error as McpError).message} ${data}`).toContain(BLOCKED);

    // The template's default word is not blocked: this service was configured through
    // BLOCKED_WORDS.
    expect(resultText(await call({ city: 'Oslo' }))).toContain('Oslo');
    expect(resultText(await call({ city: 'forbidden city' }))).toContain('forbidden city');
  });

  it('leaves the chain with `fleet unregister`, and the word passes again', async () => {
    expect(registered, 'registered by the first test').toBeDefined();
    const run = await runFleet(['unregister', registered as string, '--orchestrator', base]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    registered = undefined;
    expect(validatorsOf(await chain())).not.toContain(NAME);
    expect(resultText(await call({ city: `Oslo ${BLOCKED}` }))).toContain('Oslo');
  });
});
