import { describe, expect, it } from 'vitest';
import { merged } from './objects.ts';

describe('merged', () => {
  it('copies base, then extra over it, into a new object', () => {
    const base = { a: 1, b: 2 };
    const out = merged(base, { b: 3, c: 4 });
    expect(out).toEqual({ a: 1, b: 3, c: 4 });
    expect(out).not.toBe(base);
    expect(base).toEqual({ a: 1, b: 2 });
  });

  it('takes an absent base', () => {
    expect(merged(undefined, { c: 4 })).toEqual({ c: 4 });
  });
});
