/**
 * `fleet audit query` and `fleet audit trace` against a real audit-logger process (its query
 * API on an empty PGlite store in a temp dir, its own audit queue on the real Redis).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  freePort,
  type ServiceProcess,
  sourceCommand,
  startServiceProcess,
} from '@fleet/test-fixtures';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defer, deleteRedisKeys, fleet, jsonServer, REPO_ROOT } from './helpers.ts';

let auditLogger: ServiceProcess;
let dir: string;
const queue = `cli-audit-test-${randomUUID()}`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fleet-cli-audit-'));
  auditLogger = await startServiceProcess({
    ...sourceCommand(join(REPO_ROOT, 'services/audit-logger/src/main.ts')),
    cwd: dir,
    env: {
      PORT: '0',
      HOST: '127.0.0.1',
      AUDIT_WORKER: 'false',
      AUDIT_QUEUE: queue,
      AUDIT_PGLITE_DIR: join(dir, 'pglite'),
      AUDIT_JOURNAL: join(dir, 'journal.ndjson'),
      LOG_LEVEL: 'warn',
      OTEL_TRACES_EXPORTER: 'none',
      OTEL_METRICS_EXPORTER: 'none',
    },
    readyTimeoutMs: 60_000,
  });
}, 90_000);

afterAll(async () => {
  await auditLogger?.stop('SIGTERM', 5_000);
  await deleteRedisKeys([`bull:${queue}:*`, `bull:${queue}-retention:*`]).catch(() => undefined);
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `fleet audit ...` pointed at the test audit-logger. */
const audit = (argv: readonly string[]) =>
  fleet(['audit', ...argv, '--audit', auditLogger.url, '--state-dir', dir]);

describe('fleet audit query', () => {
  it('says when nothing matches', async () => {
    const run = await audit(['query']);
    expect(run).toEqual({ code: 0, stdout: 'no audit records match\n', stderr: '' });
  });

  it('shows the message and the parameters of an audit API refusal, exit 2', async () => {
    const run = await audit(['query', '--limit', '501']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      'error: the audit API refused the query\n  limit: must be an integer from 1 to 500\n',
    );
    expect(run.stderr).not.toContain('[object Object]');
    const json = await audit(['query', '--limit', '501', '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({
      error: 'the audit API refused the query',
      code: 'INVALID_QUERY',
      status: 400,
      details: [{ parameter: 'limit', message: 'must be an integer from 1 to 500' }],
    });
  });

  it.each([
    ['--decision', 'maybe', 'Allowed choices are allowed, denied, error'],
    ['--limit', 'ten', '--limit must be a positive integer'],
    ['--limit', '0', '--limit must be a positive integer'],
    ['--since', 'yesterday', '--since must be a duration back from now'],
    ['--until', '5 minutes', '--until must be a duration back from now'],
    ['--audit', 'notaurl', '--audit "notaurl" is not a valid URL'],
  ])('refuses %s %s before asking the API (exit 2)', async (flag, value, message) => {
    // The flag under test comes last: it wins over the --audit before it.
    const run = await fleet(['audit', 'query', '--audit', 'http://127.0.0.1:1', flag, value]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(message);
    expect(run.stderr).not.toContain('cannot reach');
  });

  it('says so when nothing matches a --principal', async () => {
    const run = await audit(['query', '--principal', 'anonymous']);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('no audit records match\n');
  });

  it('says when the audit API cannot be reached (exit 1), how to start the fleet as launched', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const run = await fleet(['audit', 'query', '--audit', url, '--state-dir', dir], {
      launcher: 'pnpm fleet',
    });
    expect(run.code).toBe(1);
    expect(run.stderr.split('\n')[0]).toBe(
      `error: cannot reach the audit API at ${url}: is the fleet running? (pnpm fleet up --state-dir ${dir}, or pass --audit)`,
    );
    const plain = await fleet(['audit', 'query', '--audit', url]);
    expect(plain.stderr.split('\n')[0]).toBe(
      `error: cannot reach the audit API at ${url}: is the fleet running? (fleet up, or pass --audit)`,
    );
  });

  it('asks whether --audit is the audit-logger when the server there has no audit API', async () => {
    const { url, close } = await jsonServer(() => ({ status: 404, body: { error: 'not found' } }));
    defer(close);
    const run = await fleet(['audit', 'query', '--audit', url]);
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: the audit API answered 404: not found: is ${url} the audit-logger?\n`,
    });
  });
});

describe('fleet audit trace', () => {
  it('exits 1 saying so when the trace has no records', async () => {
    const traceId = randomBytes(16).toString('hex');
    const run = await audit(['trace', traceId]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `error: no audit records for trace ${traceId} at ${auditLogger.url} (none stored yet, or the trace did not pass this fleet)\n`,
    );
  });

  it('refuses what is not a trace id (exit 2)', async () => {
    expect((await audit(['trace', 'not-a-trace'])).code).toBe(2);
  });
});
