/**
 * IBAN_CODE: a country code, two check digits and the BBAN, in any case, compact or grouped
 * with single spaces. Validated against the IBAN registry's length for the country and the
 * ISO 7064 mod-97-10 checksum. The span ends exactly at the country's length, so trailing
 * words ("… 32 to my account") are never swallowed; a compact value that runs on into more
 * letters or digits is rejected. `_` bounds it like a blank (`acct_GB82WEST…`,
 * `GB82WEST…_2024.pdf`): it cannot be part of an IBAN, so the span is not ambiguous.
 */

import { codeAt } from './chars.ts';
import {
  type Candidate,
  contextRule,
  digitRunsOf,
  HAS_DIGIT,
  isWordCharAt,
  type Recognizer,
} from './recognizer.ts';

/** IBAN length per country (SWIFT IBAN registry). */
export const IBAN_LENGTHS: Readonly<Record<string, number>> = {
  AD: 24,
  AE: 23,
  AL: 28,
  AT: 20,
  AZ: 28,
  BA: 20,
  BE: 16,
  BG: 22,
  BH: 22,
  BI: 27,
  BR: 29,
  BY: 28,
  CH: 21,
  CR: 22,
  CY: 28,
  CZ: 24,
  DE: 22,
  DJ: 27,
  DK: 18,
  DO: 28,
  EE: 20,
  EG: 29,
  ES: 24,
  FI: 18,
  FK: 18,
  FO: 18,
  FR: 27,
  GB: 22,
  GE: 22,
  GI: 23,
  GL: 18,
  GR: 27,
  GT: 28,
  HN: 28,
  HR: 21,
  HU: 28,
  IE: 22,
  IL: 23,
  IQ: 23,
  IS: 26,
  IT: 27,
  JO: 30,
  KW: 30,
  KZ: 20,
  LB: 28,
  LC: 32,
  LI: 21,
  LT: 20,
  LU: 20,
  LV: 21,
  LY: 25,
  MC: 27,
  MD: 24,
  ME: 22,
  MK: 19,
  MN: 20,
  MR: 27,
  MT: 31,
  MU: 30,
  NI: 28,
  NL: 18,
  NO: 15,
  OM: 23,
  PK: 24,
  PL: 28,
  PS: 29,
  PT: 25,
  QA: 29,
  RO: 24,
  RS: 22,
  RU: 33,
  SA: 24,
  SC: 31,
  SD: 18,
  SE: 24,
  SI: 19,
  SK: 24,
  SM: 27,
  SO: 23,
  ST: 25,
  SV: 28,
  TL: 23,
  TN: 24,
  TR: 26,
  UA: 29,
  VA: 22,
  VG: 24,
  XK: 20,
  YE: 30,
};

/** Exported for tests (sticky). */
export const IBAN_CANDIDATE = /(?<![0-9A-Za-z])[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]){11,30}/y;

function isAsciiLetter(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

function isAsciiAlnum(c: number): boolean {
  return isAsciiLetter(c) || (c >= 48 && c <= 57);
}

/** Whether the character at `index` continues the IBAN's word (`_` does not: see above). */
function continuesWord(text: string, index: number): boolean {
  return codeAt(text, index) !== 95 && isWordCharAt(text, index);
}

/**
 * Whether a candidate may start at `p`, two before the digit group at `p + 2`: two ASCII
 * letters, two digits, no ASCII letter or digit before.
 */
function mayStart(text: string, p: number): boolean {
  const d = codeAt(text, p + 3);
  return (
    isAsciiLetter(codeAt(text, p)) &&
    isAsciiLetter(codeAt(text, p + 1)) &&
    d >= 48 &&
    d <= 57 &&
    !isAsciiAlnum(codeAt(text, p - 1))
  );
}

/** ISO 7064 mod-97-10 over an upper-case compact IBAN: true when the remainder is 1. */
export function ibanChecksumValid(iban: string): boolean {
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let r = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    if (c >= 48 && c <= 57) r = (r * 10 + (c - 48)) % 97;
    else if (c >= 65 && c <= 90) r = (r * 100 + (c - 55)) % 97;
    else return false;
  }
  return r === 1;
}

/** Whether `value` (any case, spaces allowed) is a valid IBAN. */
export function isValidIban(value: string): boolean {
  const compact = value.replace(/ /g, '').toUpperCase();
  return IBAN_LENGTHS[compact.slice(0, 2)] === compact.length && ibanChecksumValid(compact);
}

const CONTEXT = contextRule({
  words: ['iban', 'account', 'bank', 'transfer', 'wire', 'sepa', 'bic', 'swift', 'payee'],
});

/** Recognizer for IBAN_CODE (base score 0.85). */
export const ibanRecognizer: Recognizer = {
  name: 'iban',
  types: ['IBAN_CODE'],
  requires: HAS_DIGIT,
  find(text, _env, out: Candidate[], scans) {
    // What a global scan finds: the candidate is tried where it may start (two letters before
    // a digit group), the next one looked for from where the scan would resume.
    let resume = 0;
    for (const g of digitRunsOf(text, scans).groups) {
      const p = g - 2;
      if (p < resume || !mayStart(text, p)) continue;
      IBAN_CANDIDATE.lastIndex = p;
      const m = IBAN_CANDIDATE.exec(text);
      if (m === null) continue;
      const raw = m[0];
      // The candidate may have run past the IBAN: resume right after its country code, or
      // after the IBAN once one is accepted, so a following value is still seen.
      resume = m.index + 2;
      const length = IBAN_LENGTHS[raw.slice(0, 2).toUpperCase()];
      if (length === undefined) continue;
      // Cut the candidate after `length` significant characters.
      let seen = 0;
      let end = 0;
      while (end < raw.length && seen < length) {
        if (raw[end] !== ' ') seen++;
        end++;
      }
      if (seen < length) continue;
      const value = raw.slice(0, end);
      const compact = value.replace(/ /g, '').toUpperCase();
      if (!ibanChecksumValid(compact)) continue;
      if (continuesWord(text, m.index - 1) || continuesWord(text, m.index + end)) continue;
      resume = m.index + end;
      out.push({
        type: 'IBAN_CODE',
        start: m.index,
        end: m.index + end,
        score: 0.85,
        recognizer: 'iban',
        context: CONTEXT,
      });
    }
  },
};
