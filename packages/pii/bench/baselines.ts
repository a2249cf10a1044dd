/**
 * The four detectors the benchmark compares, behind one interface: ours, and the npm baselines
 * redact-pii, openredaction and @redactpii/node, each run as shipped (default rules) with its
 * labels mapped to ours. redact-pii and @redactpii/node only return redacted text: their spans
 * are recovered by aligning the output with the input (each rule replaces a match by a fixed
 * marker word such as PHONE_NUMBER; every other character is copied). The corpora never
 * contain those words themselves.
 */
import { Redactor as RedactPiiNode } from '@redactpii/node';
import { OpenRedaction } from 'openredaction';
import { SyncRedactor } from 'redact-pii';
import { createPiiEngine, ENTITY_TYPES, type EntityType, type PiiEngine } from '../src/index.ts';
import type { Span } from './score.ts';

/** One detector under test. */
export interface Detector {
  readonly name: string;
  /** Our entity types it has a rule for (others are reported n/a). */
  readonly capabilities: ReadonlySet<EntityType>;
  /** Spans it reports, with our labels (unmapped labels keep their own name). */
  detect(text: string): Promise<Span[]>;
  /** Redact one string as the library does (for the changed-text count and throughput). */
  redact(text: string): Promise<string>;
  /**
   * The same without a promise, for a library that works synchronously: the throughput run
   * then does not charge it a promise and an `await` per string.
   */
  redactSync?(text: string): string;
}

/** Our engine with its default config (every type, default thresholds). */
export function oursDetector(engine: PiiEngine = createPiiEngine()): Detector {
  return {
    name: '@fleet/pii',
    capabilities: new Set(ENTITY_TYPES),
    detect: async (text) =>
      engine.detect(text).map(({ type, start, end }) => ({ type, start, end })),
    redact: async (text) => engine.transformText(text).text,
    redactSync: (text) => engine.transformText(text).text,
  };
}

interface Segment {
  literal?: string;
  marker?: string;
}

/** A regex for whole marker words (`DB_PASSWORD` is not the marker `PASSWORD`). */
function markerPattern(words: readonly string[]): RegExp {
  return new RegExp(`(?<![A-Za-z0-9_])(?:${words.join('|')})(?![A-Za-z0-9_])`, 'g');
}

/** Split redacted output into literal text and markers. */
function segments(redacted: string, markers: RegExp): Segment[] {
  const out: Segment[] = [];
  let last = 0;
  markers.lastIndex = 0;
  for (let m = markers.exec(redacted); m !== null; m = markers.exec(redacted)) {
    if (m.index > last) out.push({ literal: redacted.slice(last, m.index) });
    out.push({ marker: m[0] });
    last = m.index + m[0].length;
  }
  if (last < redacted.length) out.push({ literal: redacted.slice(last) });
  return out;
}

/**
 * Recover the replaced spans: literals must appear verbatim in order; each marker consumed at
 * least one character. Searches shortest marker spans first, with backtracking.
 */
export function alignRedaction(
  original: string,
  redacted: string,
  markers: RegExp,
  labelOf: (marker: string) => string,
): Span[] {
  const segs = segments(redacted, markers);
  const spans: Span[] = [];
  const failed = new Set<string>();
  const go = (i: number, pos: number): boolean => {
    if (i === segs.length) return pos === original.length;
    const key = `${i}:${pos}`;
    if (failed.has(key)) return false;
    const seg = segs[i] as Segment;
    if (seg.literal !== undefined) {
      if (original.startsWith(seg.literal, pos) && go(i + 1, pos + seg.literal.length)) return true;
      failed.add(key);
      return false;
    }
    const next = segs[i + 1]?.literal;
    for (let end = pos + 1; end <= original.length; end++) {
      if (next !== undefined) {
        end = original.indexOf(next, end);
        if (end === -1) break;
      }
      spans.push({ type: labelOf(seg.marker ?? ''), start: pos, end });
      if (go(i + 1, end)) return true;
      spans.pop();
    }
    failed.add(key);
    return false;
  };
  return go(0, 0) ? spans : [];
}

// redact-pii replaces each rule's matches by the rule's name in SCREAMING_SNAKE_CASE (it
// ignores per-rule `replaceWith`); those words are the markers.
const REDACT_PII_MARKERS: ReadonlyArray<[marker: string, label: string]> = [
  ['US_SOCIAL_SECURITY_NUMBER', 'US_SSN'],
  ['CREDIT_CARD_NUMBER', 'CREDIT_CARD'],
  ['STREET_ADDRESS', 'STREET_ADDRESS'],
  ['EMAIL_ADDRESS', 'EMAIL_ADDRESS'],
  ['PHONE_NUMBER', 'PHONE_NUMBER'],
  ['IP_ADDRESS', 'IP_ADDRESS'],
  ['CREDENTIALS', 'SECRET'],
  ['PASSWORD', 'SECRET'],
  ['USERNAME', 'USERNAME'],
  ['ZIPCODE', 'ZIP_CODE'],
  ['PERSON_NAME', 'PERSON'],
  ['DIGITS', 'DIGITS'],
  ['URL', 'URL'],
];

/** redact-pii 3.4.0, SyncRedactor with every built-in rule. */
export function redactPiiDetector(): Detector {
  const redactor = new SyncRedactor();
  const labels = new Map(REDACT_PII_MARKERS);
  const markers = markerPattern(REDACT_PII_MARKERS.map(([m]) => m));
  return {
    name: 'redact-pii',
    capabilities: new Set<EntityType>([
      'EMAIL_ADDRESS',
      'PHONE_NUMBER',
      'CREDIT_CARD',
      'US_SSN',
      'IP_ADDRESS',
      'SECRET',
      'PERSON',
    ]),
    detect: async (text) =>
      alignRedaction(text, redactor.redact(text), markers, (m) => labels.get(m) ?? 'OTHER'),
    redact: async (text) => redactor.redact(text),
    redactSync: (text) => redactor.redact(text),
  };
}

const REDACTPII_NODE_MARKERS: ReadonlyArray<[marker: string, label: string]> = [
  ['US_SOCIAL_SECURITY_NUMBER', 'US_SSN'],
  ['CREDIT_CARD_NUMBER', 'CREDIT_CARD'],
  ['EMAIL_ADDRESS', 'EMAIL_ADDRESS'],
  ['PHONE_NUMBER', 'PHONE_NUMBER'],
  ['PERSON_NAME', 'PERSON'],
  ['DIGITS', 'DIGITS'],
];

/** @redactpii/node 1.0.17, default rules (no API key: nothing leaves the process). */
export function redactPiiNodeDetector(): Detector {
  const redactor = new RedactPiiNode();
  const labels = new Map(REDACTPII_NODE_MARKERS);
  const markers = markerPattern(REDACTPII_NODE_MARKERS.map(([m]) => m));
  return {
    name: '@redactpii/node',
    capabilities: new Set<EntityType>([
      'EMAIL_ADDRESS',
      'PHONE_NUMBER',
      'CREDIT_CARD',
      'US_SSN',
      'PERSON',
    ]),
    detect: async (text) =>
      alignRedaction(text, redactor.redact(text), markers, (m) => labels.get(m) ?? 'OTHER'),
    redact: async (text) => redactor.redact(text),
    redactSync: (text) => redactor.redact(text),
  };
}

const OPENREDACTION_LABELS: ReadonlyArray<[pattern: RegExp, label: EntityType]> = [
  [/^EMAIL$/, 'EMAIL_ADDRESS'],
  [/^PHONE/, 'PHONE_NUMBER'],
  [/^CREDIT_CARD$/, 'CREDIT_CARD'],
  [/^(?:IBAN|UK_BANK_ACCOUNT_IBAN)$/, 'IBAN_CODE'],
  [/^SSN$/, 'US_SSN'],
  [/^IPV[46]$/, 'IP_ADDRESS'],
  [/^MAC_ADDRESS$/, 'MAC_ADDRESS'],
  [/^(?:URL_WITH_AUTH|DATABASE_CONNECTION)$/, 'URL_CREDENTIALS'],
  [/^AWS_ACCESS_KEY$/, 'AWS_ACCESS_KEY_ID'],
  [/^AWS_SECRET_KEY$/, 'AWS_SECRET_ACCESS_KEY'],
  [/^GITHUB_TOKEN$/, 'GITHUB_TOKEN'],
  [/^SLACK_TOKEN$/, 'SLACK_TOKEN'],
  [/^STRIPE_API_KEY$/, 'STRIPE_KEY'],
  [/^(?:GOOGLE_API_KEY|FIREBASE_API_KEY)$/, 'GOOGLE_API_KEY'],
  [/^JWT_TOKEN$/, 'JWT'],
  [/^(?:SSH_)?PRIVATE_KEY$/, 'PRIVATE_KEY'],
  [/^(?:GENERIC_SECRET|GENERIC_API_KEY)$/, 'SECRET'],
  [/^(?:BITCOIN|ETHEREUM)_ADDRESS$/, 'CRYPTO'],
  [/^DATE_OF_BIRTH$/, 'DATE_OF_BIRTH'],
  [/^(?:NAME|PERSON)$/, 'PERSON'],
];

/** openredaction 1.1.5, default options. */
export function openRedactionDetector(): Detector {
  const redactor = new OpenRedaction({});
  const label = (type: string): string =>
    OPENREDACTION_LABELS.find(([re]) => re.test(type))?.[1] ?? type;
  return {
    name: 'openredaction',
    capabilities: new Set<EntityType>(ENTITY_TYPES.filter((t) => t !== 'GITLAB_TOKEN')),
    detect: async (text) => {
      const result = await redactor.detect(text);
      return result.detections.map((d) => ({
        type: label(d.type),
        start: d.position[0],
        end: d.position[1],
      }));
    },
    redact: async (text) => (await redactor.detect(text)).redacted,
  };
}
