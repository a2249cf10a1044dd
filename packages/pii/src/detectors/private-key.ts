/**
 * PRIVATE_KEY: a PEM or PGP armoured private key, from `-----BEGIN … PRIVATE KEY-----` (RSA,
 * EC, DSA, OPENSSH, ENCRYPTED, PGP … BLOCK) to the matching `-----END …-----`. A block cut off
 * before its END line (a truncated paste) is reported up to the end of its base64 body.
 * Blocks are bounded to 64 KiB. Score 1.
 */
import { type Candidate, forEachMatch, type Recognizer } from './recognizer.ts';

const BEGIN = /-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----/g;
const BODY = /[A-Za-z0-9+/=\s\\:,-]*/y;
const MAX_BLOCK = 64 * 1024;

/** Recognizer for PRIVATE_KEY. */
export const privateKeyRecognizer: Recognizer = {
  name: 'private-key',
  types: ['PRIVATE_KEY'],
  requires: 'PRIVATE KEY',
  find(text, _env, out: Candidate[]) {
    forEachMatch(BEGIN, text, (m) => {
      const bodyStart = m.index + m[0].length;
      const endLine = `-----END ${m[1]}-----`;
      const found = text.indexOf(endLine, bodyStart);
      // A NUL separates strings analyzed together: an END beyond it belongs to another string.
      const nul = text.indexOf('\u0000', bodyStart);
      let end: number;
      if (found !== -1 && found - m.index <= MAX_BLOCK && (nul === -1 || found < nul)) {
        end = found + endLine.length;
      } else {
        BODY.lastIndex = bodyStart;
        const body = BODY.exec(text)?.[0] ?? '';
        end = bodyStart + Math.min(body.trimEnd().length, MAX_BLOCK);
      }
      out.push({ type: 'PRIVATE_KEY', start: m.index, end, score: 1, recognizer: 'private-key' });
      BEGIN.lastIndex = end;
    });
  },
};
