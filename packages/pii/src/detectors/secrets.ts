/**
 * Provider credentials recognised by their documented formats. Their scores sit above
 * URL_CREDENTIALS (0.95) so a token used as a URL password is reported as the token.
 *
 * | type | format | score |
 * |---|---|---|
 * | AWS_ACCESS_KEY_ID | `AKIA`/`ASIA` + 16 upper-case letters or digits | 0.96 |
 * | AWS_SECRET_ACCESS_KEY | 40 base64 characters mixing upper, lower and digits, only with an AWS/secret word nearby | 0.2 → 0.9 |
 * | GITHUB_TOKEN | `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + ≥ 36 alphanumerics; `github_pat_` + ≥ 22 | 0.98 |
 * | GITLAB_TOKEN | `glpat-` + ≥ 20 of `[A-Za-z0-9_-]` (optionally `.`-suffixed) | 0.98 |
 * | SLACK_TOKEN | `xoxa-`/`xoxb-`/`xoxp-`/`xoxr-`/`xoxs-` + dash-separated alphanumerics (≥ 15 characters) | 0.97 |
 * | STRIPE_KEY | `sk_live_`/`sk_test_`/`rk_live_`/`rk_test_` + ≥ 16 alphanumerics | 0.97 |
 * | GOOGLE_API_KEY | `AIza` + 35 of `[A-Za-z0-9_-]` | 0.97 |
 */
import type { EntityType } from '../entities.ts';
import {
  type Candidate,
  contextRule,
  forEachMatch,
  forEachMatchAt,
  HAS_DIGIT,
  indexesOf,
  type Recognizer,
} from './recognizer.ts';

// One pattern for every format, tried only where a prefix occurs (found with indexOf, far
// cheaper than a regex trying every position); the left boundary is checked in code.
const TOKENS =
  /(?:A(?:KIA|SIA)[A-Z0-9]{16}|AIza[A-Za-z0-9_-]{35}|g(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{22,255}|lpat-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+){0,2})|xox[abprs]-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+)(?![A-Za-z0-9_-])/y;

/** Where a token may start: its prefix, searched by a distinctive part of it. */
function tokenStarts(text: string): number[] {
  const starts = [
    ...indexesOf(text, ['AKIA', 'ASIA', 'AIza', 'gh', 'xox']),
    ...indexesOf(text, ['lpat-'], 1),
    ...indexesOf(text, ['_pat_'], 'github'.length),
  ];
  return starts.sort((a, b) => a - b);
}
// Stripe keys are anchored on `k_live_`/`k_test_`; the `s`/`r` before is checked in code.
const STRIPE = /k_(?:live|test)_[A-Za-z0-9]{16,247}(?![A-Za-z0-9_-])/y;

const TOKEN_BEFORE = /[A-Za-z0-9_-]/;

/** The type and score of a token by its prefix. */
function formatOf(token: string): [EntityType, number] | undefined {
  if (token.startsWith('AKIA') || token.startsWith('ASIA')) return ['AWS_ACCESS_KEY_ID', 0.96];
  if (token.startsWith('gh') || token.startsWith('github_pat_')) return ['GITHUB_TOKEN', 0.98];
  if (token.startsWith('glpat-')) return ['GITLAB_TOKEN', 0.98];
  if (token.startsWith('xox')) return token.length >= 15 ? ['SLACK_TOKEN', 0.97] : undefined;
  if (token.startsWith('AIza')) return ['GOOGLE_API_KEY', 0.97];
  return undefined;
}

/** Recognizer for the provider token formats in the table above. */
export const tokenFormatsRecognizer: Recognizer = {
  name: 'secret-formats',
  types: [
    'AWS_ACCESS_KEY_ID',
    'GITHUB_TOKEN',
    'GITLAB_TOKEN',
    'SLACK_TOKEN',
    'STRIPE_KEY',
    'GOOGLE_API_KEY',
  ],
  find(text, _env, out: Candidate[]) {
    forEachMatchAt(TOKENS, text, tokenStarts(text), (m) => {
      if (TOKEN_BEFORE.test(text[m.index - 1] ?? '')) return;
      const format = formatOf(m[0]);
      if (format === undefined) return;
      out.push({
        type: format[0],
        start: m.index,
        end: m.index + m[0].length,
        score: format[1],
        recognizer: 'secret-formats',
      });
    });
    forEachMatchAt(STRIPE, text, indexesOf(text, ['_live_', '_test_'], 1), (m) => {
      const start = m.index - 1;
      if (!/[sr]/.test(text[start] ?? '') || TOKEN_BEFORE.test(text[start - 1] ?? '')) return;
      out.push({
        type: 'STRIPE_KEY',
        start,
        end: m.index + m[0].length,
        score: 0.97,
        recognizer: 'secret-formats',
      });
    });
  },
};

const AWS_SECRET = /(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/g;
const AWS_WORD = /aws|secret/gi;
// Wide enough for the context rule's 5 words before and 3 after.
const AWS_WINDOW = 200;
const AWS_SECRET_CONTEXT = contextRule({
  words: ['aws', 'secret', 'secretaccesskey', 'key', 'credential', 'credentials'],
  boost: 0.7,
});

function awsSecretsIn(text: string, from: number, to: number, out: Candidate[]): void {
  const window = text.slice(from, to);
  forEachMatch(AWS_SECRET, window, (m) => {
    const v = m[0];
    if (!/[A-Z]/.test(v) || !/[a-z]/.test(v) || !/\d/.test(v)) return;
    if (v.includes('//') || v.startsWith('/') || v.endsWith('/')) return;
    const start = from + m.index;
    // The window edges are not boundaries: check the real neighbours.
    if (
      /[A-Za-z0-9/+]/.test(text[start - 1] ?? '') ||
      /[A-Za-z0-9/+=]/.test(text[start + 40] ?? '')
    ) {
      return;
    }
    out.push({
      type: 'AWS_SECRET_ACCESS_KEY',
      start,
      end: start + 40,
      score: 0.2,
      recognizer: 'aws-secret-key',
      context: AWS_SECRET_CONTEXT,
    });
  });
}

/**
 * Recognizer for AWS_SECRET_ACCESS_KEY: 40 base64 characters with upper case, lower case and a
 * digit, not a path (`//`, leading or trailing `/`). Base 0.2: it is reported only with a
 * context word (aws, secret, key, credentials) nearby, and only looked for within 200
 * characters of "aws" or "secret" (`aws_secret_access_key`, `SecretAccessKey`, `AWS secret`).
 */
export const awsSecretKeyRecognizer: Recognizer = {
  name: 'aws-secret-key',
  types: ['AWS_SECRET_ACCESS_KEY'],
  requires: HAS_DIGIT,
  find(text, _env, out: Candidate[]) {
    let from = -1;
    let to = -1;
    forEachMatch(AWS_WORD, text, (m) => {
      const lo = Math.max(0, m.index - AWS_WINDOW);
      const hi = Math.min(text.length, m.index + m[0].length + AWS_WINDOW);
      if (from >= 0 && lo <= to) {
        to = hi;
        return;
      }
      if (from >= 0) awsSecretsIn(text, from, to, out);
      from = lo;
      to = hi;
    });
    if (from >= 0) awsSecretsIn(text, from, to, out);
  },
};
