import { describe, expect, it } from 'vitest';
import { createPiiEngine, PiiConfigError, parsePiiConfig, SECRET_ENTITY_TYPES } from './index.ts';

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
    [{ entities: { PASSPORT: {} } }, 'entities'],
    [{ allow: { patterns: ['ok', '(unclosed'] } }, 'allow.patterns[1]'],
    [{ phone: { defaultRegion: 'XX' } }, 'phone.defaultRegion'],
    [
      { tools: { crm: { entities: { PERSON: { keepLast: -1 } } } } },
      'tools.crm.entities.PERSON.keepLast',
    ],
    [{ guard: { block: ['NOPE'] } }, 'guard.block[0]'],
    [{ limits: { maxDepth: 0 } }, 'limits.maxDepth'],
    [{ unknownKey: true }, ''],
    [{ hash: { keyEnv: 'not a name' } }, 'hash.keyEnv'],
  ])('rejects %j naming %s', (input, path) => {
    try {
      parsePiiConfig(input);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(PiiConfigError);
      const e = error as PiiConfigError;
      expect(e.code).toBe('PII_CONFIG_INVALID');
      expect(e.issues.map((i) => i.path)).toContain(path);
      if (path) expect(e.message).toContain(path);
    }
  });

  it('is validated by createPiiEngine too', () => {
    expect(() => createPiiEngine({ config: { defaultStrategy: 'nope' as 'redact' } })).toThrow(
      PiiConfigError,
    );
  });
});
