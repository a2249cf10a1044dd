import { describe, expect, it } from 'vitest';
import { createInFlightLimit } from './index.ts';

describe('createInFlightLimit', () => {
  it('grants up to max per key, each key on its own, and again once a slot is released', () => {
    const limit = createInFlightLimit(2);
    expect(limit.max).toBe(2);
    expect([limit.tryAcquire('a'), limit.tryAcquire('a'), limit.tryAcquire('a')]).toEqual([
      true,
      true,
      false,
    ]);
    expect(limit.tryAcquire('b')).toBe(true);
    expect(limit.inFlight('a')).toBe(2);
    expect(limit.inFlight('b')).toBe(1);
    limit.release('a');
    expect(limit.inFlight('a')).toBe(1);
    expect(limit.tryAcquire('a')).toBe(true);
    expect(limit.tryAcquire('a')).toBe(false);
  });

  it('never counts below zero when released more often than acquired', () => {
    const limit = createInFlightLimit(1);
    limit.release('a');
    expect(limit.inFlight('a')).toBe(0);
    expect(limit.tryAcquire('a')).toBe(true);
    limit.release('a');
    limit.release('a');
    expect(limit.inFlight('a')).toBe(0);
    expect(limit.tryAcquire('a')).toBe(true);
    expect(limit.tryAcquire('a')).toBe(false);
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])('refuses max %s', (max) => {
    expect(() => createInFlightLimit(max)).toThrow(RangeError);
  });
});
