import { readFile } from 'node:fs/promises';
import { DEFAULT_MAX_BUFFERED } from '@fleet/audit';
import { NOT_DIGITS } from '@fleet/core/testing';
import { describe, expect, it } from 'vitest';
import {
  AUDIT_LOGGER_VARIABLES,
  AUDIT_WORKER_VARIABLES,
  auditLoggerEnvWarnings,
  auditWorkerEnvWarnings,
  ConfigError,
  parseAuditLoggerEnv,
  parseAuditWorkerEnv,
} from './config.ts';

describe('audit-logger environment', () => {
  it('has the documented defaults', () => {
    expect(parseAuditLoggerEnv({})).toEqual({
      HOST: '127.0.0.1',
      PORT: 8083,
      REDIS_URL: 'redis://127.0.0.1:6379',
      AUDIT_PGLITE_DIR: '.fleet/audit-pglite',
      AUDIT_QUEUE: 'fleet-audit',
      AUDIT_RETENTION_DAYS: 30,
      AUDIT_DB_WAIT_S: 30,
      LOG_LEVEL: 'info',
      AUDIT_WORKER: true,
      AUDIT_BATCH_JOBS: true,
      AUDIT_JOURNAL: '.fleet/audit-logger-audit.ndjson',
      AUDIT_MAX_BUFFERED: DEFAULT_MAX_BUFFERED,
      AUDIT_WRITE_AHEAD: true,
      AUDIT_PAYLOAD_PREVIEW: 0,
      AUDIT_QUERY_TIMEOUT_MS: 10_000,
    });
    expect(parseAuditWorkerEnv({}).PORT).toBe(8084);
  });

  it('reads every variable', () => {
    expect(
      parseAuditLoggerEnv({
        HOST: '0.0.0.0',
        PORT: '0',
        REDIS_URL: 'redis://redis:6379',
        DATABASE_URL: 'postgres://u@db/audit',
        AUDIT_DB_SCHEMA: 'audit',
        FLEET_TOKEN: 't',
        AUDIT_READ_TOKEN: 'r',
        AUDIT_RETENTION_DAYS: '7',
        TRACE_URL_TEMPLATE: 'http://jaeger:16686/trace/{traceId}',
        AUDIT_WORKER: 'false',
        AUDIT_BATCH_JOBS: '0',
        AUDIT_JOURNAL: '/var/lib/audit.ndjson',
        AUDIT_MAX_BUFFERED: '250',
        AUDIT_WRITE_AHEAD: ' Off ',
        AUDIT_QUEUE: 'q',
        AUDIT_PREFIX: 'p',
        AUDIT_BATCH_SIZE: '50',
        AUDIT_WORKER_CONCURRENCY: '200',
        AUDIT_PAYLOAD_PREVIEW: '256',
        AUDIT_DB_WAIT_S: '5',
        AUDIT_QUERY_TIMEOUT_MS: '2500',
        LOG_LEVEL: 'warn',
      }),
    ).toMatchObject({
      PORT: 0,
      AUDIT_QUERY_TIMEOUT_MS: 2500,
      AUDIT_DB_WAIT_S: 5,
      DATABASE_URL: 'postgres://u@db/audit',
      AUDIT_RETENTION_DAYS: 7,
      AUDIT_WORKER: false,
      AUDIT_BATCH_JOBS: false,
      AUDIT_BATCH_SIZE: 50,
      AUDIT_MAX_BUFFERED: 250,
      AUDIT_WRITE_AHEAD: false,
      AUDIT_PAYLOAD_PREVIEW: 256,
    });
    // 0 is a bound too (every record goes through the journal); empty is the default.
    expect(parseAuditLoggerEnv({ AUDIT_MAX_BUFFERED: '0' }).AUDIT_MAX_BUFFERED).toBe(0);
    expect(parseAuditLoggerEnv({ AUDIT_MAX_BUFFERED: '' }).AUDIT_MAX_BUFFERED).toBe(
      DEFAULT_MAX_BUFFERED,
    );
    expect(parseAuditLoggerEnv({ DATABASE_URL: '', AUDIT_WORKER: '' })).toMatchObject({
      DATABASE_URL: undefined,
      AUDIT_WORKER: true,
    });
  });

  it.each<[Record<string, string>, string]>([
    [{ PORT: '70000' }, 'PORT'],
    [{ PORT: 'eighty' }, 'PORT'],
    [{ AUDIT_RETENTION_DAYS: '0' }, 'AUDIT_RETENTION_DAYS'],
    [{ AUDIT_WORKER: 'maybe' }, 'AUDIT_WORKER'],
    [{ AUDIT_WRITE_AHEAD: 'maybe' }, 'AUDIT_WRITE_AHEAD'],
    [{ AUDIT_WRITE_AHEAD: '2' }, 'AUDIT_WRITE_AHEAD'],
    [{ TRACE_URL_TEMPLATE: 'http://jaeger/trace' }, 'TRACE_URL_TEMPLATE'],
    [{ TRACE_URL_TEMPLATE: 'javascript:alert(1)//{traceId}' }, 'TRACE_URL_TEMPLATE'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL'],
    [{ REDIS_URL: 'redis://[bad' }, 'REDIS_URL'],
    [{ AUDIT_DB_SCHEMA: 'a;drop' }, 'AUDIT_DB_SCHEMA'],
  ])('refuses %j naming %s', (env, name) => {
    const error = (() => {
      try {
        parseAuditLoggerEnv(env);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain(name);
  });
});

/** Every integer variable of each process with its range (min, max; max unbounded: none). */
const INTEGER_VARIABLES: ReadonlyArray<[string, number, number | undefined]> = [
  ['PORT', 0, 65_535],
  ['AUDIT_RETENTION_DAYS', 1, 36_500],
  ['AUDIT_BATCH_SIZE', 1, 10_000],
  ['AUDIT_WORKER_CONCURRENCY', 1, 100_000],
  ['AUDIT_MAX_BUFFERED', 0, undefined],
  ['AUDIT_PAYLOAD_PREVIEW', 0, 4096],
  ['AUDIT_DB_WAIT_S', 0, 3_600],
  ['AUDIT_QUERY_TIMEOUT_MS', 0, 3_600_000],
];

const PARSERS: ReadonlyArray<[string, (env: Record<string, string>) => object, string[]]> = [
  ['audit-logger', parseAuditLoggerEnv, [...AUDIT_LOGGER_VARIABLES]],
  ['audit-worker', parseAuditWorkerEnv, [...AUDIT_WORKER_VARIABLES]],
];

/** The variables of `parser` that a plain integer sets to a number: its integer variables. */
function integerVariables(parser: (env: Record<string, string>) => object, names: string[]) {
  return names.filter((name) => {
    try {
      return typeof (parser({ [name]: '1' }) as Record<string, unknown>)[name] === 'number';
    } catch {
      return false;
    }
  });
}

describe.each(PARSERS)('%s integer variables', (_process, parser, names) => {
  const own = INTEGER_VARIABLES.filter(([name]) => names.includes(name));

  it('are all in this table', () => {
    expect(integerVariables(parser, names).sort()).toEqual(own.map(([name]) => name).sort());
  });

  // Number(' ') is 0, Number('1e3') 1000, Number('0x10') 16: none what an operator meant.
  const bad = (min: number, max: number | undefined) => [
    ...NOT_DIGITS,
    max === undefined ? '99999999999999999999' : String(max + 1),
    ...(min > 0 ? [String(min - 1)] : []),
  ];
  it.each(
    own.flatMap(([name, min, max]) =>
      bad(min, max).map((value): [string, string] => [name, value]),
    ),
  )('%s refuses %j, naming it', (name, value) => {
    let error: unknown;
    try {
      parser({ [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).code).toBe('INVALID_CONFIG');
    expect((error as ConfigError).message).toContain(name);
    expect((error as ConfigError).message).toContain('(digits only)');
  });

  const good = (min: number, max: number | undefined): Array<[string, number]> => [
    [String(min), min],
    [String(min + 7), min + 7],
    [`0${min + 7}`, min + 7],
    ...(max === undefined ? [] : [[String(max), max] as [string, number]]),
  ];
  it.each(
    own.flatMap(([name, min, max]) =>
      good(min, max).map(([value, parsed]): [string, string, number] => [name, value, parsed]),
    ),
  )('%s reads %j as %d', (name, value, parsed) => {
    expect((parser({ [name]: value }) as Record<string, unknown>)[name]).toBe(parsed);
  });

  it.each(own.map(([name]) => name))('%s empty is the same as unset', (name) => {
    const read = (env: Record<string, string>) => (parser(env) as Record<string, unknown>)[name];
    expect(read({ [name]: '' })).toBe(read({}));
  });
});

describe('AUDIT_* variables a process does not read', () => {
  it('are warned about once each, with what was meant, and not refused', () => {
    const env = {
      AUDIT_RETENTON_DAYS: '7',
      AUDIT_QUEUE: 'q',
      AUDIT_SOMETHING_ELSE: 'x',
      FLEET_TOKEN: 't',
      PATH: '/bin',
    };
    expect(parseAuditLoggerEnv(env).AUDIT_RETENTION_DAYS).toBe(30);
    const warnings = auditLoggerEnvWarnings(env);
    expect(warnings.map((w) => w.variable)).toEqual([
      'AUDIT_RETENTON_DAYS',
      'AUDIT_SOMETHING_ELSE',
    ]);
    expect(warnings[0]?.message).toMatch(
      /^ignored environment variable: unknown key "AUDIT_RETENTON_DAYS" \(did you mean "AUDIT_RETENTION_DAYS"\?\); allowed: .*AUDIT_JOURNAL/,
    );
    expect(warnings[1]?.message).not.toContain('did you mean');
    expect(auditLoggerEnvWarnings({ AUDIT_QUEUE: 'q', AUDIT_WORKER: 'false' })).toEqual([]);
    expect(auditLoggerEnvWarnings({ AUDIT_MAX_BUFFERED: '100' })).toEqual([]);
    expect(auditLoggerEnvWarnings({ AUDIT_WRITE_AHEAD: 'false' })).toEqual([]);
    expect(auditLoggerEnvWarnings({ AUDIT_WRITE_AHEDA: 'false' })[0]?.message).toContain(
      '(did you mean "AUDIT_WRITE_AHEAD"?)',
    );
  });

  it('are not warned about by the worker when the audit-logger reads them (a shared environment)', () => {
    expect(
      auditWorkerEnvWarnings({
        AUDIT_JOURNAL: 'j',
        AUDIT_READ_TOKEN: 'r',
        AUDIT_MAX_BUFFERED: '1',
        AUDIT_WRITE_AHEAD: 'false',
      }),
    ).toEqual([]);
    const [warning] = auditWorkerEnvWarnings({ AUDIT_BATCH_SIZ: '10' });
    expect(warning?.message).toContain('(did you mean "AUDIT_BATCH_SIZE"?)');
    // The worker suggests and lists only what it reads itself.
    expect(warning?.message).not.toContain('AUDIT_JOURNAL');
  });

  it('are those the README configuration table does not list (one list: the schema)', async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('## Endpoints'));
    const documented = [...table.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]).sort();
    expect(documented).toEqual([...AUDIT_LOGGER_VARIABLES].sort());
  });
});
