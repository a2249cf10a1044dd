/**
 * PII scrubbing of what the worker stores. The PII engine (`@fleet/pii`) plugs in as a
 * {@link PayloadScrubber}; until then a conservative built-in one redacts anything that looks
 * like an email address, a run of six or more digits (phone, card, account numbers, with or
 * without separators), a bearer token or JWT, or the value of a secret-looking key.
 */
import { AUDIT_RECORD_LIMITS, cutText, truncateText } from './bounds.ts';
import { type AuditRecord, PAYLOAD_PREVIEW_MAX_LENGTH } from './record.ts';

/** Turns text that may hold PII into text that does not. Must be pure and synchronous. */
export type PayloadScrubber = (text: string) => string;

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;
// Six or more digits, possibly split by spaces, dots, dashes or slashes (4111 1111 1111
// 1111, +1 (555) 010-9999 reduces to digit groups), or an IPv4-like quad.
const DIGIT_RUN = /\+?\d(?:[\s./()-]{0,2}\d){5,}/g;
const JWT = /\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g;
const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi;
const SECRET_KEY =
  /(["']?)\b([A-Za-z0-9_-]*(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|auth(?:orization)?|credential|session[_-]?id|cookie|ssn|signature)[A-Za-z0-9_-]*)\1(\s*[:=]\s*)(?!\[SECRET\])("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,;&}\]]+)/gi;

/** The built-in scrubber: emails, digit runs ≥ 6, bearer tokens, JWTs, key=value secrets. */
export const defaultScrubber: PayloadScrubber = (text) =>
  // Tokens first, so `authorization: Bearer abc` loses the token, not just the word Bearer.
  text
    .replace(BEARER, (_match, scheme: string) => `${scheme} [SECRET]`)
    .replace(JWT, '[SECRET]')
    .replace(SECRET_KEY, (_match, quote: string, key: string, separator: string, value: string) => {
      const wrapped = value.startsWith('"') ? '"' : value.startsWith("'") ? "'" : '';
      return `${quote}${key}${quote}${separator}${wrapped}[SECRET]${wrapped}`;
    })
    .replace(EMAIL, '[EMAIL]')
    .replace(DIGIT_RUN, '[NUMBER]');

/** Text put in place of a preview the scrubber failed on: never store the original. */
export const SCRUB_FAILED = '[REDACTED: scrubber failed]';

/**
 * A copy of `record` with its free text scrubbed: `event` and `method` (any method a client
 * makes up is an event named by it: `tools/bob@example.com`), `target` (a tool or prompt name
 * or a resource URI is caller-chosen text: `mailto:bob@example.com`), abort reasons and
 * validator messages and their paths, each then cut to its {@link AUDIT_RECORD_LIMITS} bound again with a
 * marker (a replacement such as `[EMAIL]` may be longer than what it replaced), and
 * `payloadPreview` (then cut to {@link PAYLOAD_PREVIEW_MAX_LENGTH}). No cut splits a surrogate
 * pair. A scrubber that throws blanks the text instead of leaking it; `failed` counts those.
 */
export function scrubRecord(
  record: AuditRecord,
  scrub: PayloadScrubber,
): { record: AuditRecord; failed: number } {
  let failed = 0;
  const clean = (text: string): string => {
    try {
      const result = scrub(text);
      if (typeof result === 'string') return result;
    } catch {
      // fall through
    }
    failed++;
    return SCRUB_FAILED;
  };
  // Scrubbed, then cut back to the bound the record schema gave it.
  const cleanWithin = (text: string, max: number): string => truncateText(clean(text), max);
  const copy: AuditRecord = { ...record };
  // The store's event column (the `event` filter) is filled from this copy. The method is
  // almost always the event: scrubbed once then.
  copy.event = cleanWithin(record.event, AUDIT_RECORD_LIMITS.eventLength);
  copy.method =
    record.method === record.event
      ? copy.event
      : cleanWithin(record.method, AUDIT_RECORD_LIMITS.eventLength);
  // The store's target column (the `tool` filter, stats byTool) is filled from this copy.
  if (record.target !== undefined)
    copy.target = cleanWithin(record.target, AUDIT_RECORD_LIMITS.idLength);
  // Cut after scrubbing: the queued preview runs past the stored length so that a value
  // straddling the cut is still whole, and recognisable, when scrubbed.
  if (record.payloadPreview !== undefined)
    copy.payloadPreview = cutText(clean(record.payloadPreview), PAYLOAD_PREVIEW_MAX_LENGTH);
  if (record.abortReasons.length > 0)
    copy.abortReasons = record.abortReasons.map((a) => ({
      ...a,
      reason: cleanWithin(a.reason, AUDIT_RECORD_LIMITS.messageLength),
    }));
  if (record.interceptors.some((i) => i.messages?.length))
    copy.interceptors = record.interceptors.map((i) =>
      i.messages?.length
        ? {
            ...i,
            messages: i.messages.map((m) => ({
              ...m,
              // A path names where the finding is, and may run through a caller's map key
              // (`arguments.contacts.bob@example.com`).
              ...(m.path === undefined
                ? {}
                : { path: cleanWithin(m.path, AUDIT_RECORD_LIMITS.pathLength) }),
              message: cleanWithin(m.message, AUDIT_RECORD_LIMITS.messageLength),
            })),
          }
        : i,
    );
  return { record: copy, failed };
}
