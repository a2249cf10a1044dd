import { describe, expect, it } from 'vitest';
import { parseDuration, parseTimeBound, timestampIssue } from './time.ts';

const NOW = new Date('2025-06-01T12:00:00.000Z');

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['90s', 90_000],
    ['30m', 1_800_000],
    ['1h', 3_600_000],
    ['7d', 604_800_000],
    ['2w', 1_209_600_000],
    [' 1h ', 3_600_000],
    ['0m', 0],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', 'h', '1', '1.5h', '-1h', '1y', '1 h', '1H', '10000000000s'])(
    '%j is not a duration',
    (text) => {
      expect(parseDuration(text)).toBeUndefined();
    },
  );
});

describe('parseTimeBound', () => {
  it.each([
    ['1h', '2025-06-01T11:00:00.000Z'],
    ['30m', '2025-06-01T11:30:00.000Z'],
    ['7d', '2025-05-25T12:00:00.000Z'],
    ['2025-01-31', '2025-01-31T00:00:00.000Z'],
    ['2025-01-31T10:20:30Z', '2025-01-31T10:20:30.000Z'],
    ['2025-01-31T10:20:30.123456Z', '2025-01-31T10:20:30.123Z'],
    ['2025-01-31T10:20Z', '2025-01-31T10:20:00.000Z'],
    ['2025-01-31T12:00:00+02:00', '2025-01-31T10:00:00.000Z'],
    ['2025-01-31T00:30:00-01:00', '2025-01-31T01:30:00.000Z'],
  ])('%s → %s', (text, iso) => {
    expect(parseTimeBound(text, NOW)?.toISOString()).toBe(iso);
  });

  it.each([
    'yesterday',
    '2025-01-31T10:20:30', // local time: ambiguous
    '2025-02-30',
    '2025-13-01',
    '2025-02-29T00:00:00Z',
    '2025-01-31T25:00:00Z',
    '31/01/2025',
    '1706700000000',
    '',
  ])('%j is refused', (text) => {
    expect(parseTimeBound(text, NOW)).toBeUndefined();
  });
});

describe('timestampIssue', () => {
  it.each([
    ['0001-01-01T00:00:00Z', undefined],
    ['9999-12-31T23:59:59.999Z', undefined],
    ['2025-06-01T12:00:00+15:59', undefined],
    ['2025-06-01T12:00:00-15:59', undefined],
    ['not a date-time', undefined], // the caller's format check names it
    ['0000-01-01T00:00:00Z', 'must not be in year 0000 (PostgreSQL has no year 0)'],
    ['0000-12-31T23:00:00-01:00', 'must not be in year 0000 (PostgreSQL has no year 0)'],
    [
      '2025-06-01T12:00:00+16:00',
      'must have a UTC offset within ±15:59 (PostgreSQL refuses larger ones)',
    ],
    [
      '2025-06-01T12:00:00-23:59',
      'must have a UTC offset within ±15:59 (PostgreSQL refuses larger ones)',
    ],
    [
      '0001-01-01T00:00:00+00:01',
      'must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z',
    ],
    [
      '9999-12-31T23:59:59-00:01',
      'must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z',
    ],
  ])('%s: %s', (text, issue) => {
    expect(timestampIssue(text)).toBe(issue);
  });
});
