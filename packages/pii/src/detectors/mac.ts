/**
 * MAC_ADDRESS: six hex octets joined by one kind of separator (`:` or `-`), 0.6; or Cisco's
 * dotted `xxxx.xxxx.xxxx`, 0.4 (needs a MAC word nearby). All-zero and broadcast addresses
 * (one repeated octet) identify no device and are skipped.
 */

import { codeAt } from './chars.ts';
import {
  type Candidate,
  contextRule,
  forEachMatchAt,
  HAS_DIGIT,
  isWordCharAt,
  type Recognizer,
  sharedIndexesOf,
  type TextScans,
} from './recognizer.ts';

// Anchored on the separator (a regex starting at every hex letter of prose is slow); the first
// octet and the left boundary are checked in code. Tried only at the `:`, `-` and `.` (shared
// with other recognizers) that are followed by what the pattern needs next (macStarts).
/** Exported for tests (sticky). */
export const MAC =
  /([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}(?![:.-]?[0-9A-Za-z_])|\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}(?![.-]?[0-9A-Za-z_])/y;

function isHexCode(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

/**
 * The separators where MAC may match (ascending): a `:` or `-` followed by two hex digits and
 * the same separator, a `.` followed by four hex digits and a `.`.
 */
export function macStarts(text: string, scans: TextScans | undefined): number[] {
  const starts: number[] = [];
  const separated = (i: number, code: number) =>
    codeAt(text, i + 3) === code &&
    isHexCode(codeAt(text, i + 1)) &&
    isHexCode(codeAt(text, i + 2));
  // The colons are shared with other recognizers; dashes and dots are looked up here.
  for (const i of sharedIndexesOf(text, ':', scans)) if (separated(i, 58)) starts.push(i);
  for (let i = text.indexOf('-'); i !== -1; i = text.indexOf('-', i + 1)) {
    if (separated(i, 45)) starts.push(i);
  }
  for (let i = text.indexOf('.'); i !== -1; i = text.indexOf('.', i + 1)) {
    if (
      codeAt(text, i + 5) === 46 &&
      isHexCode(codeAt(text, i + 1)) &&
      isHexCode(codeAt(text, i + 2)) &&
      isHexCode(codeAt(text, i + 3)) &&
      isHexCode(codeAt(text, i + 4))
    ) {
      starts.push(i);
    }
  }
  return starts.sort((a, b) => a - b);
}

const HEX = /^[0-9A-Fa-f]+$/;

const CONTEXT = contextRule({
  words: [
    'mac',
    'hwaddr',
    'hardware',
    'ethernet',
    'ether',
    'wifi',
    'wlan',
    'bssid',
    'nic',
    'device',
    'interface',
    'address',
  ],
});

/** Push the address whose first `lead` hex digits precede the match, if it is one. */
function emit(
  text: string,
  m: RegExpExecArray,
  lead: number,
  score: number,
  out: Candidate[],
): void {
  const start = m.index - lead;
  const first = text.slice(start, m.index);
  if (start < 0 || !HEX.test(first) || isWordCharAt(text, start - 1)) return;
  if (/[:.-]/.test(text[start - 1] ?? '')) return;
  const hex = (first + m[0]).replace(/[^0-9A-Fa-f]/g, '').toLowerCase();
  if (/^(..)\1{5}$/.test(hex)) return;
  out.push({
    type: 'MAC_ADDRESS',
    start,
    end: m.index + m[0].length,
    score,
    recognizer: 'mac',
    context: CONTEXT,
  });
}

/** Recognizer for MAC_ADDRESS. */
export const macRecognizer: Recognizer = {
  name: 'mac',
  types: ['MAC_ADDRESS'],
  requires: HAS_DIGIT,
  find(text, _env, out: Candidate[], scans) {
    forEachMatchAt(MAC, text, macStarts(text, scans), (m) => {
      if (m[1] !== undefined) emit(text, m, 2, 0.6, out);
      else emit(text, m, 4, 0.4, out);
    });
  },
};
