/**
 * The detection pipeline for one string: recognizers propose candidates; context words move
 * their scores; candidates of disabled types, under their type's threshold, or inside one of
 * our own replacements are dropped; overlaps are resolved deterministically; allow-listed
 * values are removed last, so nothing overlapping them is touched either.
 */
import { secretKeyValue } from './detectors/assignment.ts';
import {
  type Candidate,
  type Recognizer,
  type RecognizerEnv,
  rememberName,
  TextScans,
  wordPrefixKey,
} from './detectors/recognizer.ts';
import type { EntityType } from './entities.ts';
import type { Detection } from './types.ts';

/** Values never touched: exact strings and whole-value regexes. */
export interface AllowList {
  readonly values: ReadonlySet<string>;
  readonly patterns: readonly RegExp[];
}

/** Everything detection depends on besides the text. */
export interface AnalyzerPolicy {
  readonly recognizers: readonly Recognizer[];
  readonly enabled: ReadonlySet<EntityType>;
  readonly thresholds: Readonly<Record<EntityType, number>>;
  readonly allow: AllowList;
  readonly env: RecognizerEnv;
}

const WINDOW_CHARS = 120;
const NON_ASCII_WORD = /[\p{L}\p{N}]/u;

/** A segment boundary (see SEGMENT_SEPARATOR): context never crosses it. */
function isBoundary(text: string, i: number): boolean {
  return text.charCodeAt(i) === 0;
}

function isWordCode(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  if (c < 128) return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57);
  return NON_ASCII_WORD.test(text[i] ?? '');
}

// Word spans around a candidate, nearest first: [start, end) pairs, reused by every call.
let spansBefore: Int32Array = new Int32Array(32);
let spansAfter: Int32Array = new Int32Array(32);

function room(buffer: Int32Array, n: number): Int32Array {
  return buffer.length >= 2 * n ? buffer : new Int32Array(2 * n);
}

/**
 * The spans of up to `n` words ending before `pos` (within WINDOW_CHARS), nearest first, into
 * `spansBefore`; returns how many. A word cut by the window's edge counts as it is.
 */
function wordSpansBefore(text: string, pos: number, n: number): number {
  spansBefore = room(spansBefore, n);
  const out = spansBefore;
  let count = 0;
  const limit = Math.max(0, pos - WINDOW_CHARS);
  let i = pos;
  while (count < n && i > limit) {
    while (i > limit && !isWordCode(text, i - 1)) {
      if (isBoundary(text, i - 1)) return count;
      i--;
    }
    const end = i;
    while (i > limit && isWordCode(text, i - 1)) i--;
    if (end > i) {
      out[2 * count] = i;
      out[2 * count + 1] = end;
      count++;
    }
  }
  return count;
}

/**
 * The spans of up to `n` words starting at or after `pos` (within WINDOW_CHARS), into
 * `spansAfter`; with `line`, not past a newline. Returns how many.
 */
function wordSpansAfter(text: string, pos: number, n: number, line: boolean): number {
  spansAfter = room(spansAfter, n);
  const out = spansAfter;
  let count = 0;
  const limit = Math.min(text.length, pos + WINDOW_CHARS);
  let i = pos;
  while (count < n && i < limit) {
    while (i < limit && !isWordCode(text, i)) {
      if ((line && text.charCodeAt(i) === 10) || isBoundary(text, i)) return count;
      i++;
    }
    const start = i;
    while (i < limit && isWordCode(text, i)) i++;
    if (i > start) {
      out[2 * count] = start;
      out[2 * count + 1] = i;
      count++;
    }
  }
  return count;
}

/**
 * Whether the word `text[start, end)`, lower-cased, is in `words`; `filter` (their
 * wordPrefixFilter) rules most words out without building the string.
 */
function isListed(
  text: string,
  start: number,
  end: number,
  words: ReadonlySet<string>,
  filter: Uint8Array,
): boolean {
  if (words.size === 0) return false;
  const key = wordPrefixKey(text, start, end);
  if (key >= 0 && filter[key] === 0) return false;
  return words.has(text.slice(start, end).toLowerCase());
}

function anyListed(
  text: string,
  spans: Int32Array,
  count: number,
  words: ReadonlySet<string>,
  filter: Uint8Array,
): boolean {
  for (let k = 0; k < count; k++) {
    if (isListed(text, spans[2 * k] as number, spans[2 * k + 1] as number, words, filter))
      return true;
  }
  return false;
}

function anyOf(list: readonly string[], words: ReadonlySet<string>): boolean {
  for (const w of list) if (words.has(w)) return true;
  return false;
}

/** The words of `count` spans in text order (`spans` nearest first when `reversed`). */
function wordsOf(text: string, spans: Int32Array, count: number, reversed: boolean): string[] {
  const words: string[] = [];
  for (let k = 0; k < count; k++) {
    const j = reversed ? count - 1 - k : k;
    words.push(text.slice(spans[2 * j] as number, spans[2 * j + 1] as number).toLowerCase());
  }
  return words;
}

const keyWordCache = new Map<string, string[]>();
const NO_WORDS: readonly string[] = [];

/** The words of a JSON property name: `phone_number`, `phoneNumber` → `phone`, `number`. */
export function keyWords(key: string): string[] {
  let words = keyWordCache.get(key);
  if (words === undefined) {
    words = key
      .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)
      .filter((w) => w !== '');
    rememberName(keyWordCache, key, words);
  }
  return words;
}

/**
 * How a candidate's context moves its score: +boost when a context word or phrase is among the
 * `before` words before it or the `after` words after it; −penalty when a negative word is among
 * the (closer) `negativeBefore` words before it, or a `negativeAfter` word follows it on its line.
 * `extra` words (the JSON property name) count as words right before the text.
 */
export function contextDelta(
  text: string,
  c: Candidate,
  extra: readonly string[] = NO_WORDS,
): number {
  const rule = c.context;
  if (rule === undefined) return 0;
  const before = wordSpansBefore(text, c.start, rule.before);
  const withExtra = extra.length > 0 && before < rule.before;
  let hit =
    anyListed(text, spansBefore, before, rule.words, rule.wordsFilter) ||
    (withExtra && anyOf(extra, rule.words));
  // The words after are read only when the words before did not decide.
  if (!hit) {
    const after = wordSpansAfter(text, c.end, rule.after, false);
    hit = anyListed(text, spansAfter, after, rule.words, rule.wordsFilter);
    if (!hit && rule.decidingPhrases.length > 0) {
      const window = [
        ...(withExtra ? extra : []),
        ...wordsOf(text, spansBefore, before, true),
        ...wordsOf(text, spansAfter, after, false),
      ];
      const joined = ` ${window.join(' ')} `;
      hit = rule.decidingPhrases.some((p) => joined.includes(` ${p} `));
    }
  }
  let delta = hit ? rule.boost : 0;
  // The nearest `negativeBefore` words; the key's words when the text has fewer.
  const near = Math.min(before, rule.negativeBefore);
  let negative = anyListed(text, spansBefore, near, rule.negative, rule.negativeFilter);
  if (!negative && near < rule.negativeBefore) negative = anyOf(extra, rule.negative);
  if (!negative && rule.negativeAfter.size > 0) {
    const after = wordSpansAfter(text, c.end, rule.after, true);
    negative = anyListed(text, spansAfter, after, rule.negativeAfter, rule.negativeAfterFilter);
  }
  if (negative) delta -= rule.penalty;
  return delta;
}

function clampScore(score: number): number {
  return Math.round(Math.min(1, Math.max(0, score)) * 1000) / 1000;
}

/** A candidate's score after its context rule (if any) was applied (without refinement). */
export function contextScore(text: string, c: Candidate): number {
  return clampScore(c.score + contextDelta(text, c));
}

// Our own replacements: `[TYPE]`, `<TYPE:1a2b3c4d>`, `<<TYPE:tok_…>>`. Detection never looks
// inside them, so transforming twice changes nothing. A sticky regex is tried at each `[`, `<`.
const OWN_OUTPUT =
  /\[[A-Z][A-Z0-9_]*\]|<[A-Z][A-Z0-9_]*:[0-9a-f]{8}>|<<[A-Z][A-Z0-9_]*:tok_[0-9a-z]{12}>>/y;

function ownOutputSpans(text: string): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  for (const open of ['[', '<']) {
    for (let i = text.indexOf(open); i !== -1; i = text.indexOf(open, i + 1)) {
      OWN_OUTPUT.lastIndex = i;
      const m = OWN_OUTPUT.exec(text);
      if (m === null) continue;
      spans.push([i, i + m[0].length]);
      i += m[0].length - 1;
    }
  }
  return spans;
}

function overlapsAny(spans: ReadonlyArray<[number, number]>, start: number, end: number): boolean {
  for (const [s, e] of spans) if (start < e && s < end) return true;
  return false;
}

/** Order of preference between overlapping detections: score, then length, then position. */
export function compareDetections(a: Detection, b: Detection): number {
  return (
    b.score - a.score ||
    b.end - b.start - (a.end - a.start) ||
    a.start - b.start ||
    (a.type < b.type ? -1 : a.type > b.type ? 1 : 0)
  );
}

/** Greedy resolution of one run of overlapping detections (sorted by start). */
function resolveRun(run: Detection[]): Detection[] {
  const ranked = run.sort(compareDetections);
  const kept: Detection[] = [];
  for (const d of ranked) {
    // Binary search for the first kept span ending after d starts.
    let lo = 0;
    let hi = kept.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((kept[mid]?.end ?? 0) <= d.start) lo = mid + 1;
      else hi = mid;
    }
    const next = kept[lo];
    if (next !== undefined && next.start < d.end) continue;
    kept.splice(lo, 0, d);
  }
  return kept;
}

/**
 * Keep a set of non-overlapping detections: higher score first, then longer, then earlier
 * (then type name, so the result never depends on recognizer order). Sorted by start.
 */
export function resolveOverlaps(detections: readonly Detection[]): Detection[] {
  if (detections.length < 2) return [...detections];
  const byStart = [...detections].sort((a, b) => a.start - b.start || a.end - b.end);
  // A detection competes only with those in its run of (transitively) overlapping spans, so
  // each run is resolved on its own; most runs are a single detection.
  const kept: Detection[] = [];
  for (let i = 0; i < byStart.length; ) {
    const first = byStart[i] as Detection;
    let end = first.end;
    let j = i + 1;
    for (; j < byStart.length && (byStart[j] as Detection).start < end; j++) {
      end = Math.max(end, (byStart[j] as Detection).end);
    }
    if (j === i + 1) kept.push(first);
    else for (const d of resolveRun(byStart.slice(i, j))) kept.push(d);
    i = j;
  }
  return kept;
}

/** Whether `value` is on the allow-list. */
export function isAllowed(value: string, allow: AllowList): boolean {
  if (allow.values.has(value)) return true;
  return allow.patterns.some((re) => re.test(value));
}

/** The JSON property a string sits under: a name, an array index, or none. */
export type SegmentKey = string | number | undefined;

/**
 * Between segments analyzed together: a NUL between newlines. No recognizer matches across it
 * (a candidate that did would be dropped anyway) and context words stop at the NUL.
 */
export const SEGMENT_SEPARATOR = '\n\u0000\n';

/** Single strings up to this length are copied flat before the scan (see analyzeSegments). */
const FLAT_COPY_MAX = 8192;

function gateAndFind(text: string, policy: AnalyzerPolicy, candidates: Candidate[]): void {
  // Gates are shared between recognizers (HAS_DIGIT): test each once.
  const tested: Array<RegExp | string> = [];
  const passed: boolean[] = [];
  const scans = new TextScans(text);
  for (const r of policy.recognizers) {
    const gate = r.requires;
    if (gate !== undefined) {
      const at = tested.indexOf(gate);
      let ok: boolean;
      if (at === -1) {
        ok = typeof gate === 'string' ? text.includes(gate) : gate.test(text);
        tested.push(gate);
        passed.push(ok);
      } else {
        ok = passed[at] ?? false;
      }
      if (!ok) continue;
    }
    r.find(text, policy.env, candidates, scans);
  }
}

/** Index of the segment holding `pos`, given the segments' start offsets (ascending). */
function segmentAt(starts: Int32Array, pos: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((starts[mid] ?? 0) <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * The detections of the segments that have any: `segments` holds their indexes (ascending),
 * `detections[k]` those of segment `segments[k]` (sorted, offsets into that segment).
 */
export interface SegmentDetections {
  readonly segments: number[];
  readonly detections: Detection[][];
}

/**
 * Detect entities in several strings at once: they are joined with {@link SEGMENT_SEPARATOR}
 * and every recognizer runs once over the whole (the per-call cost of ~25 regexes dominates
 * for the many short strings of a JSON message). Nothing crosses a segment: candidates that
 * would are dropped, context words are read within the segment (plus its key's words).
 * `keys[i]` is the JSON property of `texts[i]`. Returns the detections of each segment that has
 * any, with offsets into that segment.
 */
export function analyzeSegments(
  texts: readonly string[],
  keys: readonly SegmentKey[],
  policy: AnalyzerPolicy,
): SegmentDetections {
  const result: SegmentDetections = { segments: [], detections: [] };
  const starts = new Int32Array(texts.length);
  let length = 0;
  for (let i = 0; i < texts.length; i++) {
    if (i > 0) length += SEGMENT_SEPARATOR.length;
    starts[i] = length;
    length += (texts[i] as string).length;
  }
  if (length === 0) return result;
  const text =
    texts.length === 1 && length <= FLAT_COPY_MAX
      ? // A new flat string (joined with a trailing separator, which changes no detection:
        // every segment but the last is followed by one anyway). A string built by
        // concatenation or slicing would otherwise reach the scanners as it is, and the
        // optimized code reading characters would have to handle every string layout.
        [texts[0] as string, ''].join(SEGMENT_SEPARATOR)
      : texts.join(SEGMENT_SEPARATOR);
  const candidates: Candidate[] = [];
  gateAndFind(text, policy, candidates);
  if (policy.enabled.has('SECRET')) {
    for (let i = 0; i < texts.length; i++) {
      const key = keys[i];
      const value = texts[i] as string;
      if (typeof key !== 'string' || value.length === 0) continue;
      const whole = secretKeyValue(key, value);
      const at = starts[i] ?? 0;
      if (whole !== undefined)
        candidates.push({ ...whole, start: whole.start + at, end: whole.end + at });
    }
  }
  if (candidates.length === 0) return result;

  const own = ownOutputSpans(text);
  const scored: Detection[] = [];
  for (const c of candidates) {
    if (!policy.enabled.has(c.type) || c.end <= c.start) continue;
    const seg = segmentAt(starts, c.start);
    if (c.end > (starts[seg] ?? 0) + (texts[seg]?.length ?? 0)) continue;
    if (own.length > 0 && overlapsAny(own, c.start, c.end)) continue;
    const threshold = policy.thresholds[c.type];
    const key = keys[seg];
    const delta = contextDelta(text, c, typeof key === 'string' ? keyWords(key) : NO_WORDS);
    let score = clampScore(c.score + delta);
    if (score < threshold) continue;
    // Refine only when validation decides: not when even the floor passes with this context.
    if (
      c.refine !== undefined &&
      (c.floor === undefined || clampScore(c.floor + delta) < threshold)
    ) {
      const base = c.refine(c.value ?? '', policy.env);
      if (base <= 0) continue;
      score = clampScore(base + delta);
      if (score < threshold) continue;
    } else if (c.refine !== undefined && c.floor !== undefined) {
      score = clampScore(c.floor + delta);
    }
    scored.push({ type: c.type, start: c.start, end: c.end, score, recognizer: c.recognizer });
  }
  if (scored.length === 0) return result;
  const allowing = policy.allow.values.size > 0 || policy.allow.patterns.length > 0;
  let list: Detection[] = [];
  for (const d of resolveOverlaps(scored)) {
    if (allowing && isAllowed(text.slice(d.start, d.end), policy.allow)) continue;
    const seg = segmentAt(starts, d.start);
    const at = starts[seg] ?? 0;
    // Sorted by start: the segments come in order.
    if (result.segments[result.segments.length - 1] !== seg) {
      list = [];
      result.segments.push(seg);
      result.detections.push(list);
    }
    d.start -= at;
    d.end -= at;
    list.push(d);
  }
  return result;
}

/**
 * Detect entities in `text`. `key` is the JSON property the string sits under, if any: its
 * words count as context right before the text (`"phone": "0490 75 40 81"`), and a
 * credential-like name makes the whole value a SECRET candidate.
 */
export function analyze(text: string, policy: AnalyzerPolicy, key?: string | number): Detection[] {
  return analyzeSegments([text], [key], policy).detections[0] ?? [];
}
