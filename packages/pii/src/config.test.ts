import { describe, expect, it } from 'vitest';
import {
  createPiiEngine,
  ENTITY_TYPES,
  PiiConfigError,
  parsePiiConfig,
  SECRET_ENTITY_TYPES,
} from './index.ts';

/** The error `parsePiiConfig(input)` throws; fails the test when it throws none. */
function configError(input: unknown): PiiConfigError {
  try {
    parsePiiConfig(input);
  } catch (error) {
    expect(error).toBeInstanceOf(PiiConfigError);
    return error as PiiConfigError;
  }
  return expect.unreachable('the config was accepted');
}

describe('config', () => {
  it('fills every default from nothing', () => {
    const config = parsePiiConfig(undefined);
    expect(config).toMatchObject({
      defaultStrategy: 'redact',
      defaultThreshold: 0.5,
      entities: {},
      mask: { keepLast: 4, char: '*' },
      allow: { values: [], patterns: [] },
      tools: {},
      hash: { keyEnv: 'PII_HMAC_KEY' },
      tokens: { ttlSeconds: 3600 },
      phone: { defaultRegion: 'US' },
      limits: { maxDepth: 64, maxStringBytes: 4 * 1024 * 1024 },
    });
    expect(config.guard.block).toEqual(SECRET_ENTITY_TYPES);
  });

  it('parses a full config', () => {
    const config = parsePiiConfig({
      defaultStrategy: 'tokenize',
      entities: { CREDIT_CARD: { strategy: 'mask', keepLast: 4 }, PERSON: { enabled: false } },
      allow: { values: ['support@acme.com'], patterns: ['.*@acme\\.com'] },
      tools: { crm: { entities: { EMAIL_ADDRESS: { strategy: 'hash' } } } },
      guard: { block: ['PRIVATE_KEY'] },
      phone: { defaultRegion: 'GB' },
    });
    expect(config.tools.crm?.entities.EMAIL_ADDRESS?.strategy).toBe('hash');
    expect(config.tools.crm?.allow).toEqual({ values: [], patterns: [] });
  });

  it.each([
    [{ entities: { EMAIL_ADDRESS: { strategy: 'shred' } } }, 'entities.EMAIL_ADDRESS.strategy'],
    [{ entities: { EMAIL_ADDRESS: { threshold: 2 } } }, 'entities.EMAIL_ADDRESS.threshold'],
    [{ entities: { PASSPORT: {} } }, 'entities.PASSPORT'],
    [{ allow: { patterns: ['ok', '(unclosed'] } }, 'allow.patterns[1]'],
    [{ phone: { defaultRegion: 'XX' } }, 'phone.defaultRegion'],
    [
      { tools: { crm: { entities: { PERSON: { keepLast: -1 } } } } },
      'tools.crm.entities.PERSON.keepLast',
    ],
    [{ guard: { block: ['NOPE'] } }, 'guard.block[0]'],
    [{ limits: { maxDepth: 0 } }, 'limits.maxDepth'],
    [{ unknownKey: true }, 'unknownKey'],
    [{ hash: { keyEnv: 'not a name' } }, 'hash.keyEnv'],
  ])('rejects %j naming %s', (input, path) => {
    const error = configError(input);
    expect(error.code).toBe('PII_CONFIG_INVALID');
    expect(error.issues.map((i) => i.path)).toContain(path);
    expect(error.message).toContain(path);
  });

  // A misspelt key must stop the service, never be ignored: an ignored `entites:` would run
  // with default settings, an ignored `guard: {blok: …}` with the default block list.
  it.each([
    [{ entites: {} }, 'entites', 'entities'],
    [{ guard: { blok: ['PRIVATE_KEY'] } }, 'guard.blok', 'block'],
    [
      { entities: { EMAIL_ADRESS: { strategy: 'mask' } } },
      'entities.EMAIL_ADRESS',
      'EMAIL_ADDRESS',
    ],
    [{ entities: { PERSON: { stratgy: 'mask' } } }, 'entities.PERSON.stratgy', 'strategy'],
    [{ tools: { crm: { alow: { values: ['x'] } } } }, 'tools.crm.alow', 'allow'],
    [{ tools: { crm: { entities: { PERSN: {} } } } }, 'tools.crm.entities.PERSN', 'PERSON'],
    [{ limits: { maxdepth: 8 } }, 'limits.maxdepth', 'maxDepth'],
  ])('refuses the unknown key in %j at %s, suggesting %s', (input, path, meant) => {
    const error = configError(input);
    expect(error.code).toBe('PII_CONFIG_INVALID');
    const key = path.split('.').at(-1);
    expect(error.issues).toEqual([
      {
        path,
        message: expect.stringMatching(
          `^unknown key "${key}" \\(did you mean "${meant}"\\?\\); allowed: `,
        ),
      },
    ]);
    expect(error.message).toContain(`${path}: unknown key "${key}" (did you mean "${meant}"?)`);
  });

  it('lists the entity types as the keys an entities map allows', () => {
    expect(configError({ entities: { NOT_A_TYPE: {} } }).issues[0]?.message).toBe(
      `unknown key "NOT_A_TYPE"; allowed: ${ENTITY_TYPES.join(', ')}`,
    );
  });

  it('is validated by createPiiEngine too', () => {
    expect(() => createPiiEngine({ config: { defaultStrategy: 'nope' as 'redact' } })).toThrow(
      PiiConfigError,
    );
  });
});
