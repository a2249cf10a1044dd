/**
 * URL_CREDENTIALS: the `user:password` userinfo of a URL (`https://alice:s3cret@host/…`,
 * `postgres://:pw@db:5432`). The span is the userinfo only, so the scheme and host survive
 * (`https://[URL_CREDENTIALS]@host/…`). The userinfo ends at the authority's last `@`, as URL
 * parsers read it; a URL with a user name and no password is not reported. Score 0.95.
 * The scan is anchored on `://`; the scheme is read backwards from it.
 */
import {
  type Candidate,
  forEachMatchAt,
  isWordCharAt,
  type Recognizer,
  sharedIndexesOf,
  type TextScans,
} from './recognizer.ts';

const AUTHORITY = /:\/\/([^\s/?#"'<>\\]+)/y;
const SCHEME_CHAR = /[A-Za-z0-9+.-]/;

/** Every `://`, from the colons shared with other recognizers. */
function schemeSeparators(text: string, scans: TextScans | undefined): number[] {
  const out: number[] = [];
  for (const i of sharedIndexesOf(text, ':', scans)) if (text.startsWith('//', i + 1)) out.push(i);
  return out;
}

/** Recognizer for URL_CREDENTIALS. */
export const urlCredentialsRecognizer: Recognizer = {
  name: 'url-credentials',
  types: ['URL_CREDENTIALS'],
  requires: '@',
  find(text, _env, out: Candidate[], scans) {
    forEachMatchAt(AUTHORITY, text, schemeSeparators(text, scans), (m) => {
      let scheme = m.index;
      while (scheme > 0 && m.index - scheme < 32 && SCHEME_CHAR.test(text[scheme - 1] ?? ''))
        scheme--;
      if (
        scheme === m.index ||
        !/[A-Za-z]/.test(text[scheme] ?? '') ||
        isWordCharAt(text, scheme - 1)
      ) {
        return;
      }
      const authority = m[1] ?? '';
      const at = authority.lastIndexOf('@');
      if (at <= 0 || at === authority.length - 1) return;
      const userinfo = authority.slice(0, at);
      const colon = userinfo.indexOf(':');
      if (colon === -1 || colon === userinfo.length - 1) return;
      const start = m.index + 3;
      out.push({
        type: 'URL_CREDENTIALS',
        start,
        end: start + at,
        score: 0.95,
        recognizer: 'url-credentials',
      });
    });
  },
};
