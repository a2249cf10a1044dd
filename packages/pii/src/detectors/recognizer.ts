/**
 * The recognizer contract every detector module implements, and the regex fragments they
 * share. A recognizer proposes candidates with a base score; the analyzer applies context
 * words, thresholds, the allow-list and overlap resolution.
 */
import type { CountryCode } from 'libphonenumber-js/core';
import type { EntityType } from '../entities.ts';
import { type DigitRuns, scanDigits } from './digits.ts';

/** Context words for a candidate, Presidio-style: found within a window, they move the score. */
export interface ContextRule {
  /** Lower-case words that raise the score. */
  readonly words: ReadonlySet<string>;
  /** Lower-case multi-word phrases that raise the score (matched on the joined window). */
  readonly phrases: readonly string[];
  /** Lower-case words that lower the score when among the `negativeBefore` words before it. */
  readonly negative: ReadonlySet<string>;
  /** Lower-case words that lower the score when among the `after` words after it, on its line. */
  readonly negativeAfter: ReadonlySet<string>;
  /** Added when a word or phrase is found (capped at 1). */
  readonly boost: number;
  /** Subtracted when a negative word is found (floored at 0). */
  readonly penalty: number;
  /** Words looked at before the candidate. */
  readonly before: number;
  /** Words looked at before the candidate for negative words (closer than `before`). */
  readonly negativeBefore: number;
  /** Words looked at after the candidate. */
  readonly after: number;
  /** The phrases that contain none of `words` (the others cannot decide anything). */
  readonly decidingPhrases: readonly string[];
  /** {@link wordPrefixFilter} of `words`, `negative` and `negativeAfter`. */
  readonly wordsFilter: Uint8Array;
  readonly negativeFilter: Uint8Array;
  readonly negativeAfterFilter: Uint8Array;
}

/**
 * Key of the first two characters of a word when both are ASCII letters or digits (case
 * folded; a one-character word has its own keys), else -1.
 */
export function wordPrefixKey(text: string, start: number, end: number): number {
  const a = asciiKey(text.charCodeAt(start));
  if (a < 0) return -1;
  if (start + 1 >= end) return a * 37;
  const b = asciiKey(text.charCodeAt(start + 1));
  return b < 0 ? -1 : a * 37 + b;
}

function asciiKey(c: number): number {
  if (c >= 97 && c <= 122) return c - 96;
  if (c >= 65 && c <= 90) return c - 64;
  if (c >= 48 && c <= 57) return c - 21;
  return -1;
}

/**
 * Which {@link wordPrefixKey}s the lower-case `words` have: a word of the text whose key is
 * known (ASCII start) and not set here is none of them, whatever its case, without building
 * the lower-case string to look it up.
 */
export function wordPrefixFilter(words: Iterable<string>): Uint8Array {
  const filter = new Uint8Array(37 * 37);
  for (const w of words) {
    const key = wordPrefixKey(w, 0, w.length);
    if (key >= 0) filter[key] = 1;
  }
  return filter;
}

/**
 * A proposed span with its base score. When validation is costly (libphonenumber), `score` is
 * the best score validation could give, `floor` the worst, and `refine(value, env)` computes
 * the real one (0 to reject). The analyzer calls `refine` only when validation decides the
 * outcome: the best score passes the threshold (after context) and the floor does not.
 * Otherwise the candidate keeps its floor. (`refine` is shared by the candidates of a
 * recognizer, `value` is what it validates: no closure per candidate.)
 */
export interface Candidate {
  type: EntityType;
  start: number;
  end: number;
  score: number;
  recognizer: string;
  context?: ContextRule;
  floor?: number;
  refine?: (value: string, env: RecognizerEnv) => number;
  value?: string;
}

/** What recognizers may depend on besides the text. */
export interface RecognizerEnv {
  /** Region used to validate phone numbers written without a country code. */
  readonly defaultRegion: CountryCode;
}

/** A detector for one entity family. */
export interface Recognizer {
  readonly name: string;
  /** Every type it can emit (a recognizer is skipped when all of them are disabled). */
  readonly types: readonly EntityType[];
  /**
   * Cheap test run once per text (a regex, or a string the text must include): when it fails,
   * `find` is not called.
   */
  readonly requires?: RegExp | string;
  /**
   * Append candidates found in `text` to `out`. `scans` holds scans of `text` shared with the
   * other recognizers (computed here when absent).
   */
  find(text: string, env: RecognizerEnv, out: Candidate[], scans?: TextScans): void;
}

/** Scans of one text that several recognizers use, each computed on first use. */
export class TextScans {
  private digitRuns: DigitRuns | undefined;
  private positions: Map<string, readonly number[]> | undefined;

  constructor(readonly text: string) {}

  /** The digit groups and runs of the text (see digits.ts). */
  get digits(): DigitRuns {
    if (this.digitRuns === undefined) this.digitRuns = scanDigits(this.text);
    return this.digitRuns;
  }

  /** Every index of `literal` in the text (see {@link indexesOf}). */
  indexesOf(literal: string): readonly number[] {
    if (this.positions === undefined) this.positions = new Map();
    let found = this.positions.get(literal);
    if (found === undefined) {
      found = indexesOf(this.text, [literal]);
      this.positions.set(literal, found);
    }
    return found;
  }
}

// V8 holds the hidden classes of class instances weakly: when a full GC finds no instance
// alive, they are collected and every optimized function that saw them is deoptimized (and
// optimized again on the next calls). One instance kept for good keeps them alive.
export const KEPT_TEXT_SCANS = new TextScans('');

/** The digit runs of `text`, from `scans` when they are of this text. */
export function digitRunsOf(text: string, scans: TextScans | undefined): DigitRuns {
  return scans !== undefined && scans.text === text ? scans.digits : scanDigits(text);
}

/** Every index of `literal` in `text`, from `scans` when they are of this text. */
export function sharedIndexesOf(
  text: string,
  literal: string,
  scans: TextScans | undefined,
): readonly number[] {
  return scans !== undefined && scans.text === text
    ? scans.indexesOf(literal)
    : indexesOf(text, [literal]);
}

/**
 * Gate shared by the recognizers that need a digit: one object, so the analyzer tests it once
 * per string.
 */
export const HAS_DIGIT = /\d/;

/** Options for {@link contextRule}; everything but `words` has a default. */
export interface ContextRuleOptions {
  words: readonly string[];
  negative?: readonly string[];
  negativeAfter?: readonly string[];
  negativeBefore?: number;
  boost?: number;
  penalty?: number;
  before?: number;
  after?: number;
}

/**
 * Build a {@link ContextRule}. Entries with a space are phrases. Defaults: ±0.35; 5 words
 * before and 3 after for positive words; 3 words before for negative words.
 */
export function contextRule(options: ContextRuleOptions): ContextRule {
  const {
    words,
    negative = [],
    negativeAfter = [],
    negativeBefore = 3,
    boost = 0.35,
    penalty = 0.35,
    before = 5,
    after = 3,
  } = options;
  const single = new Set(words.filter((w) => !w.includes(' ')));
  const phrases = words.filter((w) => w.includes(' '));
  return {
    words: single,
    phrases,
    negative: new Set(negative),
    negativeAfter: new Set(negativeAfter),
    boost,
    penalty,
    before,
    negativeBefore,
    after,
    // A phrase holding one of the words is found only where that word already counts.
    decidingPhrases: phrases.filter((p) => !p.split(' ').some((w) => single.has(w))),
    wordsFilter: wordPrefixFilter(single),
    negativeFilter: wordPrefixFilter(negative),
    negativeAfterFilter: wordPrefixFilter(negativeAfter),
  };
}

// Scripts written without spaces between words: their letters may touch a value directly
// ("电话13812345678"), so they never count as part of the value's word.
const UNSPACED_CHAR =
  /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Hangul}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]/u;
const WORD_CHAR = /[\p{L}\p{M}\p{N}_]/u;

/**
 * Regex fragments for an ASCII word boundary. Recognizers use these in their (non-unicode)
 * regexes — a lookbehind over Unicode property classes at every digit makes a regex four to
 * ten times slower — and check the full rule with {@link isBounded} on each match.
 */
export const ASCII_NOT_AFTER_WORD = '(?<![0-9A-Za-z_])';

/** See {@link ASCII_NOT_AFTER_WORD}. */
export const ASCII_NOT_BEFORE_WORD = '(?![0-9A-Za-z_])';

/**
 * Whether the character at `index` continues a word: letters, marks and digits of any script
 * and `_`, except letters of unspaced scripts. False outside the text.
 */
export function isWordCharAt(text: string, index: number): boolean {
  if (index < 0 || index >= text.length) return false;
  const code = text.charCodeAt(index);
  if (code < 128) {
    return (
      (code >= 48 && code <= 57) ||
      (code >= 65 && code <= 90) ||
      (code >= 97 && code <= 122) ||
      code === 95
    );
  }
  let ch = text[index] ?? '';
  // A low surrogate: read the whole code point.
  if (code >= 0xdc00 && code <= 0xdfff && index > 0) ch = text.slice(index - 1, index + 1);
  else if (code >= 0xd800 && code <= 0xdbff) ch = text.slice(index, index + 2);
  return WORD_CHAR.test(ch) && !UNSPACED_CHAR.test(ch);
}

const NUMBER_CHAR = /\p{N}/u;

/**
 * Whether the character at `index` is a digit of any script (`\p{N}`): what continues a
 * number, so a value glued to it is part of a longer number. False outside the text.
 */
export function isNumberCharAt(text: string, index: number): boolean {
  if (index < 0 || index >= text.length) return false;
  const code = text.charCodeAt(index);
  if (code < 128) return code >= 48 && code <= 57;
  let ch = text[index] ?? '';
  if (code >= 0xdc00 && code <= 0xdfff && index > 0) ch = text.slice(index - 1, index + 1);
  else if (code >= 0xd800 && code <= 0xdbff) ch = text.slice(index, index + 2);
  return NUMBER_CHAR.test(ch);
}

/** Whether `text[start, end)` touches no word on either side (see {@link isWordCharAt}). */
export function isBounded(text: string, start: number, end: number): boolean {
  return !isWordCharAt(text, start - 1) && !isWordCharAt(text, end);
}

/** Run a global regex over `text`, calling `fn` for each match (resets `lastIndex`). */
export function forEachMatch(re: RegExp, text: string, fn: (match: RegExpExecArray) => void): void {
  re.lastIndex = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m[0].length === 0) re.lastIndex++;
    fn(m);
  }
}

/**
 * Run a sticky regex (`y` flag) at each of `starts` (ascending), skipping positions before the
 * end of the previous match: the matches a global scan of the whole text would find, provided
 * every position where the pattern can match is among `starts`. Cheap when the starts are few
 * (found with `indexOf` or a cue), where a global regex would try every position of the text.
 */
export function forEachMatchAt(
  re: RegExp,
  text: string,
  starts: readonly number[],
  fn: (match: RegExpExecArray) => void,
): void {
  let from = 0;
  for (const start of starts) {
    if (start < from) continue;
    re.lastIndex = start;
    const m = re.exec(text);
    if (m === null) continue;
    from = m.index + Math.max(1, m[0].length);
    fn(m);
  }
}

/**
 * Every index at which one of `literals` occurs in `text` (overlaps included), ascending, less
 * `back`: search for a distinctive part of a prefix (`yJ` of `eyJ`, whose `e` is everywhere, so
 * that `indexOf` skips ahead fast) and get the prefix's start.
 */
export function indexesOf(text: string, literals: readonly string[], back = 0): number[] {
  const out: number[] = [];
  for (const literal of literals) {
    for (let i = text.indexOf(literal); i !== -1; i = text.indexOf(literal, i + 1)) {
      if (i >= back) out.push(i - back);
    }
  }
  if (literals.length > 1 && out.length > 1) out.sort((a, b) => a - b);
  return out;
}

/**
 * Every index at which the global regex `re` matches (overlapping matches included), ascending.
 * For cues that a plain `indexOf` cannot find (case-insensitive words).
 */
export function matchIndexes(re: RegExp, text: string): number[] {
  const out: number[] = [];
  re.lastIndex = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    out.push(m.index);
    re.lastIndex = m.index + 1;
  }
  return out;
}

/** Longest argument {@link memoize} keeps: a longer one is computed on every call. */
export const MEMO_MAX_KEY_LENGTH = 4096;
/** Most characters of arguments one {@link memoize} cache holds before it is cleared. */
export const MEMO_MAX_CHARS = 1024 * 1024;

/**
 * `compute` memoised by its string argument, for costly validation of matched values (a
 * checksum over SHA-256, a JSON decode): the same values recur across messages. Bounded to
 * `max` entries and {@link MEMO_MAX_CHARS} characters, cleared when full; arguments longer
 * than {@link MEMO_MAX_KEY_LENGTH} are not kept (a caller's payload chooses them: 30 JWT-shaped
 * strings of 2 MB held +60 MB of heap, up to 10,000 of them).
 */
export function memoize<T>(compute: (value: string) => T, max = 10_000): (value: string) => T {
  const cache = new Map<string, T>();
  let chars = 0;
  return (value) => {
    let result = cache.get(value);
    if (result === undefined && !cache.has(value)) {
      result = compute(value);
      if (value.length > MEMO_MAX_KEY_LENGTH) return result;
      if (cache.size >= max || chars + value.length > MEMO_MAX_CHARS) {
        cache.clear();
        chars = 0;
      }
      cache.set(value, result);
      chars += value.length;
    }
    return result as T;
  };
}

/**
 * Keep `value` for the JSON property name `name` in a per-name cache: property names repeat
 * across a payload. Bounded to 4,096 names (not an LRU: the first ones stay) of at most 256
 * characters; a caller's payload chooses names, and 30 names of 2 MB were held for the life of
 * the process (+62 MB of heap, up to 4,096 of them).
 */
export function rememberName<T>(cache: Map<string, T>, name: string, value: T): void {
  if (cache.size < 4096 && name.length <= 256) cache.set(name, value);
}

/** Luhn (mod 10) check over a string of ASCII digits. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/** Whether every character of `s` is the same (e.g. `0000000`). */
export function allSameChar(s: string): boolean {
  for (let i = 1; i < s.length; i++) if (s[i] !== s[0]) return false;
  return true;
}
