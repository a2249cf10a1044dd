/**
 * CREDIT_CARD: 12–19 digits, bare or grouped with one kind of separator (space or dash; first
 * group of 4, middle groups of 4–6; the number ends where another separator starts), passing
 * Luhn. Scores: a known issuer range (IIN) with a
 * length that issuer uses 0.8; Maestro's 12-digit numbers 0.4 (they need a card word nearby);
 * a Luhn-valid 13–19 digit number outside every known range 0.3 (also needs context).
 * A number of one repeated digit is never a card. When a grouped run does not validate, it is
 * retried once without a trailing group of ≤ 4 digits ("4111 1111 1111 1111 12/27" → the
 * card), if at least 13 digits remain.
 *
 * Boundaries: a card number may be glued to `_` and separators on either side (`card-4111…`,
 * `cust_4111…`, `cc=4111…`, `/4111….txt`): identifiers, file names and query strings carry
 * them that way. Right next to a letter (`x4111…`, `U62928788557186`) it scores at most 0.3 and
 * needs a card word: ids with a letter prefix (licences, passports, accounts) pass Luhn one time
 * in ten. It is refused inside a longer number: next to a digit
 * of any script, after `+` (an E.164 phone, an exponent), after a digit and `-` or `.`
 * (`1.4111…`: a decimal fraction such as a serialized float, a version; `2024-4111…`: part of a
 * compound id) or before `-`/`.` and a digit. A number glued to ASCII letters is also refused
 * when the whole alphanumeric word is hexadecimal, or a `0x` literal (`deadbeef4111…`, `0x4111…`):
 * hashes and hex ids hold long decimal runs by chance.
 */

import { codeAt } from './chars.ts';
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
  luhnValid,
  type Recognizer,
} from './recognizer.ts';

/**
 * The card run (sticky; exported for tests). ASCII only: digits of other scripts next to it
 * are checked on each match ({@link isNumberCharAt}).
 */
export const CARD_RUN = /(?<![0-9+])(?<![0-9][-.])\d(?:[ -]?\d){11,22}(?![0-9])(?![-.]\d)/y;

function isAsciiAlnum(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

function isHexDigit(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

/** Highest score of a number right next to a letter: it needs a card word. */
const LETTER_GLUED_SCORE = 0.3;

/** Whether the character at `index` is a letter that continues a word (not `_`, not a digit). */
function isLetterAt(text: string, index: number): boolean {
  return codeAt(text, index) !== 95 && isWordCharAt(text, index) && !isNumberCharAt(text, index);
}

/**
 * Whether the number at `text[start, end)` is glued to ASCII letters or digits and the word they
 * form is hexadecimal (`deadbeef4111…`) or a `0x` literal: a hash or hex id, not a card.
 */
export function inHexWord(text: string, start: number, end: number): boolean {
  let a = start;
  while (isAsciiAlnum(codeAt(text, a - 1))) a--;
  let b = end;
  while (isAsciiAlnum(codeAt(text, b))) b++;
  if (a === start && b === end) return false;
  let i = a;
  if (start - a >= 2 && codeAt(text, a) === 48 && (codeAt(text, a + 1) | 32) === 120) i = a + 2;
  for (; i < start; i++) if (!isHexDigit(text.charCodeAt(i))) return false;
  for (let j = end; j < b; j++) if (!isHexDigit(text.charCodeAt(j))) return false;
  return true;
}

type Range = readonly [lo: number, hi: number, prefixDigits: number, lengths: readonly number[]];

const L16_19 = [16, 17, 18, 19];

/** Issuer identification number ranges and the lengths each issuer uses. */
const IIN_RANGES: readonly Range[] = [
  [4, 4, 1, [13, 16, 19]], // Visa
  [51, 55, 2, [16]], // Mastercard
  [2221, 2720, 4, [16]], // Mastercard 2-series
  [34, 34, 2, [15]], // American Express
  [37, 37, 2, [15]],
  [6011, 6011, 4, L16_19], // Discover
  [644, 649, 3, L16_19],
  [65, 65, 2, L16_19],
  [622126, 622925, 6, L16_19],
  [300, 305, 3, [14, 15, 16, 17, 18, 19]], // Diners Club
  [3095, 3095, 4, [14, 15, 16, 17, 18, 19]],
  [36, 36, 2, [14, 15, 16, 17, 18, 19]],
  [38, 39, 2, [14, 15, 16, 17, 18, 19]],
  [3528, 3589, 4, L16_19], // JCB
  [2131, 2131, 4, [15]], // JCB (15-digit)
  [1800, 1800, 4, [15]],
  [62, 62, 2, L16_19], // UnionPay
  [81, 81, 2, L16_19],
  [2200, 2204, 4, L16_19], // Mir
  [2205, 2205, 4, [16]], // BORICA
  [50, 50, 2, [12, 13, 14, 15, 16, 17, 18, 19]], // Maestro
  [56, 69, 2, [12, 13, 14, 15, 16, 17, 18, 19]],
  [60, 60, 2, [16]], // RuPay
  [508, 508, 3, [16]],
  [82, 82, 2, [16]],
  [353, 353, 3, [16]],
  [356, 356, 3, [16]],
  [506099, 506198, 6, [16, 18, 19]], // Verve
  [650002, 650027, 6, [16, 18, 19]],
  [9792, 9792, 4, [16]], // Troy
  [1, 1, 1, [15]], // UATP
  [5019, 5019, 4, [16]], // Dankort
  [636, 636, 3, L16_19], // InterPayment
  [637, 639, 3, [16]], // InstaPayment
];

/** Whether `digits` falls in a known issuer range with a length that issuer uses. */
export function knownIssuer(digits: string): boolean {
  for (const [lo, hi, n, lengths] of IIN_RANGES) {
    const prefix = Number(digits.slice(0, n));
    if (prefix >= lo && prefix <= hi && lengths.includes(digits.length)) return true;
  }
  return false;
}

const CONTEXT = contextRule({
  words: [
    'card',
    'cards',
    'credit',
    'debit',
    'cc',
    'visa',
    'mastercard',
    'amex',
    'discover',
    'jcb',
    'diners',
    'maestro',
    'unionpay',
    'payment',
    'pay',
    'charge',
    'charged',
    'billing',
    'cvv',
    'cvc',
    'expiry',
    'expires',
    'exp',
    'pan',
  ],
  negative: [
    'order',
    'invoice',
    'tracking',
    'isbn',
    'phone',
    'tel',
    'fax',
    'mobile',
    'iban',
    'ssn',
    'imei',
  ],
});

function score(digits: string): number {
  if (digits.length < 12 || digits.length > 19 || allSameChar(digits) || !luhnValid(digits)) {
    return 0;
  }
  if (knownIssuer(digits)) return digits.length === 12 ? 0.4 : 0.8;
  return digits.length === 12 ? 0 : 0.3;
}

/** Recognizer for CREDIT_CARD. */
export const creditCardRecognizer: Recognizer = {
  name: 'credit-card',
  types: ['CREDIT_CARD'],
  requires: HAS_DIGIT,
  find(text, _env, out: Candidate[], scans) {
    // Tried at the digit groups of runs with 12 digits or more.
    forEachMatchAt(CARD_RUN, text, groupsInRuns(digitRunsOf(text, scans), 12), (m) => {
      // One kind of separator: the run ends where another kind starts ("4111-…-1111 12/27").
      const first = /[ -]/.exec(m[0])?.[0];
      const other = first === undefined ? -1 : m[0].indexOf(first === ' ' ? '-' : ' ');
      const raw = other === -1 ? m[0] : m[0].slice(0, other);
      let groups = first === undefined ? [raw] : raw.split(first);
      // A bare number followed by other digits ("38191525753169 12/27").
      if ((groups[0]?.length ?? 0) >= 12) groups = groups.slice(0, 1);
      else if (groups.length > 1 && groups[0]?.length !== 4) return;
      const seps = groups.length > 1 && first !== undefined ? [first] : [];
      // The whole run, or the run without a short trailing group ("… 1111 12/27").
      const last = groups[groups.length - 1] ?? '';
      const attempts =
        groups.length > 2 && last.length <= 4 ? [groups, groups.slice(0, -1)] : [groups];
      for (const kept of attempts) {
        if (kept.slice(1, -1).some((g) => g.length < 4 || g.length > 6)) continue;
        const digits = kept.join('');
        if (kept !== groups && digits.length < 13) continue;
        const s = score(digits);
        if (s === 0) continue;
        const end = m.index + kept.join(seps[0] ?? '').length;
        if (isNumberCharAt(text, m.index - 1) || (kept === groups && isNumberCharAt(text, end))) {
          return;
        }
        if (inHexWord(text, m.index, end)) return;
        const letterGlued =
          isLetterAt(text, m.index - 1) || (kept === groups && isLetterAt(text, end));
        out.push({
          type: 'CREDIT_CARD',
          start: m.index,
          end,
          score: letterGlued ? Math.min(s, LETTER_GLUED_SCORE) : s,
          recognizer: 'credit-card',
          context: CONTEXT,
        });
        return;
      }
    });
  },
};
