/**
 * PERSON, only in strong context, so that capitalised words in prose are left alone:
 * - after a title: `Mr`, `Mrs`, `Ms`, `Mx`, `Dr`, `Prof`, `Professor` (dot optional) followed by
 *   one to three capitalised names or initials ("Dr. Jane Q. Doe" → "Jane Q. Doe");
 * - after a label: `Name:`, `Full name:`, `Patient:`, `Customer:`, `Employee:` followed by two to
 *   four capitalised names or initials;
 * - after "my name is" (one to four names).
 * Only the name is reported, not the title or label. A name is a capital letter (any script)
 * followed by letters, apostrophes or hyphens and ending in a lower-case letter; a trailing
 * possessive `'s` is dropped. Sentence words (The, This, And, …) never start a name, and a
 * "Dr" that follows a house number and street words ("12 Oak Dr Smith…") is a street. 0.85.
 */

import { codeAt } from './chars.ts';
import {
  type Candidate,
  forEachMatchAt,
  indexesOf,
  type Recognizer,
  sharedIndexesOf,
  type TextScans,
} from './recognizer.ts';

const NAME = String.raw`\p{Lu}[\p{L}\p{M}'’\-]*[\p{Ll}\p{M}]`;
const INITIAL = String.raw`\p{Lu}\.`;
const words = (min: number, max: number) =>
  String.raw`(?<name>${NAME}(?:[ \t]+(?:${NAME}|${INITIAL})){${min},${max}})(?![\p{L}\p{M}\p{N}])`;

const TITLED = new RegExp(
  String.raw`(?<![A-Za-z0-9])(?<title>Mrs|Mr|Ms|Mx|Dr|Professor|Prof)\.?[ \t]+${words(0, 2)}`,
  'uy',
);
// Anchored on the colon, the label checked behind it.
const LABELLED = new RegExp(
  String.raw`:(?<=(?<![A-Za-z0-9])(?:[Ff]ull[ \t]+[Nn]ame|[Nn]ame|[Pp]atient|[Cc]ustomer|[Ee]mployee)[ \t]*:)[ \t]*${words(1, 3)}`,
  'uy',
);
const MY_NAME = new RegExp(
  String.raw`(?<![A-Za-z0-9])[Mm]y[ \t]+name[ \t]+is[ \t]+${words(0, 3)}`,
  'uy',
);

function isBlank(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  return c === 32 || c === 9;
}

const LABEL_ENDINGS = ['ame', 'atient', 'ustomer', 'mployee'];

/** Every colon with a label's ending (`…ame`, `…atient`, …) and blanks before it. */
function labelColons(text: string, scans: TextScans | undefined): number[] {
  const out: number[] = [];
  for (const i of sharedIndexesOf(text, ':', scans)) {
    let end = i;
    while (end > 0 && isBlank(text, end - 1)) end--;
    // Every ending ends in `e`, `r` or `t`.
    const last = codeAt(text, end - 1);
    if (last !== 101 && last !== 114 && last !== 116) continue;
    for (const ending of LABEL_ENDINGS) {
      if (text.endsWith(ending, end)) {
        out.push(i);
        break;
      }
    }
  }
  return out;
}

/**
 * Every `my`/`My` followed by a blank: where "my name is" may start (found from `y` and a
 * blank, far rarer than the `n` of `name` that a search for `name` stops at).
 */
function myNameStarts(text: string): number[] {
  const out: number[] = [];
  for (const yBlank of ['y ', 'y\t']) {
    for (let i = text.indexOf(yBlank); i !== -1; i = text.indexOf(yBlank, i + 1)) {
      const m = codeAt(text, i - 1);
      if (m === 109 || m === 77) out.push(i - 1);
    }
  }
  return out.length > 1 ? out.sort((a, b) => a - b) : out;
}

// Each pattern is tried only where it can start (a Unicode regex run over all of the text is
// slow, and `name` alone is everywhere in code): at a title, a label's colon, "my name is".
const PATTERNS: ReadonlyArray<
  [starts: (text: string, scans: TextScans | undefined) => number[], pattern: RegExp]
> = [
  [(text) => indexesOf(text, ['Mr', 'Ms', 'Mx', 'Dr', 'Prof']), TITLED],
  [labelColons, LABELLED],
  [myNameStarts, MY_NAME],
];

const STOP_WORDS = new Set(
  'The A An This That These Those It He She They We You I My Your Our Their His Her Its And Or But If In On At To For Of With From By As Is Are Was Were Be Dear Hello Hi Please Thanks Thank Street Road Avenue Drive Lane'.split(
    ' ',
  ),
);
// The regexes check an ASCII left boundary (a Unicode one at every position is slow); this
// completes it.
const LETTER_BEFORE = /[\p{L}\p{N}]/u;
const STREET_BEFORE = /\d+[ \t]+(?:\p{Lu}[\p{L}.]*[ \t]+){0,3}$/u;

/** Recognizer for PERSON. */
export const personRecognizer: Recognizer = {
  name: 'person',
  types: ['PERSON'],
  find(text, _env, out: Candidate[], scans) {
    for (const [starts, re] of PATTERNS) {
      forEachMatchAt(re, text, starts(text, scans), (m) => {
        // (A colon-anchored match checked its label's boundary in its lookbehind.)
        if (m[0][0] !== ':' && LETTER_BEFORE.test(text[m.index - 1] ?? '')) return;
        let name = m.groups?.name ?? '';
        const first = name.split(/[ \t]/)[0] ?? '';
        if (STOP_WORDS.has(first)) return;
        if (
          m.groups?.title === 'Dr' &&
          STREET_BEFORE.test(text.slice(Math.max(0, m.index - 60), m.index))
        ) {
          return;
        }
        const end = m.index + m[0].length;
        const start = end - name.length;
        name = name.replace(/['’]s$/, '');
        out.push({
          type: 'PERSON',
          start,
          end: start + name.length,
          score: 0.85,
          recognizer: 'person',
        });
      });
    }
  },
};
