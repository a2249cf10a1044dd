import { describe, expect, it } from 'vitest';
import { quoteCut } from './text.ts';

describe('quoteCut', () => {
  it('keeps text up to the bound and cuts longer text, saying how long it was', () => {
    expect(quoteCut('abc', 3)).toBe('abc');
    expect(quoteCut('abcd', 3)).toBe('abc… (4 characters)');
    expect(quoteCut('x'.repeat(1_000_000), 2)).toBe('xx… (1000000 characters)');
  });
});
