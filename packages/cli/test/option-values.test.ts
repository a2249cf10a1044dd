/**
 * Empty option values: each is a usage error (exit 2) naming the option and what it takes,
 * before anything is asked or started, never read as if the option had been left out.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defer, fleet, jsonServer } from './helpers.ts';

/** A server standing in for every API the commands could ask, counting the requests. */
async function anyApi(): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const { url, close } = await jsonServer(() => {
    requests++;
    return { body: { services: [], records: [], stages: [] } };
  });
  defer(close);
  return { url, requests: () => requests };
}

describe('an empty option value', () => {
  it.each([
    [
      ['services', '--admin-token', ''],
      '--admin-token',
      "the bearer token, or leave --admin-token out for $FLEET_ADMIN_TOKEN or the running fleet's",
    ],
    [
      ['register', 'http://127.0.0.1:9/mcp', '--token', ''],
      '--token',
      "the service's token, or leave --token out for none",
    ],
    [
      ['services', '--state-dir', ''],
      '--state-dir',
      'a directory, or leave --state-dir out for the default, .fleet',
    ],
    [
      ['up', '--state-dir', ' '],
      '--state-dir',
      'a directory, or leave --state-dir out for the default, .fleet',
    ],
    [
      ['up', '--config', ''],
      '--config',
      'an orchestrator config file, or leave --config out for the generated one',
    ],
    [
      ['stdio', '--config', ''],
      '--config',
      'an orchestrator config file, or leave --config out for the fleet’s',
    ],
    [
      ['new', 'interceptor', 'x-guard', '--dir', ''],
      '--dir',
      'the services directory, or leave --dir out for services',
    ],
    [
      ['audit', 'query', '--tool', ''],
      '--tool',
      'a tool, prompt or resource name, or leave --tool out for every one',
    ],
    [
      ['audit', 'query', '--trace', ''],
      '--trace',
      'a trace id, or leave --trace out for every trace',
    ],
    [
      ['audit', 'query', '--principal', ''],
      '--principal',
      'a principal id, type:id or type, or leave --principal out for every principal',
    ],
    [
      ['audit', 'query', '--interceptor', ''],
      '--interceptor',
      'an interceptor name, or leave --interceptor out for every interceptor',
    ],
  ])('fleet %j is refused, naming the option and its form (exit 2)', async (argv, option, form) => {
    const api = await anyApi();
    const cwd = await mkdtemp(join(tmpdir(), 'fleet-empty-'));
    defer(() => rm(cwd, { recursive: true, force: true }));
    const value = argv[argv.indexOf(option) + 1];
    const run = await fleet(argv, {
      cwd,
      // Whatever the old reading started would fail at once: no Redis answers here.
      env: {
        FLEET_ORCHESTRATOR_URL: api.url,
        FLEET_AUDIT_URL: api.url,
        REDIS_URL: 'redis://127.0.0.1:9',
      },
    });
    expect(run).toEqual({
      code: 2,
      stdout: '',
      stderr: `error: ${option} ${JSON.stringify(value)}: expected ${form}\n`,
    });
    expect(api.requests()).toBe(0);
  });

  it.each([
    [['audit', 'query', '--since', ''], '--since must be a duration back from now'],
    [['audit', 'query', '--limit', ''], '--limit must be a positive integer, got ""'],
    [['up', '--port', ''], '--port must be 0..65535, got ""'],
    [['--orchestrator', '', 'services'], '--orchestrator "" is not a valid URL'],
  ])('fleet %j was refused already, as the others now are (exit 2)', async (argv, message) => {
    const run = await fleet(argv, { env: { REDIS_URL: 'redis://127.0.0.1:9' } });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(message);
  });
});

describe('a port fetch refuses', () => {
  // fetch will not connect to these (the Fetch standard's bad ports): every command said
  // "cannot reach ... is the fleet running?" with no reason.
  it('fleet up --port on one is a usage error naming the port (exit 2)', async () => {
    const run = await fleet(['up', '--port', '6000'], {
      env: { REDIS_URL: 'redis://127.0.0.1:9' },
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      'error: --port 6000: port 6000 is one fetch refuses to connect to (a "bad port" in the Fetch standard), so the other fleet commands and web clients could not reach the gateway; use another port\n',
    );
  });

  it.each([
    [
      ['services', '--orchestrator', 'http://127.0.0.1:6665'],
      'the orchestrator at http://127.0.0.1:6665',
    ],
    [
      ['audit', 'query', '--audit', 'http://localhost:10080/'],
      'the audit API at http://localhost:10080',
    ],
  ])('fleet %j says the port is why it cannot reach the service (exit 1)', async (argv, what) => {
    const run = await fleet(argv);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`error: cannot reach ${what}: port `);
    expect(run.stderr).toContain('is one fetch refuses to connect to');
    expect(run.stderr).not.toContain('is the fleet running');
  });
});
