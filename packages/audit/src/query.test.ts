import { describe, expect, it } from 'vitest';
import {
  AuditQueryError,
  decodeCursor,
  encodeCursor,
  normaliseTraceId,
  parseRecordQuery,
  parseStatsQuery,
} from './query.ts';

const NOW = new Date('2025-06-01T12:00:00.000Z');
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CURSOR = encodeCursor({
  timestamp: '2025-06-01T11:00:00.000Z',
  id: '01JX0000000000000000000000',
});

function issuesOf(
  params: Record<string, unknown>,
  parse: (params: Record<string, unknown>, now: Date) => unknown = parseRecordQuery,
): Array<{ parameter: string; message: string }> {
  try {
    parse(params, NOW);
  } catch (error) {
    expect(error).toBeInstanceOf(AuditQueryError);
    return [...(error as AuditQueryError).issues];
  }
  throw new Error('expected an AuditQueryError');
}

describe('parseRecordQuery', () => {
  it('turns every parameter into a filter', () => {
    expect(
      parseRecordQuery(
        {
          traceId: TRACE.toUpperCase(),
          tool: 'get_weather',
          event: 'tools/call',
          principal: 'alice',
          decision: 'denied',
          kind: 'admin',
          interceptor: 'pii-guard',
          since: '1h',
          until: '2025-06-01T11:59:00Z',
          limit: '20',
          cursor: CURSOR,
        },
        NOW,
      ),
    ).toEqual({
      filters: {
        traceId: TRACE,
        tool: 'get_weather',
        event: 'tools/call',
        principal: 'alice',
        decision: 'denied',
        kind: 'admin',
        interceptor: 'pii-guard',
        since: new Date('2025-06-01T11:00:00.000Z'),
        until: new Date('2025-06-01T11:59:00.000Z'),
      },
      page: { limit: 20, cursor: CURSOR },
    });
  });

  it('accepts no parameters at all', () => {
    expect(parseRecordQuery({}, NOW)).toEqual({ filters: {}, page: {} });
  });

  it('takes an empty since, until, limit or cursor as not given, as forms send them', () => {
    expect(parseRecordQuery({ since: '', until: '', limit: '', cursor: '' }, NOW)).toEqual({
      filters: {},
      page: {},
    });
    expect(parseRecordQuery({ since: '1h', until: ' ', limit: '5', cursor: '' }, NOW)).toEqual({
      filters: { since: new Date('2025-06-01T11:00:00.000Z') },
      page: { limit: 5 },
    });
  });

  it.each(['traceId', 'tool', 'event', 'principal', 'decision', 'kind', 'interceptor'])(
    'refuses an empty %s filter: it would match nothing, or silently everything',
    (parameter) => {
      expect(issuesOf({ [parameter]: '' })).toEqual([
        { parameter, message: 'must not be empty (leave it out not to filter by it)' },
      ]);
    },
  );

  it.each([
    [{ traceId: 'abc' }, 'traceId'],
    [{ traceId: '0'.repeat(32) }, 'traceId'],
    [{ decision: 'maybe' }, 'decision'],
    [{ kind: 'registry' }, 'kind'],
    [{ since: 'yesterday' }, 'since'],
    [{ until: '2025-02-30' }, 'until'],
    [{ since: '1h', until: '2h' }, 'until'],
    [{ limit: '0' }, 'limit'],
    [{ limit: '501' }, 'limit'],
    [{ limit: 'ten' }, 'limit'],
    [{ limit: '1.5' }, 'limit'],
    [{ cursor: 'garbage' }, 'cursor'],
    [{ cursor: Buffer.from('[1,2]').toString('base64url') }, 'cursor'],
    [{ tool: '' }, 'tool'],
    [{ tool: ['a', 'b'] }, 'tool'],
    [{ principal: 'x'.repeat(1025) }, 'principal'],
    [{ trace_id: TRACE }, 'trace_id'],
    // Outside what PostgreSQL's timestamptz and ISO 8601 with four-digit years both hold.
    [{ since: '0000-01-01T00:00:00Z' }, 'since'],
    [{ since: '0000-06-01' }, 'since'],
    [{ since: '0001-01-01T00:30:00+01:00' }, 'since'],
    [{ until: '0000-01-02T00:00:00Z' }, 'until'],
    [{ until: '9999-12-31T23:00:00-02:00' }, 'until'],
    [{ since: '740000d' }, 'since'],
    [{ since: '999999999w' }, 'since'],
  ])('%j is refused, naming %s', (params, parameter) => {
    expect(issuesOf(params).map((i) => i.parameter)).toEqual([parameter]);
  });

  it('names every bad parameter at once', () => {
    expect(
      issuesOf({ limit: '0', decision: 'x', foo: '1' })
        .map((i) => i.parameter)
        .sort(),
    ).toEqual(['decision', 'foo', 'limit']);
  });
});

describe('parseStatsQuery', () => {
  it('defaults to the last day', () => {
    expect(parseStatsQuery({}, NOW)).toEqual({ since: new Date('2025-05-31T12:00:00.000Z') });
    expect(parseStatsQuery({ since: '7d', until: '1d' }, NOW)).toEqual({
      since: new Date('2025-05-25T12:00:00.000Z'),
      until: new Date('2025-05-31T12:00:00.000Z'),
    });
  });

  it('takes an empty since or until as not given (?since=24h&until=)', () => {
    expect(parseStatsQuery({ since: '24h', until: '' }, NOW)).toEqual({
      since: new Date('2025-05-31T12:00:00.000Z'),
    });
    expect(parseStatsQuery({ since: '', until: '' }, NOW)).toEqual(parseStatsQuery({}, NOW));
    expect(parseStatsQuery({ since: '', until: '1h' }, NOW)).toEqual({
      since: new Date('2025-05-31T12:00:00.000Z'),
      until: new Date('2025-06-01T11:00:00.000Z'),
    });
  });

  it('refuses unknown and bad parameters', () => {
    expect(() => parseStatsQuery({ since: 'soon' }, NOW)).toThrow(/since/);
    // Given twice is no "not given", empty or not.
    expect(issuesOf({ until: ['', ''] }, parseStatsQuery)).toEqual([
      { parameter: 'until', message: 'must be given at most once' },
    ]);
    expect(() => parseStatsQuery({ tool: 'x' }, NOW)).toThrow(AuditQueryError);
  });

  it.each([
    [{ since: '1000000d' }, 'since'],
    [{ since: '0000-01-01' }, 'since'],
    [{ since: '1d', until: '0000-12-31T23:59:59Z' }, 'until'],
  ])('%j is out of the accepted date range, naming %s', (params, parameter) => {
    const issues = issuesOf(params, parseStatsQuery);
    expect(issues.map((i) => i.parameter)).toEqual([parameter]);
    expect(issues[0]?.message).toMatch(/0001-01-01T00:00:00Z/);
  });

  it('refuses a window that ends before it starts, like the record listing does', () => {
    // Without until, the window ends now: a since later than now is the same empty window.
    expect(issuesOf({ since: '2030-01-01' }, parseStatsQuery)).toEqual([
      { parameter: 'since', message: 'must be earlier than until (default: now)' },
    ]);
    expect(issuesOf({ since: '2030-01-01', until: '2029-01-01' }, parseStatsQuery)).toEqual([
      { parameter: 'until', message: 'must be later than since' },
    ]);
    expect(issuesOf({ since: '0m' }, parseStatsQuery).map((i) => i.parameter)).toEqual(['since']);
    // Without since, the window starts one day back: an until not later is as empty.
    for (const until of ['1d', '2d', '2025-05-01'])
      expect(issuesOf({ until }, parseStatsQuery)).toEqual([
        {
          parameter: 'until',
          message: 'must be later than since (default: one day back; give since as well)',
        },
      ]);
  });
});

describe('cursors and trace ids', () => {
  it('round-trip a cursor and refuse anything else', () => {
    const cursor = { timestamp: '2025-06-01T11:00:00.000Z', id: '01JX0000000000000000000000' };
    expect(decodeCursor(encodeCursor(cursor))).toEqual(cursor);
    for (const bad of ['', '!!', 'e30', Buffer.from('["x","y"]').toString('base64url')])
      expect(decodeCursor(bad)).toBeUndefined();
    // The right shape, but no time a record has: PostgreSQL would misread or refuse these.
    for (const timestamp of [
      '1',
      '0000-01-01T00:00:00Z',
      '+275760-09-13T00:00:00.000Z',
      'March 7 2025',
    ])
      expect(decodeCursor(encodeCursor({ timestamp, id: cursor.id }))).toBeUndefined();
    const offset = { timestamp: '2025-06-01T13:00:00.123456+02:00', id: cursor.id };
    expect(decodeCursor(encodeCursor(offset))).toEqual(offset);
  });

  it('normalise trace ids to lowercase and refuse malformed ones', () => {
    expect(normaliseTraceId(TRACE.toUpperCase())).toBe(TRACE);
    expect(normaliseTraceId('xyz')).toBeUndefined();
  });
});
