/**
 * SECRET: the value of a credential assignment, `password=hunter2`, `api_key: "…"`,
 * `"client_secret": "…"`, `DB_PASSWORD='…'`, `secret => …`. Only the value is reported (the
 * key name stays readable). Unquoted values must be ≥ 4 characters and contain a non-letter or
 * be ≥ 8 letters, so prose ("password: required", "token: expired") is left alone;
 * placeholders (`***`, `${VAR}`, `<…>`, `[…]`, `null`, `redacted`, our own tokens) are skipped.
 * Score 0.8.
 *
 * {@link secretKeyValue} applies the same idea to JSON: a string under a property named like a
 * credential (`password`, `apiKey`, `client_secret`, `Authorization`, `cookie`, …) is a SECRET
 * as a whole, scored 0.99 so that a detection inside it (an e-mail in a password) cannot leave
 * the rest of the value in place.
 */

import { codeAt } from './chars.ts';
import {
  type Candidate,
  forEachMatchAt,
  type Recognizer,
  rememberName,
  sharedIndexesOf,
  type TextScans,
} from './recognizer.ts';

// A trie, so that each position is tried against one branch per first letter.
const KEYWORD = String.raw`pass(?:word|wd|phrase)?|pwd|secret(?:[_\-]?key)?|api[_\-]?(?:key|secret)|access[_\-]?(?:key|token)|(?:auth|refresh|id|bearer)[_\-]?token|client[_\-]?secret|private[_\-]?key|token|credentials?`;

// Tried only where a keyword can start (see keywordStarts); the key's prefix (`DB_`,
// `client.`) is read backwards from it.
const ASSIGNMENT = new RegExp(
  String.raw`(?<keyword>${KEYWORD})(?![A-Za-z0-9])["']?[ \t]*(?::=|=>|=|:)[ \t]*(?:"(?<dq>[^"\r\n]{1,512})"|'(?<sq>[^'\r\n]{1,512})'|(?<bare>[^\s"'\x60,;&<>(){}\[\]]{1,512}))`,
  'iy',
);
// An operator with a keyword (an optional quote and blanks between) right before it, tried
// at each `:` and `=` (shared with other recognizers) whose keyword ending passes
// keywordEnding: far cheaper than trying the keyword trie at every letter of the text.
/** Exported for tests: tried at each `:` and `=` passing keywordEnding. */
export const OPERATOR = new RegExp(
  String.raw`[:=](?<=(?:${KEYWORD})(?![A-Za-z0-9])["']?[ \t]*[:=])`,
  'iy',
);
// The last two letters of every keyword, by (first - 97) * 26 + (second - 97).
const KEYWORD_ENDINGS = new Uint8Array(26 * 26);
for (const ending of ['ss', 'rd', 'wd', 'se', 'et', 'ey', 'en', 'al', 'ls']) {
  KEYWORD_ENDINGS[(ending.charCodeAt(0) - 97) * 26 + ending.charCodeAt(1) - 97] = 1;
}

/**
 * Whether the operator at `at` follows (blanks and an optional quote between) two characters
 * that end a keyword, in any case: a necessary condition for OPERATOR to match there.
 */
export function keywordEnding(text: string, at: number): boolean {
  let end = at;
  while (end > 0 && (text.charCodeAt(end - 1) === 32 || text.charCodeAt(end - 1) === 9)) end--;
  const q = codeAt(text, end - 1);
  if (q === 34 || q === 39) end--;
  if (end < 2) return false;
  const a = text.charCodeAt(end - 2) | 32;
  const b = text.charCodeAt(end - 1) | 32;
  if (a < 97 || a > 122 || b < 97 || b > 122) return false;
  return KEYWORD_ENDINGS[(a - 97) * 26 + b - 97] === 1;
}

// The shortest and longest keywords: `pwd`, `client_secret`.
const KEYWORD_MIN = 3;
const KEYWORD_MAX = 13;

/** Every position (ascending) where a keyword followed by an operator may start. */
function keywordStarts(text: string, scans: TextScans | undefined): number[] {
  const starts: number[] = [];
  let next = 0;
  // The `:` and `=` of the text, in order.
  const colons = sharedIndexesOf(text, ':', scans);
  const equals = sharedIndexesOf(text, '=', scans);
  for (let i = 0, j = 0; i < colons.length || j < equals.length; ) {
    const at =
      j >= equals.length || (i < colons.length && (colons[i] as number) < (equals[j] as number))
        ? (colons[i++] as number)
        : (equals[j++] as number);
    if (!keywordEnding(text, at)) continue;
    OPERATOR.lastIndex = at;
    if (!OPERATOR.test(text)) continue;
    // Back over the blanks and the optional quote to the end of the keyword.
    let end = at;
    while (end > 0 && (text[end - 1] === ' ' || text[end - 1] === '\t')) end--;
    if (text[end - 1] === '"' || text[end - 1] === "'") end--;
    for (let s = Math.max(next, end - KEYWORD_MAX); s <= end - KEYWORD_MIN; s++) starts.push(s);
    next = Math.max(next, end - KEYWORD_MIN + 1);
  }
  return starts;
}

const PREFIX_CHAR = /[A-Za-z0-9_.-]/;
const BEFORE_KEY = /[\p{L}\p{N}_.-]/u;

const PLACEHOLDER_WORDS = new Set([
  'required',
  'optional',
  'invalid',
  'incorrect',
  'expired',
  'missing',
  'forgotten',
  'protected',
  'enabled',
  'disabled',
  'hidden',
  'redacted',
  'removed',
  'unknown',
  'empty',
  'string',
  'number',
  'boolean',
  'null',
  'nil',
  'none',
  'undefined',
  'true',
  'false',
  'example',
  'placeholder',
  'changeit',
]);

/** Whether a value is a placeholder or one of our own replacements, not a secret. */
function placeholder(value: string): boolean {
  const v = value.trim();
  if (v.length === 0) return true;
  if (/^[*x•.#-]+$/i.test(v)) return true;
  if (/^(?:\$\{.*\}|\$[A-Z_][A-Z0-9_]*|%[A-Z_]+%|\{\{.*\}\}|<.*>|\[.*\])$/.test(v)) return true;
  return PLACEHOLDER_WORDS.has(v.toLowerCase());
}

function keyAccepted(prefix: string, keyword: string, keywordText: string): boolean {
  // A camelCase prefix ("dbPassword") is accepted; a plain word ending in the keyword
  // ("bypass", "compass") is not.
  if (prefix !== '' && !/[_.-]$/.test(prefix)) {
    const first = keywordText[0] ?? '';
    if (first === first.toLowerCase()) return false;
  }
  return !/(?:page|next|continuation|sync|cursor)[_.-]?$/i.test(prefix) || keyword !== 'token';
}

/** Recognizer for SECRET assignments in text. */
export const assignmentRecognizer: Recognizer = {
  name: 'assignment',
  types: ['SECRET'],
  find(text, _env, out: Candidate[], scans) {
    forEachMatchAt(ASSIGNMENT, text, keywordStarts(text, scans), (m) => {
      const g = m.groups ?? {};
      let from = m.index;
      while (from > 0 && m.index - from <= 40 && PREFIX_CHAR.test(text[from - 1] ?? '')) from--;
      if (m.index - from > 40 || BEFORE_KEY.test(text[from - 1] ?? '')) return;
      const keywordText = g.keyword ?? '';
      if (BEFORE_KEY.test(text[m.index + keywordText.length] ?? '')) return;
      const prefix = text.slice(from, m.index);
      if (!keyAccepted(prefix, keywordText.toLowerCase(), keywordText)) return;
      const value = g.dq ?? g.sq ?? g.bare ?? '';
      if (placeholder(value)) return;
      if (g.bare !== undefined) {
        if (value.length < 4) return;
        if (/^\p{L}+$/u.test(value) && value.length < 8) return;
      } else if (value.trim().length < 3) {
        return;
      }
      const quoted = g.bare === undefined ? 1 : 0;
      const end = m.index + m[0].length - quoted;
      out.push({
        type: 'SECRET',
        start: end - value.length,
        end,
        score: 0.8,
        recognizer: 'assignment',
      });
    });
  },
};

const SECRET_KEY_SUFFIXES = [
  'password',
  'passwd',
  'passphrase',
  'pwd',
  'secret',
  'apikey',
  'apisecret',
  'accesskey',
  'secretkey',
  'privatekey',
  'clientsecret',
  'token',
  'credential',
  'credentials',
  'authorization',
  'cookie',
];
const NOT_SECRET_KEYS = /(?:page|next|continuation|sync|cursor)token$/;
const secretKeyCache = new Map<string, boolean>();

/**
 * Whether a JSON property name names a credential: after lower-casing and dropping `_ . -`
 * and spaces it ends with password, secret, apikey, token, authorization, cookie, … (or the
 * original ends with `pass` as a word: `db_pass`). Pagination tokens (`next_page_token`) are not
 * credentials.
 */
export function isSecretKeyName(key: string): boolean {
  let secret = secretKeyCache.get(key);
  if (secret === undefined) {
    const norm = key.toLowerCase().replace(/[_.\-\s]/g, '');
    secret =
      /(?:^|[_.\-\s])pass$/i.test(key) ||
      (!NOT_SECRET_KEYS.test(norm) && SECRET_KEY_SUFFIXES.some((s) => norm.endsWith(s)));
    rememberName(secretKeyCache, key, secret);
  }
  return secret;
}

/**
 * The SECRET candidate for a whole string found under a credential-named JSON property, or
 * `undefined` (placeholder, empty, or longer than 4096 characters).
 */
export function secretKeyValue(key: string, text: string): Candidate | undefined {
  if (text.length > 4096 || !isSecretKeyName(key) || placeholder(text)) return undefined;
  const start = text.length - text.trimStart().length;
  const end = text.trimEnd().length;
  return { type: 'SECRET', start, end, score: 0.99, recognizer: 'key-name' };
}
