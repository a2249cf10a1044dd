/**
 * EMAIL_ADDRESS: a dot-atom local part (Latin letters, digits and the usual symbols), `@`, one
 * or more domain labels (letters of any script, digits, inner hyphens) and an ASCII or `xn--`
 * top-level domain. Validated for RFC 5321 lengths (local ≤ 64, label ≤ 63, total ≤ 254) and
 * dot placement. The `user@host` of a `scheme://user@host` URL is not an address.
 *
 * The scan is anchored on `@` (a regex that starts at every letter is ten times slower); the
 * local part is read backwards from it. The local part is restricted to Latin script so that
 * a value touching CJK text ("邮箱john@example.com") starts where the address does.
 */
import {
  type Candidate,
  contextRule,
  forEachMatchAt,
  indexesOf,
  type Recognizer,
} from './recognizer.ts';

const LABEL = String.raw`[\p{L}\p{M}\p{N}](?:[\p{L}\p{M}\p{N}\-]{0,61}[\p{L}\p{M}\p{N}])?`;
const DOMAIN = new RegExp(
  String.raw`@(?:${LABEL}\.)+(?:[A-Za-z]{2,63}|xn--[a-z0-9\-]{1,59})(?![A-Za-z0-9_\-]|\.[\p{L}\p{N}])`,
  'uy',
);
const LOCAL_CHAR = /[\p{sc=Latin}\p{M}0-9!#$%&*+^_~.-]/u;

const CONTEXT = contextRule({ words: ['email', 'mail', 'e', 'contact', 'address', 'mailto'] });

// LOCAL_CHAR over ASCII: letters, digits and !#$%&*+^_~.-
const ASCII_LOCAL = new Uint8Array(128);
for (const c of 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&*+^_~.-') {
  ASCII_LOCAL[c.charCodeAt(0)] = 1;
}

function isLocalChar(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  return c < 128 ? ASCII_LOCAL[c] === 1 : LOCAL_CHAR.test(text[i] ?? '');
}

/** Start of the local part ending at `at`, or -1 when there is none. */
function localStart(text: string, at: number): number {
  let start = at;
  while (start > 0 && at - start <= 64 && isLocalChar(text, start - 1)) start--;
  if (start === at || at - start > 64) return -1;
  const local = text.slice(start, at);
  if (local.startsWith('.') || local.endsWith('.') || local.includes('..')) return -1;
  return start;
}

/** Whether a part of `domain` between dots is longer than 64 characters. */
function longLabel(domain: string): boolean {
  let from = 0;
  for (let dot = domain.indexOf('.'); dot !== -1; dot = domain.indexOf('.', from)) {
    if (dot - from > 64) return true;
    from = dot + 1;
  }
  return domain.length - from > 64;
}

/** Recognizer for EMAIL_ADDRESS (base score 0.9). */
export const emailRecognizer: Recognizer = {
  name: 'email',
  types: ['EMAIL_ADDRESS'],
  requires: '@',
  find(text, _env, out: Candidate[]) {
    forEachMatchAt(DOMAIN, text, indexesOf(text, ['@']), (m) => {
      const start = localStart(text, m.index);
      if (start === -1) return;
      const end = m.index + m[0].length;
      if (end - start > 254 || longLabel(m[0])) return;
      // `scheme://user@host` is a URL's user name, not an address.
      if (text.startsWith('://', start - 3)) return;
      out.push({
        type: 'EMAIL_ADDRESS',
        start,
        end,
        score: 0.9,
        recognizer: 'email',
        context: CONTEXT,
      });
    });
  },
};
