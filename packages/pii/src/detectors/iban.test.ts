import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';
import { IBAN_LENGTHS, isValidIban } from './iban.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'IBAN_CODE')
    .map((d) => text.slice(d.start, d.end));

describe('IBAN_CODE', () => {
  it.each([
    ['GB82 WEST 1234 5698 7654 32', 'GB82 WEST 1234 5698 7654 32'],
    ['GB82WEST12345698765432', 'GB82WEST12345698765432'],
    ['my iban is gb82west12345698765432', 'gb82west12345698765432'],
    ['DE89 3704 0044 0532 0130 00', 'DE89 3704 0044 0532 0130 00'],
    ['FR14 2004 1010 0505 0001 3M02 606', 'FR14 2004 1010 0505 0001 3M02 606'],
    ['NO93 8601 1117 947', 'NO93 8601 1117 947'],
    ['MT84MALT011000012345MTLCAST001S', 'MT84MALT011000012345MTLCAST001S'],
    ['BR1800360305000010009795493C1', 'BR1800360305000010009795493C1'],
    ['SA0380000000608010167519', 'SA0380000000608010167519'],
    ['from GB82 WEST 1234 5698 7654 32 to other accounts', 'GB82 WEST 1234 5698 7654 32'],
    ['Konto：DE89370400440532013000。', 'DE89370400440532013000'],
    ['acct_GB82WEST12345698765432', 'GB82WEST12345698765432'],
    ['GB82WEST12345698765432_2024.pdf', 'GB82WEST12345698765432'],
    ['iban-GB82WEST12345698765432', 'GB82WEST12345698765432'],
    ['iban=GB82WEST12345698765432&x=1', 'GB82WEST12345698765432'],
    ['/statements/DE89370400440532013000.pdf', 'DE89370400440532013000'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it('finds two IBANs next to each other', () => {
    expect(found('GB82WEST12345698765432 DE89370400440532013000')).toEqual([
      'GB82WEST12345698765432',
      'DE89370400440532013000',
    ]);
  });

  it.each([
    'GB82 WEST 1234 5698 7654 33',
    'GB82WEST1234569876543',
    'XX82WEST12345698765432',
    'GB82WEST12345698765432X',
    'xGB82WEST12345698765432',
    '1GB82WEST12345698765432',
    'GB82WEST123456987654321',
    'DE00370400440532013000',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });

  it('has a length for every registry country', () => {
    expect(Object.keys(IBAN_LENGTHS)).toHaveLength(89);
    expect(IBAN_LENGTHS.NO).toBe(15);
    expect(IBAN_LENGTHS.RU).toBe(33);
    expect(isValidIban('gb82 west 1234 5698 7654 32')).toBe(true);
  });
});
