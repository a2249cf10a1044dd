/**
 * Size bounds of an audit record's free-form fields. A record over a bound is cut, with a
 * visible marker, never refused: audit must not lose a record because a caller sent a huge
 * claim or an interceptor a long message. Applied by the record schema (so by the worker's
 * parse of every job); pure.
 */

/** Appended to a cut text; counted within the bound. */
export const TRUNCATION_MARKER = '…[truncated]';

/** The bounds (characters for texts, entries for lists); README "Record bounds" has the table. */
export const AUDIT_RECORD_LIMITS = {
  /** `event`, `method`. */
  eventLength: 256,
  /** `target`, `sessionId`, `backend`, `principal.id`. */
  idLength: 512,
  /** Interceptor `name`, `service`, `outcome`; abort reason `interceptor`. */
  nameLength: 128,
  /** Validator message text; abort reason text. */
  messageLength: 512,
  /** Validator message `path`. */
  pathLength: 256,
  /** Entries of `interceptors`. */
  interceptors: 64,
  /** Validator messages of one record, all interceptors together. */
  messages: 64,
  /** Entries of `abortReasons`. */
  abortReasons: 64,
  /** Principal claims kept. */
  claims: 16,
  /** Length of a claim name. */
  claimNameLength: 64,
  /** Length of a claim's string value, or of one string in a list. */
  claimValueLength: 128,
  /** Items of a claim's list (e.g. `roles`). */
  claimItems: 16,
} as const;

/**
 * The first `max` UTF-16 code units of `text`, one fewer when the last of them would be the
 * first half of a surrogate pair (an emoji straddling the cut): every cut lands on a code
 * point boundary, so it never leaves a lone high surrogate, which PostgreSQL's `jsonb` refuses
 * (the store would keep a U+FFFD in its place). At most `max` long, as before.
 */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/** `text` cut to `max` characters, ending in {@link TRUNCATION_MARKER} when it was cut. */
export function truncateText(text: string, max: number): string {
  return text.length <= max
    ? text
    : cutText(text, max - TRUNCATION_MARKER.length) + TRUNCATION_MARKER;
}

/** The text of a marker entry standing for `dropped` entries of a list that was cut. */
export function droppedMarker(dropped: number, what: string): string {
  return `…[${dropped} more ${what} truncated]`;
}

/**
 * `items` cut to `max` entries: the first `max - 1` kept, then `marker(dropped)` standing for
 * the rest. Unchanged when it fits.
 */
export function truncateList<T>(
  items: readonly T[],
  max: number,
  marker: (dropped: number) => T,
): T[] {
  if (items.length <= max) return [...items];
  const kept = items.slice(0, max - 1);
  kept.push(marker(items.length - kept.length));
  return kept;
}
