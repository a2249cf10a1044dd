/**
 * One scan of a text for its digits, shared by the digit-based recognizers (phone, card, SSN,
 * IPv4, IBAN, crypto wallets) so that each of them runs its pattern only where it can match
 * instead of over the whole text.
 *
 * A digit *group* starts at a digit whose previous character is not a digit. A *run* is a
 * maximal chain of groups joined by *gaps*: the characters that a phone, card, SSN or IPv4
 * pattern may have between two digits — an optional blank, then one of `- . / ( ) # x X`,
 * `ext`, `ext.` (any case) or `extension`, then an optional blank (`555-0100`, `+1 (555) 0100`,
 * `1.2.3.4`, `555 0100 ext. 12`) — or nothing but the blank. Every match of those patterns lies
 * within one run (its lookarounds may read past it), so a run with too few digits or dots for
 * a pattern can be skipped as a whole without changing what the pattern finds in the others.
 */

import { codeAt } from './chars.ts';

const DIGIT = /\d/g;

function isDigitCode(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** Runs shorter than this and with fewer dots are not recorded (no pattern needs them). */
const LONG_RUN_DIGITS = 7;
const LONG_RUN_DOTS = 3;

/** The digit groups and runs of a text (see the module comment). */
export interface DigitRuns {
  /** Start of every digit group, ascending. */
  readonly groups: readonly number[];
  /**
   * The runs holding at least 7 digits or 3 dots, four numbers each: index in `groups` of its
   * first group, index after its last group, its number of digits, its number of `.` in gaps.
   */
  readonly runs: readonly number[];
}

/**
 * Length of the gap starting at `i` (right after a digit) when a digit follows it, else 0:
 * `[blank] (- . / ( ) # x X ext ext. extension)? [blank]` (blank: one space).
 */
export function gapLength(text: string, i: number): number {
  let j = i;
  if (codeAt(text, j) === 32) j++;
  const c = codeAt(text, j);
  if (
    c === 45 || // -
    c === 46 || // .
    c === 47 || // /
    c === 40 || // (
    c === 41 || // )
    c === 35 || // #
    c === 120 || // x
    c === 88 // X
  ) {
    j++;
  } else if (
    (c === 101 || c === 69) &&
    (codeAt(text, j + 1) | 32) === 120 &&
    (codeAt(text, j + 2) | 32) === 116
  ) {
    if (text.startsWith('extension', j)) j += 9;
    else {
      j += 3;
      if (codeAt(text, j) === 46) j++;
    }
  }
  if (codeAt(text, j) === 32) j++;
  return j > i && isDigitCode(codeAt(text, j)) ? j - i : 0;
}

// The characters a gap may start with (by code, below 128).
const GAP_START = new Uint8Array(128);
for (const c of ' -./()#xXeE') GAP_START[c.charCodeAt(0)] = 1;

// After a run, the next digit is looked for by hand this far before asking the regex: digits
// often come close together (dates, times, addresses).
const PROBE = 8;

/** Scan `text` for its digit groups and runs. */
export function scanDigits(text: string): DigitRuns {
  const groups: number[] = [];
  const runs: number[] = [];
  const n = text.length;
  let i = 0;
  for (;;) {
    let j = i;
    const probe = Math.min(n, i + PROBE);
    while (j < probe && !isDigitCode(text.charCodeAt(j))) j++;
    if (j === probe) {
      if (j === n) break;
      DIGIT.lastIndex = j;
      if (!DIGIT.test(text)) break;
      j = DIGIT.lastIndex - 1;
    }
    const first = groups.length;
    let digits = 0;
    let dots = 0;
    for (;;) {
      groups.push(j);
      const start = j;
      j++;
      while (j < n && isDigitCode(text.charCodeAt(j))) j++;
      digits += j - start;
      // Most runs end at a character no gap starts with: ` - . / ( ) # x X e E`.
      const c = codeAt(text, j);
      if (c < 0 || GAP_START[c] !== 1) break;
      const gap = gapLength(text, j);
      if (gap === 0) break;
      for (let k = j; k < j + gap; k++) if (text.charCodeAt(k) === 46) dots++;
      j += gap;
    }
    if (digits >= LONG_RUN_DIGITS || dots >= LONG_RUN_DOTS)
      runs.push(first, groups.length, digits, dots);
    i = j;
  }
  return { groups, runs };
}

/**
 * The group starts of the runs with at least `minDigits` digits and `minDots` dots, ascending:
 * where a pattern that needs that many may start (a digit after a non-digit). Only long runs
 * are recorded: `minDigits` must be 7 or more, or `minDots` 3 or more.
 */
export function groupsInRuns(scan: DigitRuns, minDigits: number, minDots = 0): number[] {
  if (minDigits < LONG_RUN_DIGITS && minDots < LONG_RUN_DOTS) {
    throw new RangeError('groupsInRuns: only runs of 7 digits or 3 dots are recorded');
  }
  const out: number[] = [];
  const { groups, runs } = scan;
  for (let r = 0; r < runs.length; r += 4) {
    if ((runs[r + 2] as number) < minDigits || (runs[r + 3] as number) < minDots) continue;
    const end = runs[r + 1] as number;
    for (let g = runs[r] as number; g < end; g++) out.push(groups[g] as number);
  }
  return out;
}
