/**
 * US_SSN: `AAA-GG-SSSS` (dashes, spaces, dots — one kind — or none). Rejected per the SSA's
 * rules: area 000, 666 or 900–999; group 00; serial 0000; one repeated digit; and numbers the
 * SSA lists as never valid because they were published (123-45-6789 from advertising,
 * 078-05-1120 from the Woolworth wallet insert, 219-09-9999). Areas 734–749 and 773–899 are
 * accepted: since 2011 areas are assigned randomly.
 * Scores: dashed 0.5, spaced or dotted 0.4, bare 9 digits 0.2; SSN words add 0.35.
 * A number glued to a word (`ssn_536-22-8726`, `x-536-22-8726`, `/536-22-8726.pdf`: a letter
 * or `_` right next to it, or `-`, `.`, `/` right before it) scores
 * 0.2 whatever its shape: part numbers and ids look the same, so it needs an SSN word. Never
 * inside a longer number (a digit of any script next to it, `+` before it, a digit and `-`,
 * `.` or `/` before it, or `-`, `.`, `/` and a digit after it).
 */

import { groupsInRuns } from './digits.ts';
import {
  allSameChar,
  type Candidate,
  contextRule,
  digitRunsOf,
  forEachMatchAt,
  HAS_DIGIT,
  isNumberCharAt,
  isWordCharAt,
  type Recognizer,
} from './recognizer.ts';

/** Exported for tests (sticky). */
export const SSN = /(?<![0-9+])(?<![0-9][-./])(\d{3})([- .]?)(\d{2})\2(\d{4})(?![0-9])(?![-./]\d)/y;

/** Whether `text[start, end)` touches a word, or `-`, `.`, `/` before it (see the module comment). */
function isGlued(text: string, start: number, end: number): boolean {
  const before = text.charCodeAt(start - 1);
  return (
    isWordCharAt(text, start - 1) ||
    isWordCharAt(text, end) ||
    before === 45 || // -
    before === 46 || // .
    before === 47 // /
  );
}

const PUBLISHED = new Set(['123456789', '078051120', '219099999']);

/** Whether area, group and serial follow the SSA's rules (digits only, 9 of them). */
export function ssnValid(digits: string): boolean {
  const area = Number(digits.slice(0, 3));
  if (area === 0 || area === 666 || area >= 900) return false;
  if (digits.slice(3, 5) === '00' || digits.slice(5) === '0000') return false;
  return !allSameChar(digits) && !PUBLISHED.has(digits);
}

const CONTEXT = contextRule({
  words: ['ssn', 'ssns', 'social', 'ss', 'ssa', 'taxpayer', 'social security'],
  negative: ['phone', 'tel', 'fax', 'mobile', 'call', 'order', 'invoice', 'zip', 'routing'],
});

/** Recognizer for US_SSN. */
export const usSsnRecognizer: Recognizer = {
  name: 'us-ssn',
  types: ['US_SSN'],
  requires: HAS_DIGIT,
  find(text, _env, out: Candidate[], scans) {
    // Tried at the digit groups of runs with 9 digits or more.
    forEachMatchAt(SSN, text, groupsInRuns(digitRunsOf(text, scans), 9), (m) => {
      const end = m.index + m[0].length;
      if (isNumberCharAt(text, m.index - 1) || isNumberCharAt(text, end)) return;
      const digits = `${m[1]}${m[3]}${m[4]}`;
      if (!ssnValid(digits)) return;
      const sep = m[2];
      out.push({
        type: 'US_SSN',
        start: m.index,
        end,
        score: isGlued(text, m.index, end) ? 0.2 : sep === '-' ? 0.5 : sep === '' ? 0.2 : 0.4,
        recognizer: 'us-ssn',
        context: CONTEXT,
      });
    });
  },
};
