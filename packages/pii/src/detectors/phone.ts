/**
 * PHONE_NUMBER. A candidate is a run of digit groups joined by single spaces, dots, dashes or
 * slashes, with an optional leading `+`, parenthesised area or trunk codes (`(0)`, `(555)`) and
 * an extension (`x123`, `ext. 12`, `#12`), holding 7–15 digits. Runs shaped like dates, IPv4
 * addresses, thousands groupings, versions or ISBNs are dropped.
 *
 * Scores, before context (threshold 0.5 by default):
 * - `+…` valid for its country (libphonenumber-js, `max` metadata) 0.75; possible 0.5; else 0.3.
 * - national, valid in the default region: 0.6 when written with separators, 0.35 as bare digits;
 *   otherwise 0.3 with separators, 0.2 without.
 * Phone words nearby (phone, mobile, fax, call, …, or the JSON key `phone`) add 0.35; order,
 * invoice, SSN, card words just before subtract 0.35, and so do street words after it on its
 * line (a house number). So a foreign national number ("0490 75 40 81") needs a phone word
 * nearby to be reported. Validation costs ~30 µs, so it runs only when it decides the outcome:
 * a number with a phone word next to it is reported without it (its score is then the
 * unvalidated one); in North American regions a number not shaped `[1] NXX NXX XXXX` is
 * invalid without asking libphonenumber.
 */
import {
  type CountryCode,
  type MetadataJson,
  parsePhoneNumberFromString,
} from 'libphonenumber-js/core';
import maxMetadata from 'libphonenumber-js/max/metadata';
import {
  ASCII_NOT_AFTER_WORD,
  ASCII_NOT_BEFORE_WORD,
  allSameChar,
  type Candidate,
  contextRule,
  forEachMatch,
  HAS_DIGIT,
  isBounded,
  memoize,
  type Recognizer,
  type RecognizerEnv,
} from './recognizer.ts';

const GROUP = String.raw`\d{1,12}`;
const PAREN = String.raw`\(\d{1,5}\)`;
const RUN = new RegExp(
  `${ASCII_NOT_AFTER_WORD}(?<![+\\-.\\/:#@%])` +
    String.raw`(?:\+ ?)?(?:${PAREN} ?${GROUP}|${GROUP})(?:(?: - |[ .\/\-]| ?${PAREN} ?)${GROUP})*` +
    // Group 1: the extension (numbered, not named: a groups object per match costs).
    String.raw`( ?(?:[xX]|[eE][xX][tT]\.?|extension|#) ?\d{1,6})?` +
    `${ASCII_NOT_BEFORE_WORD}(?![.\\-\\/:]\\d)`,
  'g',
);

const CONTEXT = contextRule({
  words: [
    'phone',
    'phones',
    'telephone',
    'tel',
    'mobile',
    'mob',
    'cell',
    'cellphone',
    'cellular',
    'fax',
    'desk',
    'office',
    'landline',
    'call',
    'called',
    'calling',
    'callback',
    'ring',
    'dial',
    'text',
    'sms',
    'whatsapp',
    'message',
    'messages',
    'contact',
    'reach',
    'answering',
    'voicemail',
    'hotline',
    'ext',
    'extension',
    'telefon',
    'telefono',
    'teléfono',
    'téléphone',
    'tél',
    'mobil',
    'móvil',
    'cellulare',
    'phone number',
  ],
  negative: [
    'order',
    'invoice',
    'account',
    'acct',
    'isbn',
    'tracking',
    'ssn',
    'social',
    'card',
    'iban',
    'zip',
    'postcode',
    'postal',
    'passport',
    'license',
    'licence',
    'serial',
    'version',
    'reference',
    'ref',
    'transaction',
  ],
  // A number followed by street words on its line is a house number and postcode.
  negativeAfter: [
    'st',
    'street',
    'rd',
    'road',
    'ave',
    'avenue',
    'blvd',
    'lane',
    'ln',
    'apt',
    'suite',
    'drive',
    'dr',
  ],
});

function validDate(y: number, m: number, d: number): boolean {
  return y >= 1800 && y <= 2199 && m >= 1 && m <= 12 && d >= 1 && d <= 31;
}

/** Whether the digit groups read as a date with a four-digit year. */
function dateLike(groups: readonly string[], seps: readonly string[]): boolean {
  if (groups.length !== 3 || seps.some((s) => s !== seps[0] || !/^[-./]$/.test(s))) return false;
  const [a = '', b = '', c = ''] = groups;
  const n = groups.map(Number) as [number, number, number];
  if (a.length === 4 && b.length <= 2 && c.length <= 2) return validDate(n[0], n[1], n[2]);
  if (c.length === 4 && a.length <= 2 && b.length <= 2) {
    return validDate(n[2], n[1], n[0]) || validDate(n[2], n[0], n[1]);
  }
  return false;
}

interface Shape {
  groups: string[];
  seps: string[];
  digits: string;
  plus: boolean;
}

function isDigitCode(c: number): boolean {
  return c >= 48 && c <= 57;
}

function digitCount(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) if (isDigitCode(s.charCodeAt(i))) n++;
  return n;
}

/** The digit groups of a run and the separators between them (`+1 (555) 010-9999`). */
function shapeOf(main: string): Shape {
  const plus = main.startsWith('+');
  // A "(0)" after a country code is the trunk prefix: not dialled, not counted.
  const dialled = plus ? main.replace('(0)', '') : main;
  const groups: string[] = [];
  const seps: string[] = [];
  let i = 0;
  while (i < dialled.length && !isDigitCode(dialled.charCodeAt(i))) i++;
  while (i < dialled.length) {
    const start = i;
    while (i < dialled.length && isDigitCode(dialled.charCodeAt(i))) i++;
    groups.push(dialled.slice(start, i));
    const sep = i;
    while (i < dialled.length && !isDigitCode(dialled.charCodeAt(i))) i++;
    if (i < dialled.length) seps.push(dialled.slice(sep, i));
  }
  return { groups, seps, digits: groups.join(''), plus };
}

/** Reasons a run is not a phone number whatever its context. */
function implausible({ groups, seps, digits, plus }: Shape, main: string): boolean {
  if (digits.length < 7 || digits.length > 15) return true;
  if (groups.length > 6 || allSameChar(digits)) return true;
  if (dateLike(groups, seps)) return true;
  const dotted = seps.length > 0 && seps.every((s) => s === '.');
  if (dotted && groups.length === 2) return true; // a decimal number
  if (dotted && groups.length === 4 && groups.every((g) => g.length <= 3 && Number(g) <= 255)) {
    return true; // an IPv4 address
  }
  if (dotted && /^\d{1,3}(?:\.\d{3})+$/.test(main)) return true; // 1.000.000
  const singles = groups.filter((g, i) => g.length === 1 && !(i === 0 && plus)).length;
  return singles >= 2; // versions, ISBNs, spaced-out digits
}

const NANP = /^1?[2-9]\d{2}[2-9]\d{6}$/;

/**
 * Whether a national number certainly fails validation without asking libphonenumber (~30 µs):
 * in a North American Numbering Plan region a valid number is `[1] NXX NXX XXXX`.
 */
function surelyInvalid(shape: Shape, region: CountryCode, metadata: MetadataJson): boolean {
  if (shape.plus) return false;
  const nanp = metadata.country_calling_codes['1'] ?? [];
  return nanp.includes(region) && !NANP.test(shape.digits);
}

/** Score of a plausible run before context. */
function baseScore(shape: Shape, main: string, region: CountryCode, metadata: MetadataJson) {
  if (surelyInvalid(shape, region, metadata)) return shape.groups.length > 1 ? 0.3 : 0.2;
  let parsed: ReturnType<typeof parsePhoneNumberFromString>;
  try {
    parsed = shape.plus
      ? parsePhoneNumberFromString(main, metadata)
      : parsePhoneNumberFromString(main, region, metadata);
  } catch {
    parsed = undefined;
  }
  if (shape.plus) {
    if (parsed?.isValid()) return 0.75;
    return parsed?.isPossible() ? 0.5 : 0.3;
  }
  const separated = shape.groups.length > 1;
  if (parsed?.isValid()) return separated ? 0.6 : 0.35;
  return separated ? 0.3 : 0.2;
}

/**
 * Build a phone recognizer over the given libphonenumber-js metadata. The engine uses the
 * `max` bundle (full per-type patterns, so fewer random digit strings pass as valid); the
 * benchmark compares it with `min`.
 */
export function createPhoneRecognizer(metadata: MetadataJson): Recognizer {
  // Validation by `region number`, memoised: the same numbers recur across messages.
  const validated = memoize((key) => {
    const space = key.indexOf(' ');
    const main = key.slice(space + 1);
    return baseScore(shapeOf(main), main, key.slice(0, space) as CountryCode, metadata);
  });
  return {
    name: 'phone',
    types: ['PHONE_NUMBER'],
    requires: HAS_DIGIT,
    find(text: string, env: RecognizerEnv, out: Candidate[]) {
      forEachMatch(RUN, text, (m) => {
        // Most runs are short numbers (years, counts, ids): fewer than 7 characters cannot hold 7 digits.
        if (m[0].length < 7 || !isBounded(text, m.index, m.index + m[0].length)) return;
        const ext = m[1] ?? '';
        const main = m[0].slice(0, m[0].length - ext.length);
        // Most runs have too few or too many digits: reject them before building a shape.
        const dialled = digitCount(main) - (main.startsWith('+') && main.includes('(0)') ? 1 : 0);
        if (dialled < 7 || dialled > 15) return;
        const shape = shapeOf(main);
        if (implausible(shape, main)) return;
        // Parsing costs ~30 µs: the analyzer asks for it only when validity decides whether
        // the number is reported (e.g. not when a phone word is next to it).
        const separated = shape.groups.length > 1;
        out.push({
          type: 'PHONE_NUMBER',
          start: m.index,
          end: m.index + m[0].length,
          score: shape.plus ? 0.75 : separated ? 0.6 : 0.35,
          floor: shape.plus || separated ? 0.3 : 0.2,
          refine: () => validated(`${env.defaultRegion} ${main}`),
          recognizer: 'phone',
          context: CONTEXT,
        });
      });
    },
  };
}

/** Recognizer for PHONE_NUMBER with the `max` metadata. */
export const phoneRecognizer: Recognizer = createPhoneRecognizer(maxMetadata);

/** Whether `region` is a region libphonenumber-js knows (for config validation). */
export function isPhoneRegion(region: string): region is CountryCode {
  return Object.hasOwn(maxMetadata.countries, region);
}
