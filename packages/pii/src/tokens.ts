/**
 * Reversible tokens: `<<TYPE:tok_xxxxxxxxxxxx>>` (12 characters of `[0-9a-z]`, ~62 bits). The
 * engine mints them; the service stores the pairs and, on the way back, finds the tokens in a
 * request and restores the originals it holds for that principal.
 */
import { randomBytes } from 'node:crypto';
import type { FoundToken, WalkLimits } from './types.ts';
import { mapStringLeaves } from './walk.ts';

const ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';
const ID_LENGTH = 12;
const TOKEN = /<<([A-Z][A-Z0-9_]{0,63}):tok_([0-9a-z]{12})>>/g;
const ID = /^[0-9a-z]{12}$/;

/** A fresh random token id: 12 characters of `[0-9a-z]` from node:crypto (unbiased). */
export function mintTokenId(): string {
  let id = '';
  while (id.length < ID_LENGTH) {
    for (const b of randomBytes(16)) {
      // 252 = 7 × 36: rejecting larger bytes keeps every character equally likely.
      if (b < 252 && id.length < ID_LENGTH) id += ID_ALPHABET[b % 36];
    }
  }
  return id;
}

/** Whether `id` is a well-formed token id. */
export function isTokenId(id: string): boolean {
  return ID.test(id);
}

/** The token text for an entity type and id: `<<TYPE:tok_id>>`. */
export function formatToken(type: string, id: string): string {
  return `<<${type}:tok_${id}>>`;
}

/** Every token in `text`, in order. */
export function findTokens(text: string): FoundToken[] {
  if (!text.includes('<<')) return [];
  const found: FoundToken[] = [];
  TOKEN.lastIndex = 0;
  for (let m = TOKEN.exec(text); m !== null; m = TOKEN.exec(text)) {
    found.push({
      token: m[0],
      type: m[1] ?? '',
      id: m[2] ?? '',
      start: m.index,
      end: m.index + m[0].length,
    });
  }
  return found;
}

/** Result of {@link restoreTokens}. */
export interface RestoreResult {
  text: string;
  /** Tokens replaced by their original. */
  restored: number;
  /** Tokens left as they were because `lookup` did not know them. */
  unknown: number;
}

/**
 * Replace every token `lookup` knows by its original; unknown tokens (expired, or issued to
 * another principal) stay as they are. `lookup` receives the whole token text.
 */
export function restoreTokens(
  text: string,
  lookup: (token: string) => string | undefined,
): RestoreResult {
  const tokens = findTokens(text);
  if (tokens.length === 0) return { text, restored: 0, unknown: 0 };
  let out = '';
  let last = 0;
  let restored = 0;
  for (const t of tokens) {
    const original = lookup(t.token);
    if (original === undefined) continue;
    out += text.slice(last, t.start) + original;
    last = t.end;
    restored++;
  }
  if (restored === 0) return { text, restored, unknown: tokens.length };
  return { text: out + text.slice(last), restored, unknown: tokens.length - restored };
}

/** Every distinct token in the string leaves of a JSON value (e.g. to fetch them in one batch). */
export function collectTokens(value: unknown, limits?: WalkLimits): string[] {
  const seen = new Set<string>();
  mapStringLeaves(
    value,
    (text) => {
      for (const t of findTokens(text)) seen.add(t.token);
      return text;
    },
    limits,
  );
  return [...seen];
}

/** Result of {@link restoreTokensInValue}. */
export interface ValueRestoreResult<T> {
  /** The new value; the input reference itself when nothing was restored. */
  value: T;
  restored: number;
  unknown: number;
}

/**
 * {@link restoreTokens} over every string leaf of a JSON value (copy-on-write, bounded like
 * every walk).
 */
export function restoreTokensInValue<T>(
  value: T,
  lookup: (token: string) => string | undefined,
  limits?: WalkLimits,
): ValueRestoreResult<T> {
  let restored = 0;
  let unknown = 0;
  const out = mapStringLeaves(
    value,
    (text) => {
      const r = restoreTokens(text, lookup);
      restored += r.restored;
      unknown += r.unknown;
      return r.text;
    },
    limits,
  );
  return { value: out, restored, unknown };
}
