/**
 * Strategies: what replaces a detected value. Pure functions of the value, the entity type and
 * the policy; `tokenize` additionally reports each pair to the caller's tokenizer.
 */
import { createHmac } from 'node:crypto';
import type { EntityType } from './entities.ts';
import { PiiError } from './errors.ts';
import { formatToken, isTokenId, mintTokenId } from './tokens.ts';
import type { Detection, EntityCounts, Finding, Strategy, Tokenizer } from './types.ts';

/** Every strategy, in documentation order. */
export const STRATEGIES: readonly Strategy[] = ['redact', 'mask', 'hash', 'tokenize', 'block'];

/** `[TYPE]`. */
export function redactValue(type: EntityType): string {
  return `[${type}]`;
}

/**
 * Mask letters and digits with `char`, keeping separators and the last `keepLast` letters or
 * digits: `4242-4242-4242-4242` → `****-****-****-4242`. Never reveals more than half of the
 * letters and digits (a 6-character password keeps at most 3).
 */
export function maskValue(value: string, keepLast: number, char = '*'): string {
  const chars = [...value];
  const alnum = chars.filter((c) => /[\p{L}\p{N}]/u.test(c)).length;
  let keep = Math.min(keepLast, Math.floor(alnum / 2));
  for (let i = chars.length - 1; i >= 0; i--) {
    const c = chars[i] ?? '';
    if (!/[\p{L}\p{N}]/u.test(c)) continue;
    if (keep > 0) keep--;
    else chars[i] = char;
  }
  return chars.join('');
}

/**
 * The form of a value that its pseudonym is computed over, so one entity written two ways
 * hashes alike: digits only for cards and SSNs, `+` and digits for phones, upper case without
 * spaces for IBANs, lower case for e-mail, IP and MAC addresses.
 */
export function canonicalValue(type: EntityType, value: string): string {
  switch (type) {
    case 'CREDIT_CARD':
    case 'US_SSN':
      return value.replace(/\D/g, '');
    case 'PHONE_NUMBER':
      return (value.trimStart().startsWith('+') ? '+' : '') + value.replace(/\D/g, '');
    case 'IBAN_CODE':
      return value.replace(/\s/g, '').toUpperCase();
    case 'EMAIL_ADDRESS':
    case 'IP_ADDRESS':
      return value.toLowerCase();
    case 'MAC_ADDRESS':
      return value.replace(/[^0-9A-Fa-f]/g, '').toLowerCase();
    default:
      return value;
  }
}

/**
 * `<TYPE:xxxxxxxx>`: the first 8 hex digits of HMAC-SHA-256(key, type ␀ canonical value).
 * Stable for one key, unrelated across keys, not reversible without the key.
 */
export function hashValue(type: EntityType, value: string, key: Uint8Array): string {
  const mac = createHmac('sha256', key)
    .update(type)
    .update('\u0000')
    .update(canonicalValue(type, value))
    .digest('hex');
  return `<${type}:${mac.slice(0, 8)}>`;
}

/** The per-type settings a transformation needs. */
export interface TransformPolicy {
  readonly strategies: Readonly<Record<EntityType, Strategy>>;
  readonly keepLast: Readonly<Record<EntityType, number>>;
  readonly maskChar: string;
  readonly hmacKey: Uint8Array | undefined;
}

/**
 * State shared by one transformation call (one string or one whole JSON value): the tokens
 * already issued, so a value repeated in a payload gets one token and one `onToken` call.
 */
export interface TransformSession {
  readonly tokenizer: Tokenizer | undefined;
  readonly issued: Map<string, string>;
  readonly counts: EntityCounts;
  readonly findings: Finding[];
  readonly blocked: Finding[];
}

/** A new, empty {@link TransformSession}. */
export function createSession(tokenizer: Tokenizer | undefined): TransformSession {
  return { tokenizer, issued: new Map(), counts: {}, findings: [], blocked: [] };
}

function tokenFor(type: EntityType, value: string, session: TransformSession): string {
  const { tokenizer } = session;
  if (tokenizer === undefined) {
    throw new PiiError(
      'PII_TOKENIZER_MISSING',
      `strategy tokenize applies to ${type} but no tokenizer was given`,
      { type },
    );
  }
  const key = `${type}\u0000${value}`;
  const existing = session.issued.get(key);
  if (existing !== undefined) return existing;
  const id = tokenizer.mintId?.(type, value) ?? mintTokenId();
  if (!isTokenId(id))
    throw new RangeError('Tokenizer.mintId must return 12 characters of [0-9a-z]');
  const token = formatToken(type, id);
  session.issued.set(key, token);
  tokenizer.onToken({ type, original: value, token });
  return token;
}

/** The replacement text for one detected value under `strategy`. */
export function replacementFor(
  type: EntityType,
  value: string,
  strategy: Strategy,
  policy: TransformPolicy,
  session: TransformSession,
): string {
  switch (strategy) {
    case 'redact':
    case 'block':
      return redactValue(type);
    case 'mask':
      return maskValue(value, policy.keepLast[type], policy.maskChar);
    case 'hash':
      if (policy.hmacKey === undefined) {
        throw new PiiError('PII_HMAC_KEY_INVALID', `strategy hash applies to ${type} but no key`, {
          type,
        });
      }
      return hashValue(type, value, policy.hmacKey);
    case 'tokenize':
      return tokenFor(type, value, session);
  }
}

/**
 * Replace each detection in `text` (sorted, non-overlapping) and record counts and findings
 * (with `path`) in the session. Returns the new text (the same string when there is nothing).
 */
export function applyDetections(
  text: string,
  detections: readonly Detection[],
  path: string,
  policy: TransformPolicy,
  session: TransformSession,
): string {
  if (detections.length === 0) return text;
  let out = '';
  let last = 0;
  for (const d of detections) {
    const strategy = policy.strategies[d.type];
    out += text.slice(last, d.start);
    out += replacementFor(d.type, text.slice(d.start, d.end), strategy, policy, session);
    last = d.end;
    session.counts[d.type] = (session.counts[d.type] ?? 0) + 1;
    const finding: Finding = {
      path,
      type: d.type,
      start: d.start,
      end: d.end,
      score: d.score,
      strategy,
    };
    session.findings.push(finding);
    if (strategy === 'block') session.blocked.push(finding);
  }
  return out + text.slice(last);
}
