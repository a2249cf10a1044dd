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
import { codeAt } from './chars.ts';
import { groupsInRuns } from './digits.ts';
import {
  type Candidate,
  contextRule,
  digitRunsOf,
  forEachMatchAt,
  HAS_DIGIT,
  isNumberCharAt,
  isWordCharAt,
  memoize,
  type Recognizer,
  type RecognizerEnv,
  type TextScans,
} from './recognizer.ts';

const GROUP = String.raw`\d{1,12}`;
const PAREN = String.raw`\(\d{1,5}\)`;
/**
 * The phone run (sticky; exported for tests). Never inside a longer number: not next to a
 * digit, not after `+`, `@`, `%` (`%2B…` is caught as glued to `B`), nor after a digit and
 * one of `+ - . / : # @ %`; not before `. - / :` and a digit, nor before a letter and a digit
 * (`0001-01-01T00:00:00Z`).
 */
export const PHONE_RUN = new RegExp(
  String.raw`(?<![0-9+@%])(?<![0-9+@%][\-.\/:#])` +
    String.raw`(?:\+ ?)?(?:${PAREN} ?${GROUP}|${GROUP})(?:(?: - |[ .\/\-]| ?${PAREN} ?)${GROUP})*` +
    // Group 1: the extension (numbered, not named: a groups object per match costs).
    String.raw`( ?(?:[xX]|[eE][xX][tT]\.?|extension|#) ?\d{1,6})?` +
    String.raw`(?![0-9])(?![.\-\/:]\d)(?![A-Za-z]\d)`,
  'y',
);

/**
 * Whether the run `text[start, end)` is glued to a word: a letter or `_` right next to it, or
 * one of `- . / : #` right before it (`phone_4155552671`, `tel:+14155552671`, `INV-4155552671`).
 * Ids and part numbers look the same, so such a run is reported only with a phone word.
 */
function isGlued(text: string, start: number, end: number): boolean {
  const before = codeAt(text, start - 1);
  return (
    isWordCharAt(text, start - 1) ||
    isWordCharAt(text, end) ||
    before === 45 || // -
    before === 46 || // .
    before === 47 || // /
    before === 58 || // :
    before === 35 // #
  );
}

/** Score of a glued run: it needs a phone word (+0.35) to reach the default threshold. */
const GLUED_SCORE = 0.2;

/**
 * Where a run may start (ascending): the digit groups of the digit runs holding at least 7
 * digits, each with the `+`, `(`, `+ `, `+(` or `+ (` written right before it.
 */
export function runStarts(text: string, scans: TextScans | undefined): number[] {
  const starts: number[] = [];
  for (const g of groupsInRuns(digitRunsOf(text, scans), 7)) {
    let k = g;
    if (codeAt(text, k - 1) === 40) k--; // (
    if (codeAt(text, k - 1) === 32 && codeAt(text, k - 2) === 43) starts.push(k - 2);
    else if (codeAt(text, k - 1) === 43) starts.push(k - 1);
    if (k < g) starts.push(k);
    starts.push(g);
  }
  return starts;
}

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

interface Shape {
  groups: string[];
  seps: string[];
  digits: string;
  plus: boolean;
}

function isDigitCode(c: number): boolean {
  return c >= 48 && c <= 57;
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

// Digit groups of the run being checked by groupsIfPlausible: value and length of each.
const GROUP_VALUES = new Float64Array(8);
const GROUP_LENGTHS = new Int32Array(8);

/**
 * Whether a run is implausible as a phone number whatever its context — fewer than 7 or more
 * than 15 digits, more than 6 groups, one repeated digit, a date with a four-digit year, a
 * decimal number, an IPv4 address, a thousands grouping (1.000.000), two or more one-digit
 * groups (versions, ISBNs, spaced-out digits) — read from the characters without building
 * the shape: -1 when it is, else its number of digit groups. The `(0)` that shapeOf drops
 * after a `+` is skipped in place.
 */
function groupsIfPlausible(main: string): number {
  const plus = main.charCodeAt(0) === 43;
  const trunk = plus ? main.indexOf('(0)') : -1;
  let groups = 0;
  let digits = 0;
  let first = -1; // the first digit, to tell one repeated digit
  let same = true;
  let sepChar = -1; // the separators' character when each is one and the same, else -2
  let dotted = true;
  let sepLength = 0;
  let lastSep = 0; // where the separator before the next group starts
  let inGroup = false;
  for (let i = 0; i < main.length; i++) {
    if (i === trunk) {
      i += 2;
      continue;
    }
    const c = main.charCodeAt(i);
    if (isDigitCode(c)) {
      if (!inGroup) {
        if (groups > 0) {
          // The separator before this group.
          if (sepLength !== 1) sepChar = -2;
          else if (groups === 1) sepChar = main.charCodeAt(lastSep);
          else if (sepChar !== main.charCodeAt(lastSep)) sepChar = -2;
          if (sepLength !== 1 || main.charCodeAt(lastSep) !== 46) dotted = false;
        }
        if (groups === 7) return -1; // more than 6 groups
        GROUP_VALUES[groups] = 0;
        GROUP_LENGTHS[groups] = 0;
        groups++;
        inGroup = true;
        sepLength = 0;
      }
      const g = groups - 1;
      GROUP_VALUES[g] = (GROUP_VALUES[g] as number) * 10 + (c - 48);
      GROUP_LENGTHS[g] = (GROUP_LENGTHS[g] as number) + 1;
      digits++;
      if (first === -1) first = c;
      else if (c !== first) same = false;
    } else {
      if (inGroup) {
        inGroup = false;
        lastSep = i;
      }
      if (groups > 0) sepLength++;
    }
  }
  if (digits < 7 || digits > 15 || groups > 6 || same) return -1;
  const seps = groups - 1;
  if (
    seps > 0 &&
    groups === 3 &&
    sepChar >= 0 &&
    (sepChar === 45 || sepChar === 46 || sepChar === 47)
  ) {
    if (dateGroups()) return -1;
  }
  if (seps > 0 && dotted) {
    if (groups === 2) return -1; // a decimal number
    if (groups === 4) {
      let ip = true;
      for (let g = 0; g < 4; g++) {
        if ((GROUP_LENGTHS[g] as number) > 3 || (GROUP_VALUES[g] as number) > 255) ip = false;
      }
      if (ip) return -1; // an IPv4 address
    }
    if (THOUSANDS.test(main)) return -1; // 1.000.000
  }
  let singles = 0;
  for (let g = 0; g < groups; g++) {
    if (GROUP_LENGTHS[g] === 1 && !(g === 0 && plus)) singles++;
  }
  return singles >= 2 ? -1 : groups; // versions, ISBNs, spaced-out digits
}
const THOUSANDS = /^\d{1,3}(?:\.\d{3})+$/;

/** Whether three groups (GROUP_VALUES, GROUP_LENGTHS) read as a date with a four-digit year. */
function dateGroups(): boolean {
  const a = GROUP_LENGTHS[0] as number;
  const b = GROUP_LENGTHS[1] as number;
  const c = GROUP_LENGTHS[2] as number;
  const x = GROUP_VALUES[0] as number;
  const y = GROUP_VALUES[1] as number;
  const z = GROUP_VALUES[2] as number;
  if (a === 4 && b <= 2 && c <= 2) return validDate(x, y, z);
  if (c === 4 && a <= 2 && b <= 2) return validDate(z, y, x) || validDate(z, x, y);
  return false;
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
  const refine = (main: string, env: RecognizerEnv) => validated(`${env.defaultRegion} ${main}`);
  return {
    name: 'phone',
    types: ['PHONE_NUMBER'],
    requires: HAS_DIGIT,
    find(text: string, _env: RecognizerEnv, out: Candidate[], scans?: TextScans) {
      forEachMatchAt(PHONE_RUN, text, runStarts(text, scans), (m) => {
        // Most runs are short numbers (years, counts, ids): fewer than 7 characters cannot hold 7 digits.
        const end = m.index + m[0].length;
        if (m[0].length < 7 || isNumberCharAt(text, m.index - 1) || isNumberCharAt(text, end)) {
          return;
        }
        const ext = m[1] ?? '';
        const main = m[0].slice(0, m[0].length - ext.length);
        const groups = groupsIfPlausible(main);
        if (groups === -1) return;
        // Parsing costs ~30 µs: the analyzer asks for it only when validity decides whether
        // the number is reported (e.g. not when a phone word is next to it).
        const plus = main.charCodeAt(0) === 43;
        const separated = groups > 1;
        if (isGlued(text, m.index, end)) {
          // Not validated: a valid number glued to a word is no more likely a phone.
          out.push({
            type: 'PHONE_NUMBER',
            start: m.index,
            end,
            score: GLUED_SCORE,
            recognizer: 'phone',
            context: CONTEXT,
          });
          return;
        }
        out.push({
          type: 'PHONE_NUMBER',
          start: m.index,
          end,
          score: plus ? 0.75 : separated ? 0.6 : 0.35,
          floor: plus || separated ? 0.3 : 0.2,
          refine,
          value: main,
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
