/**
 * JWT: three base64url parts joined by dots whose header decodes to a JSON object with a
 * string `alg`; the payload must decode too, and the signature may be empty only for
 * `alg: none`. Score 0.95.
 */
import {
  type Candidate,
  forEachMatchAt,
  indexesOf,
  memoize,
  type Recognizer,
} from './recognizer.ts';

// Tried where `eyJ` (`{"` in base64) occurs.
const JWT =
  /(?<![A-Za-z0-9_.-])eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*(?![A-Za-z0-9_-]|\.[A-Za-z0-9_-])/y;

function decodeJson(part: string): unknown {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Whether `token` is a structurally valid JWS compact serialisation (signature not verified). */
export function isJwt(token: string): boolean {
  const [header = '', payload = '', signature = ''] = token.split('.');
  const h = decodeJson(header);
  if (typeof h !== 'object' || h === null || Array.isArray(h)) return false;
  const alg = (h as { alg?: unknown }).alg;
  if (typeof alg !== 'string') return false;
  if (signature === '' && alg.toLowerCase() !== 'none') return false;
  return Buffer.from(payload, 'base64url').length > 0;
}

// Decoding costs; the same token recurs in every request of a session.
const cachedIsJwt = memoize(isJwt);

/** Recognizer for JWT. */
export const jwtRecognizer: Recognizer = {
  name: 'jwt',
  types: ['JWT'],
  find(text, _env, out: Candidate[]) {
    forEachMatchAt(JWT, text, indexesOf(text, ['yJ'], 1), (m) => {
      if (!cachedIsJwt(m[0])) return;
      out.push({
        type: 'JWT',
        start: m.index,
        end: m.index + m[0].length,
        score: 0.95,
        recognizer: 'jwt',
      });
    });
  },
};
