/**
 * The admin, audit and policy clients word a request that gets no JSON answer alike (one
 * `serviceFailure`): each with its own codes and option, against real servers on 127.0.0.1.
 */
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '@fleet/test-fixtures';
import { describe, expect, it } from 'vitest';
import { createAuditClient } from '../src/audit-client.ts';
import { CliError, createAdminClient, createPolicyClient } from '../src/index.ts';
import { defer, fleet } from './helpers.ts';

/** Budget of one request here: what the slow server outlasts. */
const TIMEOUT_MS = 300;

/** A server on 127.0.0.1 that answers every request with `answer`; its base URL. */
async function server(answer: (response: ServerResponse) => void): Promise<string> {
  const open = new Set<ServerResponse>();
  const listening = createServer((_request, response) => {
    open.add(response);
    answer(response);
  }).listen(0, '127.0.0.1');
  await once(listening, 'listening');
  defer(
    () =>
      new Promise<void>((resolve) => {
        for (const response of open) response.destroy();
        listening.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
}

/** One client's first request, as the commands make it, and how its errors name it. */
interface ClientCase {
  request: (baseUrl: string) => Promise<unknown>;
  path: string;
  name: string;
  service: string;
  flag: string;
  unreachable: string;
  notJson: string;
}

const CLIENTS: Record<'admin' | 'audit' | 'policy', ClientCase> = {
  admin: {
    request: (baseUrl) => createAdminClient({ baseUrl, fetch, timeoutMs: TIMEOUT_MS }).services(),
    path: '/admin/services',
    name: 'the orchestrator',
    service: 'the orchestrator',
    flag: '--orchestrator',
    unreachable: 'ORCHESTRATOR_UNREACHABLE',
    notJson: 'ADMIN_API_ERROR',
  },
  audit: {
    request: (baseUrl) =>
      createAuditClient({ baseUrl, fetch, timeoutMs: TIMEOUT_MS }).records(
        new URLSearchParams({ limit: '1' }),
      ),
    path: '/api/audit/records?limit=1',
    name: 'the audit API',
    service: 'the audit-logger',
    flag: '--audit',
    unreachable: 'AUDIT_UNREACHABLE',
    notJson: 'AUDIT_API_ERROR',
  },
  policy: {
    request: (baseUrl) => createPolicyClient({ baseUrl, fetch, timeoutMs: TIMEOUT_MS }).pins(),
    path: '/policy/pins',
    name: 'the policy-validator',
    service: 'the policy-validator',
    flag: '--policy',
    unreachable: 'POLICY_UNREACHABLE',
    notJson: 'POLICY_API_ERROR',
  },
};

async function failure(request: Promise<unknown>): Promise<CliError> {
  const error = await request.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CliError);
  return error as CliError;
}

describe.each(Object.entries(CLIENTS))('the %s client', (_, client) => {
  it('says nothing answers, how to start the fleet and which option to pass', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const error = await failure(client.request(url));
    expect(error.code).toBe(client.unreachable);
    expect(error.exitCode).toBe(1);
    expect(error.message).toBe(
      `cannot reach ${client.name} at ${url}: is the fleet running? (fleet up, or pass ${client.flag})`,
    );
    expect(error.details).toEqual({ reason: 'ECONNREFUSED' });
  });

  it('names the TLS failure of an https URL at a plain HTTP server, without the start hint', async () => {
    const url = (await server((response) => response.end('{}'))).replace('http:', 'https:');
    const error = await failure(client.request(url));
    expect(error.code).toBe(client.unreachable);
    expect(error.message).toBe(`cannot reach ${client.name} at ${url}`);
    expect(error.details).toEqual({ reason: expect.stringMatching(/SSL|TLS|EPROTO/) });
  });

  it('says when nothing answers in time, with the same code as no answer', async () => {
    const url = await server(() => undefined);
    const error = await failure(client.request(url));
    expect(error.code).toBe(client.unreachable);
    expect(error.message).toBe(`${client.name} at ${url} did not answer within ${TIMEOUT_MS} ms`);
  });

  it('asks whether the URL is the service when the answer is not JSON', async () => {
    const url = await server((response) => response.end('<html>hello</html>'));
    const error = await failure(client.request(url));
    expect(error.code).toBe(client.notJson);
    expect(error.status).toBe(200);
    expect(error.message).toBe(
      `${url}${client.path} answered 200 with a body that is not JSON: is ${url} ${client.service}?`,
    );
  });
});

describe('with --json', () => {
  it.each([
    [['services'], '--orchestrator', 'the orchestrator', 'ORCHESTRATOR_UNREACHABLE'],
    [['audit', 'query'], '--audit', 'the audit API', 'AUDIT_UNREACHABLE'],
    [['pins'], '--policy', 'the policy-validator', 'POLICY_UNREACHABLE'],
  ])(
    'fleet %j prints no answer as one JSON line of the same shape',
    async (argv, flag, name, code) => {
      const url = `http://127.0.0.1:${await freePort()}`;
      const run = await fleet([...argv, flag, url, '--json'], { launcher: 'pnpm fleet' });
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(JSON.parse(run.stderr)).toEqual({
        error: `cannot reach ${name} at ${url}: is the fleet running? (pnpm fleet up, or pass ${flag})`,
        code,
        details: { reason: 'ECONNREFUSED' },
      });
    },
  );
});

describe('a service URL from the environment', () => {
  it.each([
    [['services'], 'FLEET_ORCHESTRATOR_URL', '--orchestrator'],
    [['audit', 'query'], 'FLEET_AUDIT_URL', '--audit'],
    [['pins'], 'FLEET_POLICY_URL', '--policy'],
  ])('fleet %j names %s, not %s, when it is no URL (exit 2)', async (argv, variable, flag) => {
    const run = await fleet(argv, { env: { [variable]: 'not-a-url' } });
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.split('\n')[0]).toMatch(
      new RegExp(`^error: ${variable} "not-a-url" is not a valid URL \\(e\\.g\\. http://`),
    );
    expect(run.stderr).not.toContain(flag);
  });
});
