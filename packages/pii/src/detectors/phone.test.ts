import maxMetadata from 'libphonenumber-js/max/metadata';
import minMetadata from 'libphonenumber-js/min/metadata';
import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';
import { createPhoneRecognizer } from './phone.ts';

const engine = createPiiEngine();
const found = (text: string, e = engine) =>
  e
    .detect(text)
    .filter((d) => d.type === 'PHONE_NUMBER')
    .map((d) => text.slice(d.start, d.end));

describe('PHONE_NUMBER', () => {
  it.each([
    // valid without context
    ['(212) 736-5000', '(212) 736-5000'],
    ['+44 20 7946 0018 is the desk', '+44 20 7946 0018'],
    ['电话+86 138 0013 8000号', '+86 138 0013 8000'],
    // national formats of other countries need a phone word
    ['Phone: 0490 75 40 81', '0490 75 40 81'],
    ['Mobile: 03.93.92.16.85', '03.93.92.16.85'],
    ['call me on 9472 7916?', '9472 7916'],
    ['Phone:\n60-56-85-91\n', '60-56-85-91'],
    ['(37) 788-063-Office', '(37) 788-063'],
    ['Desk: +41 (0)96 471 07 95', '+41 (0)96 471 07 95'],
    ['+46 (0)8 928 571 38 fax', '+46 (0)8 928 571 38'],
    ['Fax: 345-899-3560x4587', '345-899-3560x4587'],
    ['Desk: +1-903-140-4508x769', '+1-903-140-4508x769'],
    ['001-518-640-0854 mobile', '001-518-640-0854'],
    ['Tel. 0171/1234567', '0171/1234567'],
    // glued to a word: needs a phone word
    ['tel:+14155552671', '+14155552671'],
    ['phone_4155552671', '4155552671'],
    ['phone-415-555-2671', '415-555-2671'],
    ['mobile%2B14155552671', '14155552671'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it.each([
    'Order 4829173650 shipped',
    'Meeting on 2023-01-15 at 12:30:45',
    'Date: 1978-04-13 12:20:39\nNothing else',
    'Version 1.2.3.4 released',
    'ISBN 978-3-16-148410-0',
    'Revenue $1,234,567.89',
    'Population 8 336 817',
    'The price is 1.000.000 euros',
    'The office is at 17031 2202 Rissik St',
    'Phone: 123 456',
    'Call 0000000',
    '4829 1736 5012 3387 and more',
    'Invoice 2019-1234-56 paid',
    'Temperature 36.6 and 12345.678',
    // glued to a word without a phone word: ids, part numbers
    'INV-4155552671',
    'x/4155552671.txt',
    'id_+14155552671',
    '4155552671abc',
    // inside a longer number
    '12:30:45.4155552671',
    '%204155552671',
    'text 0001-01-01T00:00:00Z',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });

  it('a phone word in the JSON key counts as context', () => {
    expect(engine.detect('0490 75 40 81', { key: 'phone' }).map((d) => d.type)).toEqual([
      'PHONE_NUMBER',
    ]);
    expect(engine.detect('0490 75 40 81', { key: 'reference' })).toEqual([]);
  });

  it('validates national numbers in the configured default region', () => {
    const gb = createPiiEngine({ config: { phone: { defaultRegion: 'GB' } } });
    expect(found('020 7946 0018', gb)).toEqual(['020 7946 0018']);
    expect(found('020 7946 0018')).toEqual([]);
  });

  it('max metadata accepts fewer random numbers than min', () => {
    const count = (metadata: typeof maxMetadata) => {
      const r = createPhoneRecognizer(metadata);
      let valid = 0;
      for (let i = 0; i < 200; i++) {
        const out: Parameters<typeof r.find>[2] = [];
        const n = `+${(i * 7919 + 12345678901).toString().slice(0, 11)}`;
        const env = { defaultRegion: 'US' } as const;
        r.find(n, env, out);
        const c = out[0];
        if ((c?.refine?.(c.value ?? '', env) ?? 0) >= 0.75) valid++;
      }
      return valid;
    };
    expect(count(maxMetadata)).toBeLessThanOrEqual(count(minMetadata));
  });
});
