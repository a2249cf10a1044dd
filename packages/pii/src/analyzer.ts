/**
 * The detection pipeline for one string: recognizers propose candidates; context words move
 * their scores; candidates of disabled types, under their type's threshold, or inside one of
 * our own replacements are dropped; overlaps are resolved deterministically; allow-listed
 * values are removed last, so nothing overlapping them is touched either.
 */
import { secretKeyValue } from './detectors/assignment.ts';
import type { Candidate, Recognizer, RecognizerEnv } from './detectors/recognizer.ts';
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

/** Up to `n` lower-case words ending before `pos` (within WINDOW_CHARS), nearest last. */
function wordsBefore(text: string, pos: number, n: number): string[] {
  const words: string[] = [];
  const limit = Math.max(0, pos - WINDOW_CHARS);
  let i = pos;
  while (words.length < n && i > limit) {
    while (i > limit && !isWordCode(text, i - 1)) {
      if (isBoundary(text, i - 1)) return words.reverse();
      i--;
    }
    const end = i;
    while (i > limit && isWordCode(text, i - 1)) i--;
    if (end > i) words.push(text.slice(i, end).toLowerCase());
  }
  return words.reverse();
}

/** Up to `n` lower-case words starting at or after `pos`; with `line`, not past a newline. */
function wordsAfter(text: string, pos: number, n: number, line = false): string[] {
  const words: string[] = [];
  const limit = Math.min(text.length, pos + WINDOW_CHARS);
  let i = pos;
  while (words.length < n && i < limit) {
    while (i < limit && !isWordCode(text, i)) {
      if ((line && text.charCodeAt(i) === 10) || isBoundary(text, i)) return words;
      i++;
    }
    const start = i;
    while (i < limit && isWordCode(text, i)) i++;
    if (i > start) words.push(text.slice(start, i).toLowerCase());
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
    // Property names repeat across a payload; the cache is bounded, not an LRU.
    if (keyWordCache.size < 4096) keyWordCache.set(key, words);
  }
  return words;
}

/**
 * How a candidate's context moves its score: +boost when a context word or phrase is among the
 * `before` words before it or the `after` words after it; −penalty when a negative word is among
 * the (closer) `negativeBefore` words before it, or a `negativeAfter` word follows it on its line.
 * `extra` words (the JSON property name) count as words right before the text.
 */
export function contextDelta(text: string, c: Candidate, extra: readonly string[] = []): number {
  const rule = c.context;
  if (rule === undefined) return 0;
  const fromText = wordsBefore(text, c.start, rule.before);
  const withExtra = extra.length > 0 && fromText.length < rule.before;
  const positive = (w: string) => rule.words.has(w);
  let hit = fromText.some(positive) || (withExtra && extra.some(positive));
  // The words after are read only when the words before did not decide.
  if (!hit) {
    const after = wordsAfter(text, c.end, rule.after);
    hit = after.some(positive);
    if (!hit && rule.phrases.length > 0) {
      const joined = ` ${[...(withExtra ? extra : []), ...fromText, ...after].join(' ')} `;
      hit = rule.phrases.some((p) => joined.includes(` ${p} `));
    }
  }
  let delta = hit ? rule.boost : 0;
  const near = Math.max(0, fromText.length - rule.negativeBefore);
  let negative = false;
  for (let i = near; i < fromText.length && !negative; i++) {
    negative = rule.negative.has(fromText[i] as string);
  }
  if (!negative && fromText.length - near < rule.negativeBefore) {
    negative = extra.some((w) => rule.negative.has(w));
  }
  if (!negative && rule.negativeAfter.size > 0) {
    negative = wordsAfter(text, c.end, rule.after, true).some((w) => rule.negativeAfter.has(w));
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

function gateAndFind(text: string, policy: AnalyzerPolicy, candidates: Candidate[]): void {
  // Gates are shared between recognizers (HAS_DIGIT): test each once.
  const tested: Array<RegExp | string> = [];
  const passed: boolean[] = [];
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
    r.find(text, policy.env, candidates);
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
 * Detect entities in several strings at once: they are joined with {@link SEGMENT_SEPARATOR}
 * and every recognizer runs once over the whole (the per-call cost of ~25 regexes dominates
 * for the many short strings of a JSON message). Nothing crosses a segment: candidates that
 * would are dropped, context words are read within the segment (plus its key's words).
 * `keys[i]` is the JSON property of `texts[i]`. Returns the detections of each segment that has
 * any, by segment index, with offsets into that segment.
 */
export function analyzeSegments(
  texts: readonly string[],
  keys: readonly SegmentKey[],
  policy: AnalyzerPolicy,
): Map<number, Detection[]> {
  const result = new Map<number, Detection[]>();
  const starts = new Int32Array(texts.length);
  let length = 0;
  for (let i = 0; i < texts.length; i++) {
    if (i > 0) length += SEGMENT_SEPARATOR.length;
    starts[i] = length;
    length += (texts[i] as string).length;
  }
  if (length === 0) return result;
  const text = texts.join(SEGMENT_SEPARATOR);
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

  const keyWordsOf = (i: number): readonly string[] => {
    const key = keys[i];
    return typeof key === 'string' ? keyWords(key) : NO_WORDS;
  };
  const own = ownOutputSpans(text);
  const scored: Detection[] = [];
  for (const c of candidates) {
    if (!policy.enabled.has(c.type) || c.end <= c.start) continue;
    const seg = segmentAt(starts, c.start);
    if (c.end > (starts[seg] ?? 0) + (texts[seg]?.length ?? 0)) continue;
    if (own.length > 0 && own.some(([s, e]) => c.start < e && s < c.end)) continue;
    const threshold = policy.thresholds[c.type];
    const delta = contextDelta(text, c, keyWordsOf(seg));
    let score = clampScore(c.score + delta);
    if (score < threshold) continue;
    // Refine only when validation decides: not when even the floor passes with this context.
    if (
      c.refine !== undefined &&
      (c.floor === undefined || clampScore(c.floor + delta) < threshold)
    ) {
      const base = c.refine();
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
  for (const d of resolveOverlaps(scored)) {
    if (allowing && isAllowed(text.slice(d.start, d.end), policy.allow)) continue;
    const seg = segmentAt(starts, d.start);
    const at = starts[seg] ?? 0;
    let list = result.get(seg);
    if (list === undefined) {
      list = [];
      result.set(seg, list);
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
  return analyzeSegments([text], [key], policy).get(0) ?? [];
}
