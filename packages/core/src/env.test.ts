// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these are configuration texts with ${VAR}, not templates
import { describe, expect, it } from 'vitest';
import { NOT_DIGITS } from '../test/scenarios.ts';
import {
  DEFAULT_REDIS_URL,
  envBoolean,
  envInteger,
  envKeyPrefix,
  envLogLevel,
  envRedisUrl,
  expandVariables,
  integerProblem,
  LOG_LEVELS,
  redisUrlProblem,
} from './env.ts';

describe('expandVariables', () => {
  it.each([
    ['${A}', { A: 'x' }, 'x'],
    ['${A}', {}, ''],
    ['${A:-fallback}', {}, 'fallback'],
    ['${A:-fallback}', { A: '' }, 'fallback'],
    ['${A:-fallback}', { A: 'set' }, 'set'],
    ['pre-${A}-${B:-b}-post', { A: 'a' }, 'pre-a-b-post'],
    ['$A and ${1A} stay', { A: 'x' }, '$A and ${1A} stay'],
  ])('%s with %j is %j', (text, env, expected) => {
    expect(expandVariables(text, env)).toBe(expected);
  });
});

describe('envInteger', () => {
  it.each([
    [{}, 8080],
    [{ PORT: '' }, 8080],
    [{ PORT: '0' }, 0],
    [{ PORT: '65535' }, 65535],
    [{ PORT: '007' }, 7],
  ])('reads %j as %d', (env, expected) => {
    expect(envInteger(env, 'PORT', 8080, { max: 65535 })).toBe(expected);
  });

  it.each([...NOT_DIGITS, '65536', '99999999999999999999'])(
    'refuses PORT=%j naming the variable and the range',
    (text) => {
      expect(() => envInteger({ PORT: text }, 'PORT', 8080, { max: 65535 })).toThrow(
        `PORT must be an integer from 0 to 65535 (digits only), got ${JSON.stringify(text)}`,
      );
    },
  );

  it('says ">= min" without an upper bound, and cuts what it quotes', () => {
    expect(() => envInteger({ N: 'x'.repeat(1000) }, 'N', 1, { min: 1 })).toThrow(
      `N must be an integer >= 1 (digits only), got "${'x'.repeat(64)}"`,
    );
    expect(integerProblem('0', 1)).toBe('must be an integer >= 1 (digits only)');
    expect(integerProblem('3', 1, 5)).toBeUndefined();
  });
});

describe('envBoolean', () => {
  it.each([
    ['true', true],
    ['1', true],
    ['YES', true],
    [' On ', true],
    ['false', false],
    ['0', false],
    ['No', false],
    ['off', false],
  ] as const)('reads %j as %s', (text, value) => {
    expect(envBoolean({ FLAG: text }, 'FLAG', !value)).toBe(value);
  });

  it('takes the fallback when unset or empty', () => {
    expect(envBoolean({}, 'FLAG', true)).toBe(true);
    expect(envBoolean({ FLAG: '' }, 'FLAG', false)).toBe(false);
  });

  it.each(['maybe', '2', 'enabled'])('refuses %j naming the variable and the words', (text) => {
    expect(() => envBoolean({ FLAG: text }, 'FLAG', true)).toThrow(
      `FLAG must be one of true, 1, yes, on, false, 0, no, off, got ${JSON.stringify(text)}`,
    );
  });
});

describe('envLogLevel', () => {
  it('reads each level, and info when unset or empty', () => {
    for (const level of LOG_LEVELS) expect(envLogLevel({ LOG_LEVEL: level })).toBe(level);
    expect(envLogLevel({})).toBe('info');
    expect(envLogLevel({ LOG_LEVEL: '' })).toBe('info');
  });

  it.each(['loud', 'INFO', ' info', 'warning'])(
    'refuses %j naming the variable and the levels',
    (text) => {
      expect(() => envLogLevel({ LOG_LEVEL: text })).toThrow(
        `LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, got ${JSON.stringify(text)}`,
      );
    },
  );
});

describe('envKeyPrefix', () => {
  it('reads a prefix, and the fallback when unset or empty', () => {
    expect(envKeyPrefix({ P: 'fleet-up-1a2b:x' }, 'P', 'fleet')).toBe('fleet-up-1a2b:x');
    expect(envKeyPrefix({}, 'P', 'fleet')).toBe('fleet');
    expect(envKeyPrefix({ P: '' }, 'P', 'fleet')).toBe('fleet');
  });

  it.each(['a b', 'fleet*', 'x[1]', ':lead', 'é', 'a'.repeat(129)])(
    'refuses %j naming the variable',
    (text) => {
      expect(() => envKeyPrefix({ P: text }, 'P', 'fleet')).toThrow(/^P must be 1 to 128 letters/);
    },
  );
});

describe('envRedisUrl', () => {
  it.each([
    [{}, DEFAULT_REDIS_URL],
    [{ REDIS_URL: '' }, DEFAULT_REDIS_URL],
    [{ REDIS_URL: 'redis://redis:6379' }, 'redis://redis:6379'],
    [
      { REDIS_URL: 'rediss://user:secret@redis.example:6380/2' },
      'rediss://user:secret@redis.example:6380/2',
    ],
    [{ REDIS_URL: 'redis://:secret@10.0.0.5' }, 'redis://:secret@10.0.0.5'],
  ])('reads %j as %j, as given', (env, expected) => {
    expect(envRedisUrl(env)).toBe(expected);
  });

  it.each([
    // What a Redis client would take for a host name and retry for ever.
    ['garbage', 'garbage'],
    ['localhost:6379', 'localhost:6379'],
    ['redis:/redis:6379', 'redis:/redis:6379'],
    ['redis://[bad', 'redis://[bad'],
    [' redis://redis:6379', ' redis://redis:6379'],
    ['http://redis:6379', 'http://redis:6379'],
    // A password is never quoted: a URL's is left out, and anything before an "@" elsewhere.
    ['http://user:secret@redis:6379', 'http://user@redis:6379/'],
    ['https://:secret@redis', 'https://redis/'],
    ['default:secret@redis:6379', '***@redis:6379'],
    ['secret@redis', '***@redis'],
  ])('refuses REDIS_URL=%j naming the variable, quoting %j', (text, shown) => {
    expect(() => envRedisUrl({ REDIS_URL: text })).toThrow(
      `REDIS_URL must be a redis:// or rediss:// URL, got ${JSON.stringify(shown)}`,
    );
    expect(redisUrlProblem(text)).toBe('must be a redis:// or rediss:// URL');
  });

  it('cuts what it quotes', () => {
    expect(() => envRedisUrl({ REDIS_URL: 'x'.repeat(1000) })).toThrow(`got "${'x'.repeat(64)}"`);
  });
});
