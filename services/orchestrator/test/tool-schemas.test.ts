/** The schema validators and the text clamp on their own. */
import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../src/app.ts';
import { clampTextContent, SchemaValidators, truncateUtf8 } from '../src/tool-schemas.ts';

describe('SchemaValidators', () => {
  it('validates draft 2020-12 (the default) and draft-07 schemas', () => {
    const validators = new SchemaValidators(silentLogger);
    const tuple = { type: 'array', prefixItems: [{ type: 'string' }], items: false };
    expect(
      validators.validate('t', { type: 'object', properties: { v: tuple } }, { v: ['a'] }),
    ).toBeUndefined();
    expect(
      validators.validate('t', { type: 'object', properties: { v: tuple } }, { v: ['a', 1] }),
    ).toEqual([expect.objectContaining({ path: '/v' })]);

    const draft07 = {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: { v: { type: 'array', items: [{ type: 'string' }], additionalItems: false } },
      required: ['v', 'w'],
    };
    expect(validators.validate('t', draft07, { v: ['a'], w: 1 })).toBeUndefined();
    expect(validators.validate('t', draft07, { v: ['a', 2] })).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: '/v' }),
        expect.objectContaining({ path: '/w' }),
      ]),
    );
  });

  it('reports nested paths as JSON pointers', () => {
    const validators = new SchemaValidators(silentLogger);
    const schema = {
      type: 'object',
      properties: {
        list: {
          type: 'array',
          items: { type: 'object', properties: { 'a/b': { type: 'integer' } } },
        },
      },
      additionalProperties: false,
    };
    expect(validators.validate('t', schema, { list: [{}, { 'a/b': 1.5 }], extra: 1 })).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: '/list/1/a~1b' }),
        expect.objectContaining({ path: '/extra' }),
      ]),
    );
  });

  it('skips a schema that does not compile and logs it once', () => {
    const log = { ...silentLogger, warn: vi.fn() } as unknown as typeof silentLogger;
    const validators = new SchemaValidators(log);
    const broken = { type: 'object', properties: { a: { type: 'no-such-type' } } };
    expect(validators.validate('t', broken, { a: 1 })).toBeUndefined();
    expect(validators.validate('t', broken, { a: 2 })).toBeUndefined();
    expect(log.warn).toHaveBeenCalledTimes(1);
  });
});

describe('clamping', () => {
  it('cuts between code points', () => {
    expect(truncateUtf8('a😀b', 4)).toBe('a');
    expect(truncateUtf8('a😀b', 5)).toBe('a😀');
    expect(truncateUtf8('éé', 3)).toBe('é');
  });

  it('drops later text items and keeps other content', () => {
    const result = clampTextContent(
      {
        content: [
          { type: 'text', text: 'abcdef' },
          { type: 'image', data: 'x', mimeType: 'image/png' },
          { type: 'text', text: 'ghij' },
          { type: 'text', text: 'klm' },
        ],
      },
      8,
    );
    expect(result.content).toEqual([
      { type: 'text', text: 'abcdef' },
      { type: 'image', data: 'x', mimeType: 'image/png' },
      { type: 'text', text: 'gh\n[… truncated by the gateway: 8 of 13 bytes shown]' },
    ]);
  });
});
