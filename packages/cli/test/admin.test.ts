/**
 * The admin commands against a real orchestrator process (its admin API, Redis-backed
 * registry) and a real kit interceptor service on 127.0.0.1:0.
 */

import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  allow,
  createInterceptorHost,
  createInterceptorHttpApp,
  defineMutator,
  defineValidator,
  type Listening,
  listen,
  unchanged,
} from '@fleet/interceptor-kit';
import { freePort, startHttpBackend } from '@fleet/test-fixtures';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  defer,
  type FleetRun,
  fleet,
  startOrchestrator,
  type TestOrchestrator,
} from './helpers.ts';

let orchestrator: TestOrchestrator;
/** One whose config file lists the test service. */
let configured: TestOrchestrator;
/** One with `chain.speculativeMutators`. */
let speculative: TestOrchestrator;
let service: Listening;
let serviceUrl: string;

beforeAll(async () => {
  const host = createInterceptorHost([
    defineValidator({
      name: 'cli-guard',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: () => allow(),
    }),
    defineMutator({
      name: 'cli-tagger',
      hooks: [{ events: ['tools/*'], phase: 'response' }],
      priorityHint: { response: 7 },
      handler: () => unchanged(),
    }),
  ]);
  const { listener } = createInterceptorHttpApp(host, { name: 'cli-test-service' });
  service = await listen(listener, { service: 'cli-test-service', announce: false });
  serviceUrl = `${service.url}/mcp`;
  // At once: each takes seconds to start.
  [orchestrator, configured, speculative] = await Promise.all([
    startOrchestrator(),
    startOrchestrator(`interceptors:\n  - {url: "${serviceUrl}"}\n`),
    startOrchestrator('chain: {speculativeMutators: true}\n'),
  ]);
}, 45_000);

afterAll(async () => {
  await Promise.all([orchestrator?.close(), configured?.close(), speculative?.close()]);
  await service?.close(100);
});

/** `fleet` pointed at the test orchestrator with its admin token. */
function admin(argv: readonly string[]): Promise<FleetRun> {
  return fleet(argv, {
    env: { FLEET_ORCHESTRATOR_URL: orchestrator.url, FLEET_ADMIN_TOKEN: orchestrator.adminToken },
  });
}

/** Register the test service through the CLI (JSON output) and unregister it after the test. */
async function registerService(extra: readonly string[] = []): Promise<string> {
  const run = await admin(['--json', 'register', serviceUrl, ...extra]);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  const { id } = JSON.parse(run.stdout) as { id: string };
  defer(() => admin(['unregister', id]));
  return id;
}

/** The columns of the register table: one per overridable setting. */
const REGISTER_HEADERS = ['NAME', 'TYPE', 'MODE', 'PRIORITY', 'FAIL-OPEN', 'TIMEOUT', 'HOOKS'];

/**
 * A state directory (removed after the test) whose fleet.json, as a running `fleet up` leaves
 * it, names the test orchestrator and its admin token.
 */
async function liveStateDir(prefix = 'fleet-state-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  defer(() => rm(dir, { recursive: true, force: true }));
  await writeFile(
    join(dir, 'fleet.json'),
    JSON.stringify({
      urls: { orchestrator: orchestrator.url },
      adminToken: orchestrator.adminToken,
      pid: process.pid,
    }),
  );
  return dir;
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

describe('fleet register', () => {
  it('registers a service and prints it with its interceptors as a table', async () => {
    const run = await admin(['register', serviceUrl]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const [heading, header, ...rows] = lines(run.stdout);
    const id = /^registered (\S+) \((.+)\)$/.exec(heading ?? '');
    expect(id?.[2]).toBe(serviceUrl);
    defer(() => admin(['unregister', id?.[1] ?? '']));
    expect(header?.split(/\s{2,}/)).toEqual(REGISTER_HEADERS);
    expect(rows[0]?.split(/\s{2,}/)).toEqual([
      'cli-guard',
      'validation',
      'active',
      '0',
      'no',
      '-',
      'tools/call (request)',
    ]);
    expect(rows[1]?.split(/\s{2,}/)).toEqual([
      'cli-tagger',
      'mutation',
      'active',
      'req 0 / res 7',
      'no',
      '-',
      'tools/* (response)',
    ]);
    // Nothing is overridden, so nothing is marked and there is no legend.
    expect(rows.slice(2)).toEqual([
      'see where it runs: fleet chain --event tools/call --phase request',
    ]);
    // Columns line up: every cell of the second column starts where its header does.
    const column = header?.indexOf('TYPE');
    expect(rows[0]?.indexOf('validation')).toBe(column);
    expect(rows[1]?.indexOf('mutation')).toBe(column);
  });

  it('says a second registration of the same URL replaced token and overrides, and shows them applied', async () => {
    const id = await registerService(['--token', 'first']);
    const again = await admin(['register', serviceUrl, '--override', 'cli-tagger.mode=audit']);
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    const [heading, header, guard, tagger, note] = lines(again.stdout);
    expect(heading).toBe(
      `updated ${id} (${serviceUrl}): its registration was replaced (token none, overrides cli-tagger: mode=audit)`,
    );
    expect(header?.split(/\s{2,}/)).toEqual(REGISTER_HEADERS);
    expect(guard?.split(/\s{2,}/).slice(0, 3)).toEqual(['cli-guard', 'validation', 'active']);
    expect(tagger?.split(/\s{2,}/).slice(0, 3)).toEqual(['cli-tagger', 'mutation', 'audit*']);
    expect(note).toBe('* set by --override');
    // What the orchestrator now holds: the new overrides, no token.
    const services = JSON.parse((await admin(['--json', 'services'])).stdout) as {
      services: Array<{ id: string; overrides?: unknown }>;
    };
    expect(services.services.find((s) => s.id === id)?.overrides).toEqual({
      'cli-tagger': { mode: 'audit' },
    });
    // The services table shows them too.
    expect((await admin(['services'])).stdout).toContain(
      'cli-guard (validation), cli-tagger (mutation; mode=audit)',
    );
  });

  it('shows failOpen and timeoutMs overrides in their own columns, marked as the legend says', async () => {
    const run = await admin([
      'register',
      serviceUrl,
      '--override',
      'cli-guard.failOpen=true',
      '--override',
      'cli-tagger.timeoutMs=250',
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const [heading, header, guard, tagger, legend] = lines(run.stdout);
    defer(() => admin(['unregister', /^registered (\S+)/.exec(heading ?? '')?.[1] ?? '']));
    expect(header?.split(/\s{2,}/)).toEqual(REGISTER_HEADERS);
    expect(guard?.split(/\s{2,}/).slice(4, 6)).toEqual(['yes*', '-']);
    expect(tagger?.split(/\s{2,}/).slice(4, 6)).toEqual(['no', '250 ms*']);
    expect(legend).toBe('* set by --override');
  });

  it('names the --state-dir it was given in its hint, so that the hint finds the same fleet', async () => {
    const dir = await liveStateDir('fleet state ');
    const run = await fleet(['register', serviceUrl, '--state-dir', dir]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    defer(() =>
      fleet(['unregister', /^registered (\S+)/.exec(run.stdout)?.[1] ?? '', '--state-dir', dir]),
    );
    expect(lines(run.stdout).at(-1)).toBe(
      `see where it runs: fleet chain --event tools/call --phase request --state-dir '${dir}'`,
    );
  });

  it('says a config entry is left unchanged when its URL is registered again', async () => {
    const env = {
      FLEET_ORCHESTRATOR_URL: configured.url,
      FLEET_ADMIN_TOKEN: configured.adminToken,
    };
    const run = await fleet(['register', serviceUrl, '--override', 'cli-guard.failOpen=true'], {
      env,
      launcher: 'pnpm fleet',
    });
    expect(run.code).toBe(0);
    const [heading, ...rest] = lines(run.stdout);
    expect(heading).toMatch(
      /comes from the orchestrator's config file: the config entry was left unchanged/,
    );
    expect(run.stdout).not.toContain('set by --override');
    expect(run.stdout).not.toContain('active*');
    expect(rest).toContain(
      "as the service declares them; the config's overrides apply on top (pnpm fleet chain shows what runs)",
    );
    // Nor can it be unregistered: the refusal says where to remove it.
    const id = heading?.split(' ')[0] ?? '';
    const unregister = await fleet(['unregister', id], { env });
    expect(unregister.code).toBe(1);
    expect(lines(unregister.stderr)[0]).toBe(
      `error: the orchestrator answered 409: service "${id}" comes from the config file and cannot be removed at runtime (edit the orchestrator's config file to remove it)`,
    );
  });

  it.each([
    ['a space in the host', 'http://a b/mcp'],
    ['an unclosed IPv6 bracket', 'http://[::1/mcp'],
    ['a port out of range', 'http://127.0.0.1:99999/mcp'],
    ['no scheme', '127.0.0.1:8090/mcp'],
    ['another scheme', 'ftp://127.0.0.1/mcp'],
  ])('refuses a service URL with %s (exit 2, one line) before calling the API', async (_, url) => {
    const run = await admin(['register', url]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(lines(run.stderr)).toHaveLength(1);
    expect(run.stderr).toContain(`the service URL "${url}"`);
  });

  it('prints the raw answer of the admin API with --json', async () => {
    const run = await admin(['register', serviceUrl, '--json']);
    expect(run.code).toBe(0);
    const body = JSON.parse(run.stdout) as { id: string; url: string; interceptors: unknown[] };
    defer(() => admin(['unregister', body.id]));
    expect(body).toMatchObject({ url: serviceUrl });
    expect(body.interceptors).toEqual([
      expect.objectContaining({ name: 'cli-guard', type: 'validation' }),
      expect.objectContaining({ name: 'cli-tagger', type: 'mutation' }),
    ]);
  });

  it('sends --override assignments as overrides, parsed as JSON where they can be', async () => {
    const id = await registerService([
      '--override',
      'cli-guard.failOpen=true',
      '--override',
      'cli-tagger.timeoutMs=250',
      '--override',
      'cli-tagger.mode=audit',
    ]);
    const run = await admin(['services', '--json']);
    const { services } = JSON.parse(run.stdout) as {
      services: Array<{ id: string; overrides: unknown }>;
    };
    expect(services.find((s) => s.id === id)?.overrides).toEqual({
      'cli-guard': { failOpen: true },
      'cli-tagger': { timeoutMs: 250, mode: 'audit' },
    });
  });
});

describe('fleet services', () => {
  it('says how to add one when none is registered, as the CLI was launched', async () => {
    const run = await fleet(['services'], {
      env: { FLEET_ORCHESTRATOR_URL: orchestrator.url, FLEET_ADMIN_TOKEN: orchestrator.adminToken },
      launcher: 'pnpm fleet',
    });
    expect(run).toEqual({
      code: 0,
      stdout: 'no interceptor services registered (add one: pnpm fleet register <url>)\n',
      stderr: '',
    });
  });

  it('lists the registered services in a table, and the raw answer with --json', async () => {
    const id = await registerService();
    const run = await admin(['services']);
    expect(run.code).toBe(0);
    const [header, ...rows] = lines(run.stdout);
    expect(header?.split(/\s{2,}/)).toEqual(['ID', 'SOURCE', 'STATUS', 'INTERCEPTORS', 'URL']);
    expect(rows.map((row) => row.split(/\s{2,}/))).toContainEqual([
      id,
      'admin',
      'healthy',
      'cli-guard (validation), cli-tagger (mutation)',
      serviceUrl,
    ]);

    const json = await admin(['--json', 'services']);
    const body = JSON.parse(json.stdout) as { services: Array<{ id: string; source: string }> };
    expect(body.services).toContainEqual(expect.objectContaining({ id, source: 'admin' }));
  });
});

describe('fleet chain', () => {
  it('shows the stages of an event and phase in run order, overrides applied', async () => {
    const id = await registerService(['--override', 'cli-guard.failOpen=true']);
    const request = await admin(['chain']);
    expect(request.code).toBe(0);
    const [title, header, row] = lines(request.stdout);
    expect(title).toBe('tools/call, request phase');
    expect(header?.split(/\s{2,}/)).toEqual([
      'STAGE',
      'NAME',
      'TYPE',
      'MODE',
      'PRIORITY',
      'FAIL-OPEN',
      'TIMEOUT',
      'SERVICE',
    ]);
    expect(row?.trim().split(/\s{2,}/)).toEqual([
      '1 validators',
      'cli-guard',
      'validation',
      'active',
      '0',
      'yes',
      '-',
      id,
    ]);

    const response = await admin(['chain', '--event', 'tools/list', '--phase', 'response']);
    expect(lines(response.stdout)[0]).toBe('tools/list, response phase');
    expect(
      lines(response.stdout)[2]
        ?.split(/\s{2,}/)
        .slice(0, 5),
    ).toEqual(['1 mutators', 'cli-tagger', 'mutation', 'active', '7']);

    const json = await admin(['chain', '--json', '--phase', 'response']);
    expect(JSON.parse(json.stdout)).toEqual({
      event: 'tools/call',
      phase: 'response',
      stages: [
        {
          kind: 'mutators',
          interceptors: [
            {
              name: 'cli-tagger',
              service: id,
              type: 'mutation',
              mode: 'active',
              priority: 7,
              failOpen: false,
              timeoutMs: null,
            },
          ],
        },
      ],
    });
  });

  it('marks a mutator stage that starts with the validators under speculativeMutators', async () => {
    const host = createInterceptorHost([
      defineValidator({
        name: 'spec-guard',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => allow(),
      }),
      defineMutator({
        name: 'spec-shaper',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: () => unchanged(),
      }),
    ]);
    const served = await listen(createInterceptorHttpApp(host, { name: 'spec' }).listener, {
      service: 'spec',
      announce: false,
    });
    defer(() => served.close(100));
    const env = {
      FLEET_ORCHESTRATOR_URL: speculative.url,
      FLEET_ADMIN_TOKEN: speculative.adminToken,
    };
    expect((await fleet(['register', `${served.url}/mcp`], { env })).code).toBe(0);
    const run = await fleet(['chain'], { env });
    expect(run.code).toBe(0);
    const [, , first, second, ...notes] = lines(run.stdout);
    expect(first?.split(/\s{2,}/).slice(0, 2)).toEqual(['1 validators', 'spec-guard']);
    expect(second?.split(/\s{2,}/).slice(0, 2)).toEqual(['2 mutators*', 'spec-shaper']);
    expect(notes).toContain(
      '* started together with the validators (chain.speculativeMutators); applied only if they pass',
    );
    const json = JSON.parse((await fleet(['--json', 'chain'], { env })).stdout) as {
      stages: Array<{ kind: string; speculative?: boolean }>;
    };
    expect(json.stages.map((s) => [s.kind, s.speculative])).toEqual([
      ['validators', undefined],
      ['mutators', true],
    ]);
    // The response phase never speculates (its validators must see the mutated result).
    const response = await fleet(['chain', '--phase', 'response', '--event', 'tools/call'], {
      env,
    });
    expect(response.stdout).not.toContain('*');
  });

  const EVENT_FORM =
    'expected one MCP method name, e.g. tools/call or resources/read (no spaces, no wildcard, at most 256 characters)';
  const long = `tools/${'x'.repeat(251)}`;
  it.each([
    [['--event', ''], `--event "": ${EVENT_FORM}`, ''],
    [['--event', ' '], `--event " ": ${EVENT_FORM}`, ''],
    [['--event', 'tools call'], `--event "tools call": ${EVENT_FORM}`, ''],
    [['--event', 'tools/*'], `--event "tools/*": ${EVENT_FORM}`, ''],
    [['--event', long], `--event "${long}": ${EVENT_FORM}`, ''],
    [
      ['--phase', ''],
      "option '--phase <phase>' argument '' is invalid. Allowed choices are request, response.",
      '(run with --help for usage)\n',
    ],
  ])(
    'refuses %j before asking the admin API, naming the option and its form (exit 2)',
    async (argv, message, help) => {
      // The orchestrator answers an empty event with the tools/call chain.
      expect(await admin(['chain', ...argv])).toEqual({
        code: 2,
        stdout: '',
        stderr: `error: ${message}\n${help}`,
      });
      expect(await admin(['chain', ...argv, '--json'])).toEqual({
        code: 2,
        stdout: '',
        stderr: `${JSON.stringify({ error: message, code: 'USAGE' })}\n`,
      });
    },
  );

  it('says when nothing runs', async () => {
    const run = await admin(['chain', '--event', 'prompts/get']);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('prompts/get, request phase: no interceptor runs\n');
  });
});

describe('a command given without its subcommand', () => {
  it.each([
    [
      [],
      'pnpm fleet needs a command: up, demo, stdio, register, unregister, services, chain, new, audit, pins',
    ],
    [['audit'], 'pnpm fleet audit needs a command: query, export, trace, stats'],
    [['new'], 'pnpm fleet new needs a command: interceptor'],
  ])('fleet %j shows the help and says what is missing (exit 2)', async (argv, message) => {
    const run = await fleet(argv, { launcher: 'pnpm fleet' });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^Usage: fleet /);
    expect(run.stderr.endsWith(`\nerror: ${message}\n`)).toBe(true);
    // With --json, the error alone, as one JSON line.
    const json = await fleet(['--json', ...argv], { launcher: 'pnpm fleet' });
    expect(json).toEqual({
      code: 2,
      stdout: '',
      stderr: `${JSON.stringify({ error: message, code: 'USAGE' })}\n`,
    });
  });
});

describe('usage errors with --json', () => {
  it.each([
    [['--json', 'servics'], "unknown command 'servics' (Did you mean services?)"],
    [
      ['chain', '--phase', 'both', '--json'],
      "option '--phase <phase>' argument 'both' is invalid. Allowed choices are request, response.",
    ],
    [['--json', 'register'], "missing required argument 'url'"],
    [['--json', 'help', 'nosuch'], "unknown command 'nosuch'"],
    [['--json', 'services', '--bogus'], "unknown option '--bogus'"],
  ])('fleet %j: one JSON line on stderr (exit 2)', async (argv, message) => {
    expect(await fleet(argv)).toEqual({
      code: 2,
      stdout: '',
      stderr: `${JSON.stringify({ error: message, code: 'USAGE' })}\n`,
    });
  });
});

describe('fleet unregister', () => {
  it('removes a registration; a second time the 404 of the admin API is shown', async () => {
    const registered = await admin(['--json', 'register', serviceUrl]);
    const { id } = JSON.parse(registered.stdout) as { id: string };
    const run = await admin(['unregister', id]);
    expect(run).toEqual({ code: 0, stdout: `unregistered ${id}\n`, stderr: '' });
    const services = await admin(['--json', 'services']);
    expect(JSON.parse(services.stdout).services).toEqual([]);

    const again = await admin(['unregister', id]);
    expect(again.code).toBe(1);
    expect(again.stdout).toBe('');
    expect(again.stderr).toBe(
      `error: the orchestrator answered 404: no service with id "${id}" (fleet services lists the ids)\n  id: ${id}\n`,
    );
  });

  it('says where the ids are, as the CLI was launched, for an empty id', async () => {
    const run = await fleet(['unregister', ' ', '--state-dir', '/tmp/b'], {
      launcher: 'pnpm fleet',
    });
    expect(run).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'error: the service id is empty (pnpm fleet services --state-dir /tmp/b lists the ids)\n',
    });
  });
});

describe('finding the orchestrator', () => {
  it('takes the MCP endpoint fleet up prints for the base URL (a trailing /mcp)', async () => {
    const run = await fleet(['--orchestrator', `${orchestrator.url}/mcp/`, 'services'], {
      env: { FLEET_ADMIN_TOKEN: orchestrator.adminToken },
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });

  it('uses the running fleet of --state-dir (orchestrator and admin token) when nothing else names one', async () => {
    const dir = await liveStateDir();
    for (const argv of [
      ['services', '--state-dir', dir],
      ['chain', '--state-dir', dir],
      ['unregister', 'nosuch', '--state-dir', dir],
    ]) {
      const run = await fleet(argv);
      expect(run.stderr, argv.join(' ')).not.toContain('cannot reach');
      expect(run.stderr, argv.join(' ')).not.toContain('token');
    }
    expect((await fleet(['services', '--state-dir', dir])).code).toBe(0);
    // The environment still wins over the fleet's state.
    const url = `http://127.0.0.1:${await freePort()}`;
    const env = await fleet(['services', '--state-dir', dir], {
      env: { FLEET_ORCHESTRATOR_URL: url },
    });
    expect(env.stderr).toContain(`cannot reach the orchestrator at ${url}`);
  });

  it('ignores the state of a fleet up that is gone', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fleet-state-'));
    defer(() => rm(dir, { recursive: true, force: true }));
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    await writeFile(
      join(dir, 'fleet.json'),
      JSON.stringify({ urls: { orchestrator: orchestrator.url }, pid: gone }),
    );
    // The default URL instead (where another fleet may run on a shared machine).
    const run = await fleet(['--json', 'services', '--state-dir', dir]);
    expect(run.stdout).not.toContain(orchestrator.url);
    if (run.code !== 0) expect(run.stderr).toContain('http://127.0.0.1:8080');
  });
});

describe('errors', () => {
  it('says when the orchestrator cannot be reached', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const run = await fleet(['--orchestrator', url, 'services']);
    expect(run.code).toBe(1);
    expect(run.stderr.split('\n')[0]).toBe(
      `error: cannot reach the orchestrator at ${url}: is the fleet running? (fleet up, or pass --orchestrator)`,
    );
  });

  it('says how to start the fleet as the CLI was launched, in the state directory it was given', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const dir = await mkdtemp(join(tmpdir(), 'fleet state '));
    defer(() => rm(dir, { recursive: true, force: true }));
    const run = await fleet(['services', '--state-dir', dir], {
      env: { FLEET_ORCHESTRATOR_URL: url },
      launcher: 'pnpm fleet',
    });
    expect(run.code).toBe(1);
    expect(run.stderr.split('\n')[0]).toBe(
      `error: cannot reach the orchestrator at ${url}: is the fleet running? (pnpm fleet up --state-dir '${dir}', or pass --orchestrator)`,
    );
  });

  it('says when the admin API refuses the token, or needs one', async () => {
    const wrong = await fleet(['--admin-token', 'nope', 'services'], {
      env: { FLEET_ORCHESTRATOR_URL: orchestrator.url },
    });
    expect(wrong).toEqual({
      code: 1,
      stdout: '',
      stderr: 'error: the admin API refused the token (set FLEET_ADMIN_TOKEN or --admin-token)\n',
    });
    const missing = await fleet(['--orchestrator', orchestrator.url, 'services']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('the admin API needs a token');

    const json = await fleet(['--json', '--orchestrator', orchestrator.url, 'services'], {
      env: { FLEET_ADMIN_TOKEN: 'nope' },
    });
    expect(JSON.parse(json.stderr)).toMatchObject({ code: 'ADMIN_UNAUTHORIZED', status: 401 });
  });

  it('shows the error and details of a 4xx answer', async () => {
    const backend = await startHttpBackend({ name: 'not-an-interceptor' });
    defer(() => backend.close());
    const run = await admin(['register', backend.url]);
    expect(run.code).toBe(1);
    const [message, ...details] = lines(run.stderr);
    expect(message?.startsWith('error: the orchestrator answered 422: ')).toBe(true);
    expect(message).toContain(`${backend.url} is not an interceptor server`);
    expect(details).toContain(`  url: ${backend.url}`);
  });

  it.each([
    ['no equals sign', 'cli-guard.failOpen', 'expected name.key=value'],
    ['no key', 'cli-guard=true', 'expected name.key=value'],
    ['an empty value', 'cli-guard.failOpen=', 'the value is empty'],
    ['hooks that are not JSON', 'cli-guard.hooks=tools/call', 'hooks must be JSON'],
    ['an unknown key', 'cli-guard.retries=3', 'invalid --override: cli-guard'],
    ['a value of the wrong type', 'cli-guard.timeoutMs=soon', 'cli-guard.timeoutMs'],
  ])('refuses an --override with %s (exit 2) before calling the API', async (_, text, expected) => {
    const run = await admin(['register', serviceUrl, '--override', text]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(expected);
    const services = await admin(['--json', 'services']);
    expect(JSON.parse(services.stdout).services).toEqual([]);
  });

  it('exits 2 on usage errors', async () => {
    for (const argv of [
      [],
      ['frobnicate'],
      ['register'],
      ['register', 'not-a-url'],
      ['chain', '--phase', 'both'],
      ['--orchestrator', 'ftp://x', 'services'],
      ['--orchestrator', 'http://a b', 'services'],
      ['unregister', ''],
      ['help', 'nosuch'],
    ]) {
      const run = await admin(argv);
      expect({ argv, code: run.code }).toEqual({ argv, code: 2 });
      expect(run.stderr).not.toBe('');
    }
    expect((await admin(['help', 'nosuch'])).stderr).toContain("unknown command 'nosuch'");
    expect((await admin(['frobnicate', '--json'])).stderr).toBe(
      `${JSON.stringify({ error: "unknown command 'frobnicate'", code: 'USAGE' })}\n`,
    );
    expect((await admin(['help', 'audit'])).code).toBe(0);
    expect((await admin(['--help'])).code).toBe(0);
    expect((await admin(['--version'])).stdout).toBe('0.1.0\n');
  });
});
