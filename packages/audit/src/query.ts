/**
 * Audit queries as data: the filters a store understands, the opaque keyset cursor, and the
 * parsing of query-string parameters (the audit API's and the CLI's) into filters, with an
 * error that names every bad parameter. Pure: no I/O.
 */
import {
  type AuditDecision,
  AuditDecisionSchema,
  type AuditKind,
  AuditKindSchema,
  type AuditRecord,
  AuditTimestampSchema,
} from './record.ts';
import { isTimeBoundInRange, parseTimeBound, TIME_BOUND_RANGE_TEXT } from './time.ts';

/** Records per page unless the caller asks otherwise. */
export const DEFAULT_QUERY_LIMIT = 50;
/** Most records per page. */
export const MAX_QUERY_LIMIT = 500;
/** The window of `stats` when no `since` is given: one day. */
export const DEFAULT_STATS_WINDOW_MS = 24 * 3_600_000;

/** What to select; every filter given must match (AND). */
export interface AuditRecordFilters {
  /** W3C trace id (32 lowercase hex digits). */
  traceId?: string;
  /** Target: tool or prompt name, or resource URI. */
  tool?: string;
  /** Governed event, e.g. `tools/call`. */
  event?: string;
  /** Principal id; for a principal without one, its type (`anonymous`). */
  principal?: string;
  decision?: AuditDecision;
  /** Who wrote the record: `chain`, `invocation` or `admin` (registry changes). */
  kind?: AuditKind;
  /** Name of an interceptor that took part. */
  interceptor?: string;
  /** Records at or after this instant. */
  since?: Date;
  /** Records before this instant. */
  until?: Date;
}

/** Which page: a cursor from the previous page, and its size. */
export interface AuditPageRequest {
  /** `nextCursor` of the previous page; absent for the first page. */
  cursor?: string;
  /** Records per page, 1..{@link MAX_QUERY_LIMIT}. Default {@link DEFAULT_QUERY_LIMIT}. */
  limit?: number;
}

/** One page of records, newest first. */
export interface AuditPage {
  records: AuditRecord[];
  /** Present when more records match: pass it back as `cursor`. */
  nextCursor?: string;
}

/** The position after which a page continues: the last record's time and id. */
export interface AuditCursor {
  timestamp: string;
  id: string;
}

/** One bad query parameter. */
export interface AuditQueryIssue {
  parameter: string;
  message: string;
}

/** Query parameters that cannot be used; `issues` names each one. */
export class AuditQueryError extends Error {
  override readonly name = 'AuditQueryError';
  readonly code = 'INVALID_QUERY';
  readonly issues: readonly AuditQueryIssue[];

  constructor(issues: readonly AuditQueryIssue[]) {
    super(`invalid audit query: ${issues.map((i) => `${i.parameter}: ${i.message}`).join('; ')}`);
    this.issues = issues;
  }
}

const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/i;
const TRACE_ID = /^[0-9a-f]{32}$/;
const MAX_TEXT_LENGTH = 1024;

/** Encode a cursor (opaque to callers: base64url of a small JSON array). */
export function encodeCursor(cursor: AuditCursor): string {
  return Buffer.from(JSON.stringify([cursor.timestamp, cursor.id])).toString('base64url');
}

/** Decode a cursor made by {@link encodeCursor}; `undefined` when it is not one. */
export function decodeCursor(text: string): AuditCursor | undefined {
  if (text.length === 0 || text.length > 200 || !/^[A-Za-z0-9_-]+$/.test(text)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length !== 2) return undefined;
  const [timestamp, id] = value as unknown[];
  if (typeof timestamp !== 'string' || typeof id !== 'string' || !ULID.test(id)) return undefined;
  // A cursor holds a stored record's timestamp, so only such a time is one: the database
  // compares it as timestamptz, and a text it misreads or refuses ('1', year 0) would fail
  // the query as a store error where the caller's cursor is at fault.
  if (!AuditTimestampSchema.safeParse(timestamp).success) return undefined;
  return { timestamp, id };
}

/** A W3C trace id as stored (lowercase), or `undefined` when `text` is not one. */
export function normaliseTraceId(text: string): string | undefined {
  const id = text.trim().toLowerCase();
  return TRACE_ID.test(id) && !/^0+$/.test(id) ? id : undefined;
}

/** Raw query-string values as node's and express's parsers give them. */
export type QueryParameters = Readonly<Record<string, unknown>>;

class IssueList {
  readonly issues: AuditQueryIssue[] = [];

  add(parameter: string, message: string): undefined {
    this.issues.push({ parameter, message });
    return undefined;
  }

  /**
   * The single string value of a parameter, or an issue. An empty (or blank) value is
   * `undefined`, as if not given, when `emptyMeansAbsent`: for parameters whose absence has a
   * default (`since`, `until`, `limit`, `cursor`), which HTML forms and many clients send
   * empty (`?since=24h&until=`). An empty filter stays an issue: whether it means "match
   * the empty text" or "do not filter" is ambiguous, and taking the latter would silently
   * widen what the caller asked for.
   */
  text(params: QueryParameters, parameter: string, emptyMeansAbsent = false): string | undefined {
    const value = params[parameter];
    if (value === undefined) return undefined;
    if (Array.isArray(value)) return this.add(parameter, 'must be given at most once');
    if (typeof value !== 'string') return this.add(parameter, 'must be a string');
    if (value.trim() === '')
      return emptyMeansAbsent
        ? undefined
        : this.add(parameter, 'must not be empty (leave it out not to filter by it)');
    if (value.length > MAX_TEXT_LENGTH)
      return this.add(parameter, `must be at most ${MAX_TEXT_LENGTH} characters`);
    return value;
  }

  /** A `since`/`until` bound; empty means not given (its default applies). */
  time(params: QueryParameters, parameter: string, now: Date): Date | undefined {
    const value = this.text(params, parameter, true);
    if (value === undefined) return undefined;
    const date = parseTimeBound(value, now);
    if (date === undefined)
      return this.add(
        parameter,
        'must be an ISO 8601 date-time with Z or an offset (2025-01-31T12:00:00Z), a date (2025-01-31), or a duration back from now (30m, 1h, 7d)',
      );
    // Checked here, not left to the database: out of range it fails the query as a store
    // error (503) where the caller's parameter is at fault.
    if (!isTimeBoundInRange(date)) return this.add(parameter, timeRangeMessage());
    return date;
  }

  unknown(params: QueryParameters, known: readonly string[]): void {
    for (const parameter of Object.keys(params))
      if (!known.includes(parameter))
        this.add(parameter, `unknown parameter; expected one of ${known.join(', ')}`);
  }

  /** `until` must be later than `since`; with no `until`, `defaultUntil` stands for it. */
  order(since: Date | undefined, until: Date | undefined, defaultUntil?: Date): void {
    if (!since) return;
    if (until) {
      if (until.getTime() <= since.getTime()) this.add('until', 'must be later than since');
    } else if (defaultUntil && defaultUntil.getTime() <= since.getTime())
      this.add('since', 'must be earlier than until (default: now)');
  }

  throwIfAny(): void {
    if (this.issues.length > 0) throw new AuditQueryError(this.issues);
  }
}

function timeRangeMessage(): string {
  return `must be ${TIME_BOUND_RANGE_TEXT}`;
}

/**
 * The issues of a time filter a store cannot compare (outside year 1..9999, or an invalid
 * Date), for stores that are handed filters without {@link parseRecordQuery}.
 */
export function timeBoundIssues(bounds: {
  since?: Date | undefined;
  until?: Date | undefined;
}): AuditQueryIssue[] {
  const issues: AuditQueryIssue[] = [];
  for (const parameter of ['since', 'until'] as const) {
    const date = bounds[parameter];
    if (date !== undefined && !isTimeBoundInRange(date))
      issues.push({ parameter, message: timeRangeMessage() });
  }
  return issues;
}

const RECORD_PARAMETERS = [
  'traceId',
  'tool',
  'event',
  'principal',
  'decision',
  'kind',
  'interceptor',
  'since',
  'until',
  'limit',
  'cursor',
] as const;

/**
 * Parse the parameters of `GET /api/audit/records` into filters and a page request.
 * `since`/`until` take ISO 8601 instants or durations back from `now`, within year 1..9999.
 * An empty `since`, `until`, `limit` or `cursor` counts as not given; an empty filter
 * (`traceId`, `tool`, `event`, `principal`, `decision`, `kind`, `interceptor`) is refused.
 * @throws AuditQueryError naming every bad or unknown parameter.
 */
export function parseRecordQuery(
  params: QueryParameters,
  now: Date = new Date(),
): { filters: AuditRecordFilters; page: AuditPageRequest } {
  const issues = new IssueList();
  issues.unknown(params, RECORD_PARAMETERS);
  const filters: AuditRecordFilters = {};
  const page: AuditPageRequest = {};

  const traceId = issues.text(params, 'traceId');
  if (traceId !== undefined) {
    const id = normaliseTraceId(traceId);
    if (id === undefined)
      issues.add('traceId', 'must be a W3C trace id: 32 hex digits, not all zero');
    else filters.traceId = id;
  }
  for (const name of ['tool', 'event', 'principal', 'interceptor'] as const) {
    const value = issues.text(params, name);
    if (value !== undefined) filters[name] = value;
  }
  const decision = issues.text(params, 'decision');
  if (decision !== undefined) {
    const parsed = AuditDecisionSchema.safeParse(decision);
    if (parsed.success) filters.decision = parsed.data;
    else issues.add('decision', `must be one of ${AuditDecisionSchema.options.join(', ')}`);
  }
  const kind = issues.text(params, 'kind');
  if (kind !== undefined) {
    const parsed = AuditKindSchema.safeParse(kind);
    if (parsed.success) filters.kind = parsed.data;
    else issues.add('kind', `must be one of ${AuditKindSchema.options.join(', ')}`);
  }
  const since = issues.time(params, 'since', now);
  const until = issues.time(params, 'until', now);
  if (since) filters.since = since;
  if (until) filters.until = until;
  issues.order(since, until);

  const limit = issues.text(params, 'limit', true);
  if (limit !== undefined) {
    const n = /^\d{1,6}$/.test(limit) ? Number(limit) : Number.NaN;
    if (!(n >= 1 && n <= MAX_QUERY_LIMIT))
      issues.add('limit', `must be an integer from 1 to ${MAX_QUERY_LIMIT}`);
    else page.limit = n;
  }
  const cursor = issues.text(params, 'cursor', true);
  if (cursor !== undefined) {
    if (decodeCursor(cursor) === undefined)
      issues.add('cursor', 'is not a cursor this API returned (use nextCursor as given)');
    else page.cursor = cursor;
  }
  issues.throwIfAny();
  return { filters, page };
}

/**
 * Parse the parameters of `GET /api/audit/stats`: `since` (default one day back) and
 * `until` (default now), each within year 1..9999, `since` before `until` (or now). An empty
 * one counts as not given (`?since=24h&until=`).
 * @throws AuditQueryError naming every bad or unknown parameter.
 */
export function parseStatsQuery(
  params: QueryParameters,
  now: Date = new Date(),
): { since: Date; until?: Date } {
  const issues = new IssueList();
  issues.unknown(params, ['since', 'until']);
  const since = issues.time(params, 'since', now);
  const until = issues.time(params, 'until', now);
  // The window ends now when no until is given: a later since is as empty a window as an
  // until before since, and /records refuses that one. Likewise it starts one day back when
  // no since is given: an until not later than that is the same empty (or inverted) window.
  const defaultSince = new Date(now.getTime() - DEFAULT_STATS_WINDOW_MS);
  issues.order(since, until, now);
  if (since === undefined && until !== undefined && until.getTime() <= defaultSince.getTime())
    issues.add('until', 'must be later than since (default: one day back; give since as well)');
  issues.throwIfAny();
  const result: { since: Date; until?: Date } = { since: since ?? defaultSince };
  if (until) result.until = until;
  return result;
}
