/**
 * DATE_OF_BIRTH, only after a birth phrase ("born on", "date of birth", "DOB", "birthday",
 * "birth date", "geboren am", "né le") with at most 24 non-digit characters on the same line
 * in between ("date of birth. It's 6/24/1991"). Dates: `1990-01-31`, `1990/01/31`,
 * `31/01/1990`, `01-31-90`, `31.01.1990`, `31 January 1990`, `31st of Jan 1990`,
 * `January 31, 1990`. The day and month must be valid in at least one reading (d/m or m/d).
 * Only the date is reported. A date without such a phrase is never a DATE_OF_BIRTH. Score 0.85.
 */
import { type Candidate, forEachMatchAt, matchIndexes, type Recognizer } from './recognizer.ts';

const MONTHS =
  'jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?';
const MONTH_INDEX: Readonly<Record<string, number>> = {
  jan: 1,
  feb: 2,
  mar: 3,
  apr: 4,
  may: 5,
  jun: 6,
  jul: 7,
  aug: 8,
  sep: 9,
  oct: 10,
  nov: 11,
  dec: 12,
};
const PHRASE = String.raw`(?:born(?:\s+on)?|date\s+of\s+birth|d\.?o\.?b\b\.?|birth\s*date|birthday|geboren(?:\s+am)?|n[ée]e?\s+le)`;
const DATE = [
  String.raw`\d{4}[-/]\d{1,2}[-/]\d{1,2}`,
  String.raw`\d{1,2}[/.\-]\d{1,2}[/.\-](?:\d{4}|\d{2})`,
  String.raw`\d{1,2}(?:st|nd|rd|th)?(?:\s+of)?\s+(?:${MONTHS})\.?,?\s+\d{4}`,
  String.raw`(?:${MONTHS})\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}`,
].join('|');
const DOB = new RegExp(
  String.raw`(?<![A-Za-z0-9])${PHRASE}(?![\p{L}\p{N}])[^\d\n\r]{0,24}?(?<date>${DATE})(?![\p{N}])`,
  'iuy',
);

/** Whether `text` holds `word` (lower-case ASCII letters and dots) at `at`, in any case. */
function hasWordAt(text: string, at: number, word: string): boolean {
  if (at < 0 || at + word.length > text.length) return false;
  for (let k = 0; k < word.length; k++) {
    const w = word.charCodeAt(k);
    const c = text.charCodeAt(at + k);
    if (c !== w && !(w >= 97 && w <= 122 && c === w - 32)) return false;
  }
  return true;
}

/** Whether one of the cue words has the `b` or `B` at `i`. */
function cueAt(text: string, i: number): boolean {
  return (
    hasWordAt(text, i, 'born') ||
    hasWordAt(text, i, 'birth') ||
    hasWordAt(text, i - 2, 'dob') ||
    hasWordAt(text, i - 4, 'd.o.b') ||
    hasWordAt(text, i - 2, 'geboren')
  );
}

/**
 * `/born|birth|dob|d\.o\.b|geboren/i.test(text)`, several times faster: each of these has a
 * `b`, found with indexOf.
 */
export function hasPhraseCue(text: string): boolean {
  for (const b of ['b', 'B']) {
    for (let i = text.indexOf(b); i !== -1; i = text.indexOf(b, i + 1)) {
      if (cueAt(text, i)) return true;
    }
  }
  return false;
}

// Where a phrase can start (a superset: the sticky DOB decides). Not a Unicode regex, which
// is several times slower to run over a whole text.
const PHRASE_START = /born|date|d\.?o\.?b|birth|geboren|n[ée]e?\s/gi;

function validDay(y: number, m: number, d: number): boolean {
  if (m < 1 || m > 12 || d < 1) return false;
  const days = [
    31,
    y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28,
    31,
    30,
    31,
    30,
    31,
    31,
    30,
    31,
    30,
    31,
  ];
  return d <= (days[m - 1] ?? 0);
}

/** Whether the written date names a real calendar day (either d/m or m/d order). */
export function plausibleDate(date: string): boolean {
  const parts = date.toLowerCase().match(/\d+|[a-z]+/g) ?? [];
  const nums = parts.filter((p) => /^\d+$/.test(p)).map(Number);
  const monthName = parts.find((p) => /^[a-z]{3,}$/.test(p) && MONTH_INDEX[p.slice(0, 3)]);
  if (monthName !== undefined) {
    const m = MONTH_INDEX[monthName.slice(0, 3)] ?? 0;
    const [d = 0, y = 0] = /^\d{4}$/.test(String(nums[0])) ? [nums[1], nums[0]] : nums;
    return validDay(y, m, d);
  }
  const [a = 0, b = 0, c = 0] = nums;
  if (/^\d{4}/.test(date)) return validDay(a, b, c);
  return validDay(c, b, a) || validDay(c, a, b);
}

/** Recognizer for DATE_OF_BIRTH. */
export const dateOfBirthRecognizer: Recognizer = {
  name: 'date-of-birth',
  types: ['DATE_OF_BIRTH'],
  // `é le` rather than `née le`: an alternative starting with the common `n` slows the scan.
  find(text, _env, out: Candidate[]) {
    // `né le` is looked up apart: a non-ASCII letter in a case-insensitive alternation makes
    // the whole scan twice as slow.
    if (!hasPhraseCue(text) && !text.includes('é le') && !text.includes('É LE')) return;
    forEachMatchAt(DOB, text, matchIndexes(PHRASE_START, text), (m) => {
      if (/[\p{L}\p{N}]/u.test(text[m.index - 1] ?? '')) return;
      const date = m.groups?.date ?? '';
      if (!plausibleDate(date)) return;
      const end = m.index + m[0].length;
      out.push({
        type: 'DATE_OF_BIRTH',
        start: end - date.length,
        end,
        score: 0.85,
        recognizer: 'date-of-birth',
      });
    });
  },
};
