/**
 * Time bounds of audit queries: an ISO 8601 instant, or a duration back from now (`30m`,
 * `1h`, `7d`); and the range an audit record's `timestamp` must keep to, the same one. Pure:
 * the caller passes "now".
 */

const UNIT_MS = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
} as const;

const DURATION = /^(\d{1,9})(ms|s|m|h|d|w)$/;
// A date (taken as UTC midnight) or a date-time with `Z` or an offset: a bare local time
// would mean different instants on different machines.
const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/**
 * The earliest instant a query may name: year 1. PostgreSQL's `timestamptz` refuses year 0
 * in ISO input ("date/time field value out of range"), which JavaScript writes for 1 BC.
 */
export const EARLIEST_TIME_BOUND = new Date('0001-01-01T00:00:00.000Z');
/**
 * The latest instant a query may name: the end of year 9999. Past it JavaScript writes
 * six-digit years (`+010000-...`) that PostgreSQL refuses.
 */
export const LATEST_TIME_BOUND = new Date('9999-12-31T23:59:59.999Z');

/** The accepted range as the message of a refused bound says it. */
export const TIME_BOUND_RANGE_TEXT = 'between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z';

/**
 * True when `date` is a valid instant within {@link EARLIEST_TIME_BOUND} ..
 * {@link LATEST_TIME_BOUND}: one both engines compare, so a query never fails on it.
 */
export function isTimeBoundInRange(date: Date): boolean {
  const ms = date.getTime();
  return ms >= EARLIEST_TIME_BOUND.getTime() && ms <= LATEST_TIME_BOUND.getTime();
}

/**
 * The largest UTC offset PostgreSQL takes in a `timestamptz` input, in minutes: 15:59. From
 * ±16:00 on it refuses the value (SQLSTATE 22009, "time zone displacement out of range").
 */
export const MAX_UTC_OFFSET_MINUTES = 15 * 60 + 59;

const TRAILING_OFFSET = /[+-](\d{2}):?(\d{2})$/;

/**
 * Why the ISO 8601 date-time `text` (of the audit record's form, `2025-01-31T12:00:00Z` or
 * with an offset) names a time the audit store cannot hold or its queries cannot reach, or
 * `undefined` when it is fine: year 0000 (PostgreSQL has none: SQLSTATE 22008, whatever the
 * offset), a UTC offset beyond ±15:59 (22009), or an instant outside
 * {@link EARLIEST_TIME_BOUND} .. {@link LATEST_TIME_BOUND} (the range a query may name). The
 * message says the rule, never the value. Text that is no date-time is left to the caller's
 * format check (`undefined`).
 */
export function timestampIssue(text: string): string | undefined {
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) return undefined;
  if (text.startsWith('0000')) return 'must not be in year 0000 (PostgreSQL has no year 0)';
  const offset = TRAILING_OFFSET.exec(text);
  if (offset && Number(offset[1]) * 60 + Number(offset[2]) > MAX_UTC_OFFSET_MINUTES)
    return 'must have a UTC offset within ±15:59 (PostgreSQL refuses larger ones)';
  if (!isTimeBoundInRange(new Date(ms))) return `must be ${TIME_BOUND_RANGE_TEXT}`;
  return undefined;
}

/**
 * Milliseconds of a relative duration such as `90s`, `30m`, `1h`, `7d`, `2w`, `500ms`, or
 * `undefined` when `text` is not one.
 */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

// Date.parse rolls 2025-02-30 over to March 2: refuse dates that do not exist.
function validCalendarDate(ymd: string): boolean {
  const [year, month, day] = ymd.split('-').map(Number) as [number, number, number];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/**
 * An instant from a query parameter: an ISO 8601 date (`2025-01-31`, UTC midnight) or
 * date-time with `Z` or an offset, or a duration back from `now` (`1h` = one hour ago).
 * Returns `undefined` for anything else (the caller names the parameter in its error). The
 * instant may lie outside {@link isTimeBoundInRange} (or be an invalid Date for a huge
 * duration): callers check the range, so they can say which rule was broken.
 */
export function parseTimeBound(text: string, now: Date = new Date()): Date | undefined {
  const value = text.trim();
  const duration = parseDuration(value);
  if (duration !== undefined) return new Date(now.getTime() - duration);
  if (!ISO_DATE.test(value) && !ISO_DATE_TIME.test(value)) return undefined;
  if (!validCalendarDate(value.slice(0, 10))) return undefined;
  const ms = Date.parse(ISO_DATE.test(value) ? `${value}T00:00:00Z` : value);
  return Number.isNaN(ms) ? undefined : new Date(ms);
}
