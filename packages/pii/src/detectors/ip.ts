/**
 * IP_ADDRESS. IPv4: four decimal octets 0–255 without leading zeros (0.6). IPv6: full,
 * `::`-compressed, IPv4-embedded (`::ffff:192.0.2.1`) and zoned (`fe80::1%eth0`) forms, checked
 * group by group (1–4 hex digits, eight groups, at most one `::`). Scores: eight written groups
 * or three or more around `::` 0.6/0.55; an embedded IPv4 0.65 (so the whole address wins over
 * the IPv4 inside it); shorter compressed forms (`::1`, `fe80::1`) 0.35;
 * forms without a single digit (`dead::beef`) 0.2 — those need an IP word nearby. Version words
 * (`version 1.2.3.4`) subtract 0.35.
 */

import { codeAt } from './chars.ts';
import { groupsInRuns } from './digits.ts';
import {
  ASCII_NOT_AFTER_WORD,
  ASCII_NOT_BEFORE_WORD,
  type Candidate,
  contextRule,
  digitRunsOf,
  forEachMatchAt,
  HAS_DIGIT,
  isBounded,
  isWordCharAt,
  type Recognizer,
  sharedIndexesOf,
  type TextScans,
} from './recognizer.ts';

const OCTET = String.raw`(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`;
/** Exported for tests (sticky). */
export const IPV4 = new RegExp(
  `${ASCII_NOT_AFTER_WORD}(?<![.\\-])(?:${OCTET}\\.){3}${OCTET}${ASCII_NOT_BEFORE_WORD}(?![.\\-]\\d)`,
  'y',
);
const IPV4_EXACT = new RegExp(`^(?:${OCTET}\\.){3}${OCTET}$`);
const HEX_GROUP = /^[0-9A-Fa-f]{1,4}$/;

function isHex(code: number): boolean {
  return (code >= 48 && code <= 57) || (code >= 65 && code <= 70) || (code >= 97 && code <= 102);
}

const ZONE_CHAR = /[0-9A-Za-z_~-]/;

/**
 * IPv6 candidates: maximal runs of hex digits, colons and dots around each `:` (anchoring on
 * the colon is much cheaper than a regex starting at every hex letter of prose), with an
 * optional `%zone`, not touching a word on either side.
 */
function ipv6Runs(
  text: string,
  scans: TextScans | undefined,
  emit: (start: number, end: number, colons: number) => void,
): void {
  let covered = 0;
  for (const i of sharedIndexesOf(text, ':', scans)) {
    if (i < covered) continue;
    let s = i;
    while (s > 0 && i - s < 40 && (isHex(text.charCodeAt(s - 1)) || text.charCodeAt(s - 1) === 58))
      s--;
    let e = i + 1;
    while (e < text.length && e - s < 60) {
      const c = text.charCodeAt(e);
      if (!isHex(c) && c !== 58 && c !== 46) break;
      e++;
    }
    while (e > s && text.charCodeAt(e - 1) === 46) e--;
    if (codeAt(text, e) === 37) {
      let z = e + 1;
      while (z < text.length && z - e <= 32 && ZONE_CHAR.test(text[z] ?? '')) z++;
      if (z > e + 1) e = z;
    }
    covered = e;
    let colons = 0;
    for (let k = s; k < e; k++) if (text.charCodeAt(k) === 58) colons++;
    if (
      colons < 2 ||
      isWordCharAt(text, s - 1) ||
      isWordCharAt(text, e) ||
      codeAt(text, s - 1) === 46
    )
      continue;
    emit(s, e, colons);
  }
}

/**
 * The groups an IPv6 address writes (an embedded IPv4 counts as two) and whether it uses `::`,
 * or `null` when it is not a valid IPv6 address.
 */
export function ipv6Groups(value: string): { groups: number; compressed: boolean } | null {
  const address = value.split('%')[0] ?? '';
  const halves = address.split('::');
  if (halves.length > 2) return null;
  const split = (half: string | undefined): string[] =>
    half === undefined || half === '' ? [] : half.split(':');
  const all = [...split(halves[0]), ...split(halves[1])];
  let groups = 0;
  for (let i = 0; i < all.length; i++) {
    const g = all[i] ?? '';
    if (HEX_GROUP.test(g)) groups++;
    else if (i === all.length - 1 && IPV4_EXACT.test(g)) groups += 2;
    else return null;
  }
  const compressed = halves.length === 2;
  if (compressed ? groups > 7 : groups !== 8) return null;
  return { groups, compressed };
}

const CONTEXT = contextRule({
  words: [
    'ip',
    'ipv4',
    'ipv6',
    'address',
    'addr',
    'host',
    'server',
    'client',
    'connect',
    'connected',
    'connection',
    'src',
    'dst',
    'source',
    'destination',
    'gateway',
    'dns',
    'proxy',
    'remote',
  ],
  negative: ['version', 'ver', 'v', 'release', 'build', 'firmware', 'oid'],
});

/** Recognizer for IP_ADDRESS (IPv4 and IPv6). */
export const ipRecognizer: Recognizer = {
  name: 'ip',
  types: ['IP_ADDRESS'],
  requires: HAS_DIGIT,
  find(text, _env, out: Candidate[], scans) {
    // Tried at the digit groups of runs with 4 digits and 3 dots or more.
    forEachMatchAt(IPV4, text, groupsInRuns(digitRunsOf(text, scans), 4, 3), (m) => {
      if (!isBounded(text, m.index, m.index + m[0].length)) return;
      out.push({
        type: 'IP_ADDRESS',
        start: m.index,
        end: m.index + m[0].length,
        score: 0.6,
        recognizer: 'ip',
        context: CONTEXT,
      });
    });
    ipv6Runs(text, scans, (start, end, colons) => {
      // Without `::`, eight groups take seven colons (six before an embedded IPv4): times
      // (`10:30:00`) and the like are dropped before parsing.
      if (colons !== 6 && colons !== 7) {
        const double = text.indexOf('::', start);
        if (double === -1 || double + 2 > end) return;
      }
      const value = text.slice(start, end);
      const shape = ipv6Groups(value);
      if (shape === null) return;
      let score = !shape.compressed ? 0.6 : shape.groups >= 3 ? 0.55 : 0.35;
      if (value.includes('.'))
        score = 0.65; // an embedded IPv4 outranks the IPv4 inside it
      else if (!/\d/.test(value)) score = 0.2;
      out.push({ type: 'IP_ADDRESS', start, end, score, recognizer: 'ip', context: CONTEXT });
    });
  },
};
