import { describe, expect, it } from 'vitest';
import { contextDelta, resolveOverlaps } from './analyzer.ts';
import {
  type Candidate,
  contextRule,
  wordPrefixFilter,
  wordPrefixKey,
} from './detectors/recognizer.ts';
import { createPiiEngine, type Detection } from './index.ts';

const d = (type: Detection['type'], start: number, end: number, score: number): Detection => ({
  type,
  start,
  end,
  score,
  recognizer: 'test',
});

describe('overlap resolution', () => {
  it.each([
    [
      'higher score wins',
      [d('PHONE_NUMBER', 0, 10, 0.6), d('CREDIT_CARD', 2, 12, 0.8)],
      [d('CREDIT_CARD', 2, 12, 0.8)],
    ],
    [
      'then the longer span',
      [d('PHONE_NUMBER', 0, 10, 0.8), d('US_SSN', 0, 11, 0.8)],
      [d('US_SSN', 0, 11, 0.8)],
    ],
    [
      'then the earlier span',
      [d('PHONE_NUMBER', 5, 10, 0.8), d('US_SSN', 3, 8, 0.8)],
      [d('US_SSN', 3, 8, 0.8)],
    ],
    [
      'disjoint spans all stay, sorted by start',
      [d('EMAIL_ADDRESS', 20, 30, 0.9), d('PHONE_NUMBER', 0, 10, 0.5)],
      [d('PHONE_NUMBER', 0, 10, 0.5), d('EMAIL_ADDRESS', 20, 30, 0.9)],
    ],
    [
      'a chain keeps the best and what does not touch it',
      [d('PHONE_NUMBER', 0, 5, 0.5), d('CREDIT_CARD', 4, 9, 0.9), d('US_SSN', 8, 12, 0.5)],
      [d('CREDIT_CARD', 4, 9, 0.9)],
    ],
  ])('%s', (_name, input, want) => {
    expect(resolveOverlaps(input)).toEqual(want);
    expect(resolveOverlaps([...input].reverse())).toEqual(want);
  });
});

describe('analysis', () => {
  const engine = createPiiEngine();

  it('context words raise a score over the threshold, negative words lower it', () => {
    expect(engine.detect('ref 0490 75 40 81')).toEqual([]);
    const [phone] = engine.detect('Phone: 0490 75 40 81');
    expect(phone?.score).toBeCloseTo(0.65);
    expect(engine.detect('order 212-736-5000')).toEqual([]);
    expect(engine.detect('call 212-736-5000').map((x) => x.type)).toEqual(['PHONE_NUMBER']);
  });

  it('honours per-entity thresholds', () => {
    const strict = createPiiEngine({ config: { entities: { PHONE_NUMBER: { threshold: 0.9 } } } });
    expect(strict.detect('Phone: 0490 75 40 81')).toEqual([]);
    expect(strict.detect('Phone: +1 212-736-5000').map((x) => x.type)).toEqual(['PHONE_NUMBER']);
  });

  it('skips disabled types', () => {
    const e = createPiiEngine({ config: { entities: { EMAIL_ADDRESS: { enabled: false } } } });
    expect(e.detect('a@example.com')).toEqual([]);
  });

  it('never touches allow-listed values, nor anything overlapping them', () => {
    const e = createPiiEngine({
      config: { allow: { values: ['support@acme.com'], patterns: ['/.*@acme\\.test/i'] } },
    });
    expect(e.detect('mail support@acme.com or bob@example.com').map((x) => x.type)).toEqual([
      'EMAIL_ADDRESS',
    ]);
    expect(e.transformText('Bob@ACME.test and support@acme.com').text).toBe(
      'Bob@ACME.test and support@acme.com',
    );
    expect(e.detect('SUPPORT@acme.com')).toHaveLength(1);
  });

  it('does not look inside its own replacements', () => {
    const text = 'Phone: <PHONE_NUMBER:12345678> [EMAIL_ADDRESS] <<CREDIT_CARD:tok_0123456789ab>>';
    expect(engine.detect(text)).toEqual([]);
  });

  it('is idempotent', () => {
    const text =
      'Call +1 212-736-5000, mail a@example.com, card 4111 1111 1111 1111, password=hunter2!';
    const once = engine.transformText(text).text;
    expect(engine.transformText(once).changed).toBe(false);
  });
});

describe('hostile input', () => {
  const engine = createPiiEngine();
  it.each([
    ['digits', '1'.repeat(200_000)],
    ['spaced digits', '1 '.repeat(100_000)],
    ['dashes', '12-'.repeat(70_000)],
    ['at signs', 'a@'.repeat(100_000)],
    ['domain labels', `x@${'a-'.repeat(100_000)}`],
    ['colons', 'ab:'.repeat(70_000)],
    ['base64', 'Ab1+'.repeat(50_000)],
    ['keywords', 'password '.repeat(20_000)],
    ['titles', 'Mr. Aaaa '.repeat(20_000)],
    ['parentheses', '(1'.repeat(100_000)],
    ['unfinished PEM', '-----BEGIN PRIVATE KEY-----\n'.repeat(5000)],
  ])('stays linear on %s', (_name, text) => {
    const started = performance.now();
    engine.transformText(text);
    expect(performance.now() - started).toBeLessThan(3000);
  });
});

describe('context words', () => {
  const rule = contextRule({
    words: ['phone', 'tél', 'k', 'date of birth'],
    negative: ['order'],
    negativeAfter: ['street'],
  });
  const candidate = (text: string, value: string): Candidate => {
    const start = text.indexOf(value);
    return {
      type: 'PHONE_NUMBER',
      start,
      end: start + value.length,
      score: 0.5,
      recognizer: 'test',
      context: rule,
    };
  };
  const delta = (text: string, value = '555', extra: readonly string[] = []) =>
    contextDelta(text, candidate(text, value), extra);

  it.each([
    ['PHONE: 555', 0.35],
    ['Phone — 555', 0.35],
    ['555 (phone)', 0.35],
    ['TÉL 555', 0.35],
    ['Tél. 555', 0.35],
    ['\u212a 555', 0.35], // KELVIN SIGN lower-cases to k
    ['K 555', 0.35],
    ['phones 555', 0],
    ['telephone 555', 0],
    ['order 555', -0.35],
    ['phone order 555', 0],
    ['555 Street', -0.35],
    ['555\nStreet', 0],
    ['phone\u0000555', 0],
    ['a b c d e f phone g h i j m n 555', 0],
  ])('%j → %d', (text, want) => {
    expect(delta(text)).toBeCloseTo(want, 10);
  });

  it('reads phrases whose words alone are no context words', () => {
    expect(delta('date of birth 555')).toBeCloseTo(0.35, 10);
    // The words before and after the value are read as one window.
    expect(delta('date of 555 birth')).toBeCloseTo(0.35, 10);
    expect(delta('date xx of birth 555')).toBe(0);
    expect(delta('of birth 555', '555', ['date'])).toBeCloseTo(0.35, 10);
  });

  it('counts the JSON key words before the text', () => {
    expect(delta('555', '555', ['phone'])).toBeCloseTo(0.35, 10);
    expect(delta('555', '555', ['order'])).toBeCloseTo(-0.35, 10);
    expect(delta('a b c d e 555', '555', ['phone'])).toBe(0);
  });

  it('wordPrefixFilter rules out words by their first two characters, in any case', () => {
    const filter = wordPrefixFilter(['phone', 'e', 'tél']);
    const listed = (w: string) => {
      const key = wordPrefixKey(w, 0, w.length);
      return key < 0 ? 'unknown' : filter[key] === 1;
    };
    expect(listed('PHONES')).toBe(true);
    expect(listed('Ph')).toBe(true);
    expect(listed('e')).toBe(true);
    expect(listed('E')).toBe(true);
    expect(listed('ex')).toBe(false);
    expect(listed('pa')).toBe(false);
    expect(listed('té')).toBe('unknown');
    expect(listed('\u212a')).toBe('unknown');
  });
});
