import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { allowedKeysAt, editDistance, unknownKeyMessage, withKeyHints } from './keys.ts';

const Schema = z
  .strictObject({
    chain: z
      .strictObject({ timeoutMs: z.number().default(1), denyAs: z.string().default('error') })
      .prefault({}),
    backends: z
      .array(
        z
          .strictObject({ id: z.string(), prefix: z.string().default('') })
          .refine((b) => b.id !== ''),
      )
      .default([]),
    auth: z
      .discriminatedUnion('mode', [
        z.strictObject({ mode: z.literal('none') }),
        z.strictObject({ mode: z.literal('jwt'), issuer: z.string() }),
      ])
      .default({ mode: 'none' }),
    env: z.record(z.string(), z.strictObject({ value: z.string() })).default({}),
    levels: z.partialRecord(z.enum(['low', 'high']), z.number()).optional(),
  })
  .superRefine(() => {});

describe('unknown configuration keys', () => {
  it('measures edit distance', () => {
    expect(editDistance('interceptors', 'intercepters')).toBe(1);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('same', 'same')).toBe(0);
  });

  it('finds the keys allowed at a path through wrappers, arrays, unions and records', () => {
    expect(allowedKeysAt(Schema, [])).toEqual(['chain', 'backends', 'auth', 'env', 'levels']);
    expect(allowedKeysAt(Schema, ['levels'])).toEqual(['low', 'high']);
    expect(allowedKeysAt(Schema, ['chain'])).toEqual(['timeoutMs', 'denyAs']);
    expect(allowedKeysAt(Schema, ['backends', 3])).toEqual(['id', 'prefix']);
    expect(allowedKeysAt(Schema, ['auth'])).toEqual(['mode', 'issuer']);
    expect(allowedKeysAt(Schema, ['env', 'HOME'])).toEqual(['value']);
    expect(allowedKeysAt(Schema, ['nowhere', 'deeper'])).toEqual([]);
  });

  it('suggests the close key, or none', () => {
    expect(unknownKeyMessage('timeoutMS', ['timeoutMs', 'denyAs'])).toBe(
      'unknown key "timeoutMS" (did you mean "timeoutMs"?); allowed: timeoutMs, denyAs',
    );
    expect(unknownKeyMessage('zzz', ['timeoutMs'])).toBe('unknown key "zzz"; allowed: timeoutMs');
    expect(unknownKeyMessage('zzz', [])).toBe('unknown key "zzz"');
  });

  it('turns each unknown key of a failed parse into its own issue at its path', () => {
    const parsed = Schema.safeParse({
      intercepters: [],
      chain: { timeoutMS: 1, extra: 2, timeoutMs: 'x', denyAs: 'error' },
      backends: [{ id: 'a', prefx: 'b' }],
    });
    expect(parsed.success).toBe(false);
    if (parsed.success) return;
    const issues = withKeyHints(Schema, parsed.error).issues.map((i) => ({
      path: i.path.join('.'),
      message: i.message,
    }));
    expect(issues).toEqual(
      expect.arrayContaining([
        {
          path: 'intercepters',
          message: 'unknown key "intercepters"; allowed: chain, backends, auth, env, levels',
        },
        { path: 'chain.timeoutMS', message: expect.stringContaining('did you mean "timeoutMs"') },
        { path: 'chain.extra', message: 'unknown key "extra"; allowed: timeoutMs, denyAs' },
        { path: 'backends.0.prefx', message: expect.stringContaining('did you mean "prefix"') },
        { path: 'chain.timeoutMs', message: expect.stringContaining('expected number') },
      ]),
    );
    expect(issues).toHaveLength(5);
  });
});
