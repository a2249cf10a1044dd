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
 * | OPENAI_API_KEY | `sk-proj-`/`sk-svcacct-`/`sk-admin-`/`sk-None-` + ≥ 20 of `[A-Za-z0-9_-]`; legacy `sk-` + ≥ 32 alphanumerics; either with a digit and a letter (legacy: both cases) | 0.97 |
 *
 * {@link bearerRecognizer} adds the token of a free-text `Bearer <token>` (an `Authorization`
 * header pasted into text) as a SECRET.
 */
import type { EntityType } from '../entities.ts';
import { codeAt } from './chars.ts';
import {
  type Candidate,
  contextRule,
  digitRunsOf,
  forEachMatchAt,
  HAS_DIGIT,
  indexesOf,
  type Recognizer,
  type TextScans,
} from './recognizer.ts';

// One pattern for every format, tried only where a prefix occurs (found with indexOf, far
// cheaper than a regex trying every position); the left boundary is checked in code.
const TOKENS =
  /(?:A(?:KIA|SIA)[A-Z0-9]{16}|AIza[A-Za-z0-9_-]{35}|g(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{22,255}|lpat-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+){0,2})|xox[abprs]-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+|sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,}))(?![A-Za-z0-9_-])/y;

/** Where a token may start: its prefix, searched by a distinctive part of it. */
function tokenStarts(text: string): number[] {
  const starts = indexesOf(text, ['AKIA', 'ASIA', 'AIza', 'gh', 'xox', 'sk-']);
  const before = starts.length;
  // `glpat-` whole: `lpat-` alone starts with the common `l`, slower to search for.
  for (let i = text.indexOf('glpat-'); i !== -1; i = text.indexOf('glpat-', i + 1)) starts.push(i);
  for (let i = text.indexOf('_pat_'); i !== -1; i = text.indexOf('_pat_', i + 1)) {
    if (i >= 6) starts.push(i - 6);
  }
  if (starts.length > before && starts.length > 1) starts.sort((a, b) => a - b);
  return starts;
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
  if (token.startsWith('sk-')) return isOpenAiKey(token) ? ['OPENAI_API_KEY', 0.97] : undefined;
  return undefined;
}

/**
 * An OpenAI key beyond its shape: a project/service-account/admin key has a digit and a letter
 * after its prefix; a legacy `sk-` key mixes upper case, lower case and digits (no word does).
 */
function isOpenAiKey(token: string): boolean {
  const dash = token.indexOf('-', 3);
  const body = dash > 0 ? token.slice(dash + 1) : token.slice(3);
  if (!/[0-9]/.test(body) || !/[A-Za-z]/.test(body)) return false;
  return dash > 0 || (/[A-Z]/.test(body) && /[a-z]/.test(body));
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
    'OPENAI_API_KEY',
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

const AWS_WORD = /aws|secret/gi;
// Wide enough for the context rule's 5 words before and 3 after.
const AWS_WINDOW = 200;
const AWS_SECRET_CONTEXT = contextRule({
  words: ['aws', 'secret', 'secretaccesskey', 'key', 'credential', 'credentials'],
  boost: 0.7,
});

function isBase64Code(c: number): boolean {
  return (
    (c >= 48 && c <= 57) ||
    (c >= 65 && c <= 90) ||
    (c >= 97 && c <= 122) ||
    c === 43 || // +
    c === 47 // /
  );
}

/**
 * Whether `text[start, start + 40)` lies within the windows of AWS_WINDOW characters around
 * "aws" and "secret" (any case; windows that overlap or touch are one). Only the words whose
 * window can reach the value are looked at (two characters more are read before them, so an
 * "aws" overlapping a "secret" is read as a scan of the whole text reads it).
 */
function inAwsWindow(text: string, start: number): boolean {
  const from = Math.max(0, start - AWS_WINDOW - 'secret'.length - 2);
  const near = text.slice(from, Math.min(text.length, start + 40 + AWS_WINDOW + 'secret'.length));
  // Sweep the windows in order: [start, covered) is covered so far.
  let covered = start;
  AWS_WORD.lastIndex = 0;
  for (let m = AWS_WORD.exec(near); m !== null; m = AWS_WORD.exec(near)) {
    const at = from + m.index;
    if (at - AWS_WINDOW > covered) return false;
    covered = Math.max(covered, Math.min(text.length, at + m[0].length + AWS_WINDOW));
    if (covered >= start + 40) return true;
  }
  return false;
}

/**
 * AWS secret candidates: runs of exactly 40 base64 characters (`[A-Za-z0-9/+]`, not followed
 * by `=`) with upper case, lower case and a digit, not a path, within a window of "aws" or
 * "secret". Each has a digit, so each is found from a digit group of the shared scan.
 */
function awsSecrets(text: string, scans: TextScans | undefined, out: Candidate[]): void {
  let covered = 0;
  for (const g of digitRunsOf(text, scans).groups) {
    if (g < covered) continue;
    let start = g;
    while (start > 0 && isBase64Code(text.charCodeAt(start - 1))) start--;
    let end = g + 1;
    while (end < text.length && isBase64Code(text.charCodeAt(end))) end++;
    covered = end;
    if (end - start !== 40 || codeAt(text, end) === 61) continue;
    const v = text.slice(start, end);
    if (!/[A-Z]/.test(v) || !/[a-z]/.test(v)) continue;
    if (v.includes('//') || v.startsWith('/') || v.endsWith('/')) continue;
    if (!inAwsWindow(text, start)) continue;
    out.push({
      type: 'AWS_SECRET_ACCESS_KEY',
      start,
      end,
      score: 0.2,
      recognizer: 'aws-secret-key',
      context: AWS_SECRET_CONTEXT,
    });
  }
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
  find(text, _env, out: Candidate[], scans) {
    awsSecrets(text, scans, out);
  },
};

// `Bearer` then a token68 (RFC 7235) of ≥ 16 characters.
const BEARER = /[Bb]earer[ \t]+([A-Za-z0-9._~+/-]{16,2048}=*)(?![A-Za-z0-9._~+/=-])/y;

/**
 * Whether a bearer token is a credential rather than a word: it has a digit, or mixes upper and
 * lower case (`YOUR_TOKEN_HERE`, `authentication-required` are not).
 */
function isBearerToken(token: string): boolean {
  return /[0-9]/.test(token) || (/[A-Z]/.test(token) && /[a-z]/.test(token));
}

/**
 * SECRET: the token of `Bearer <token>` in free text (`Authorization: Bearer …`, `curl -H
 * "Authorization: Bearer …"`), 0.9 — under a JWT (0.95) or a provider token (≥ 0.96) found on
 * the same span, which then names it. Only the token is reported; `Bearer` stays readable.
 */
export const bearerRecognizer: Recognizer = {
  name: 'bearer-token',
  types: ['SECRET'],
  find(text, _env, out: Candidate[]) {
    forEachMatchAt(BEARER, text, indexesOf(text, ['earer'], 1), (m) => {
      if (TOKEN_BEFORE.test(text[m.index - 1] ?? '')) return;
      const token = m[1] ?? '';
      if (!isBearerToken(token)) return;
      const start = m.index + m[0].length - token.length;
      out.push({
        type: 'SECRET',
        start,
        end: m.index + m[0].length,
        score: 0.9,
        recognizer: 'bearer-token',
      });
    });
  },
};
