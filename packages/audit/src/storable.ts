/**
 * Text PostgreSQL can hold. Its `text` and `jsonb` types refuse U+0000 (SQLSTATE 22P05,
 * "unsupported Unicode escape sequence"), and `jsonb` refuses a UTF-16 surrogate without its
 * pair (22P02, "Unicode low surrogate must follow a high surrogate"); PostgreSQL and PGlite
 * alike. One such character in any string or key of a record would fail the insert of its
 * whole batch, so the store replaces each with U+FFFD, a visible marker, just before it inserts:
 * after scrubbing and cutting (the package's cuts keep surrogate pairs whole; a custom scrubber
 * may not). Pure.
 */

/** Put in place of each character PostgreSQL cannot store. */
export const UNSTORABLE_CHARACTER_REPLACEMENT = '\ufffd';

// NUL, a high surrogate not followed by a low one, a low surrogate not preceded by a high one.
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is what PostgreSQL refuses
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
// JSON.stringify escapes exactly these as `\u0000` and `\udXXX` (well-formed stringify): a
// cheap test of the serialised batch spares the walk when none is there (almost always).
// An escaped backslash followed by such text is a false positive, which costs only the walk.
const MAYBE_UNSTORABLE_JSON = /\\u(?:0000|d[89a-f])/;

/** `text` with every character PostgreSQL cannot store replaced by U+FFFD. */
export function storableText(text: string): string {
  return text.replace(UNSTORABLE, UNSTORABLE_CHARACTER_REPLACEMENT);
}

/** A copy of a JSON value with every string and key made storable. */
export function storableValue<T>(value: T): T {
  if (typeof value === 'string') return storableText(value) as T;
  if (Array.isArray(value)) return value.map(storableValue) as T;
  if (value === null || typeof value !== 'object') return value;
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) copy[storableText(key)] = storableValue(item);
  return copy as T;
}

/** `JSON.stringify(value)`, with every string and key made storable first when it needs it. */
export function storableJson(value: unknown): string {
  const json = JSON.stringify(value);
  return MAYBE_UNSTORABLE_JSON.test(json) ? JSON.stringify(storableValue(value)) : json;
}
