import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';
import { inHexWord, knownIssuer } from './credit-card.ts';
import { luhnValid } from './recognizer.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'CREDIT_CARD')
    .map((d) => text.slice(d.start, d.end));

describe('CREDIT_CARD', () => {
  it.each([
    ['4111 1111 1111 1111', '4111 1111 1111 1111'],
    ['pay with 4111-1111-1111-1111 today', '4111-1111-1111-1111'],
    ['5555555555554444', '5555555555554444'],
    ['Amex 378282246310005', '378282246310005'],
    ['Amex 3782 822463 10005', '3782 822463 10005'],
    ['6011111111111117', '6011111111111117'],
    ['3530111333300000', '3530111333300000'],
    ['Diners 3056 930902 5904', '3056 930902 5904'],
    ['2221 0000 0000 0009', '2221 0000 0000 0009'],
    ['card 4111 1111 1111 1111 12/27', '4111 1111 1111 1111'],
    ['card 4111-1111-1111-1111 12/27', '4111-1111-1111-1111'],
    ['card 38191525753169 12/27', '38191525753169'],
    ['card number 675984103431 is lost', '675984103431'],
    ['卡号4111111111111111。', '4111111111111111'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  // Glued to letters or separators: file names, ids, query strings (the audit store got these raw).
  it.each([
    ['file:///home/x/card-4111111111111111.txt', '4111111111111111'],
    ['card-4111111111111111', '4111111111111111'],
    ['cust_4111111111111111', '4111111111111111'],
    ['cc=4111111111111111', '4111111111111111'],
    ['pan:4111111111111111', '4111111111111111'],
    ['x/4111111111111111.txt', '4111111111111111'],
    ['ref#4111111111111111', '4111111111111111'],
    ['4111111111111111_exp', '4111111111111111'],
    ['4111111111111111.pdf', '4111111111111111'],
    ['user.4111111111111111', '4111111111111111'],
    ['card=4111-1111-1111-1111&cvv=123', '4111-1111-1111-1111'],
    ['name_4111 1111 1111 1111_end', '4111 1111 1111 1111'],
    // right next to a letter: with a card word only
    ['card x4111111111111111', '4111111111111111'],
    ['visa 4111111111111111x', '4111111111111111'],
  ])('finds %j glued', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it('order_4111… stays below the threshold: "order" is a negative context word', () => {
    expect(found('order_4111111111111111')).toEqual([]);
    expect(found('order 4111111111111111')).toEqual([]);
  });

  it.each([
    '4111 1111 1111 1112',
    '0000 0000 0000 0000',
    'ref 675984103431',
    '41 1111 1111 1111 11',
    '4111 1111-1111 1111 0',
    '4111111111111111234567',
    'build 12345678901234567890',
    // right next to a letter without a card word: ids with a letter prefix
    'x4111111111111111',
    '4111111111111111x',
    'é4111111111111111',
    "My driver's license number is U62928788557186",
    // inside a longer number
    'id=12344111111111111111',
    'id=41111111111111111234',
    'card-12344111111111111111.txt',
    '４4111111111111111',
    '4111111111111111٣',
    // decimals, versions, compound numbers, phones, exponents
    '1.4111111111111111',
    '0.4111111111111111',
    'v1.4111111111111111',
    '4111111111111111.5',
    '2024-4111111111111111',
    '+4111111111111111',
    '1e+4111111111111111',
    // hexadecimal words: hashes, hex ids
    'deadbeef4111111111111111',
    'sha=e3b04111111111111111c4',
    '4111111111111111abcdef',
    '0x4111111111111111',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });

  it.each([
    ['x4111111111111111', 1, 17, false],
    ['ab4111111111111111', 2, 18, true],
    ['4111111111111111f', 0, 16, true],
    ['0X4111111111111111', 2, 18, true],
    ['4111111111111111', 0, 16, false],
    ['-4111111111111111_', 1, 17, false],
  ])('inHexWord(%j, %i, %i) = %s', (text, start, end, hex) => {
    expect(inHexWord(text, start, end)).toBe(hex);
  });

  it.each([
    ['79927398713', true],
    ['79927398710', false],
    ['4111111111111111', true],
  ])('luhn(%s) = %s', (digits, valid) => {
    expect(luhnValid(digits)).toBe(valid);
  });

  it.each([
    ['4111111111111111', true],
    ['4111111111111', true],
    ['411111111111111', false],
    ['378282246310005', true],
    ['9111111111111111', false],
  ])('knownIssuer(%s) = %s', (digits, known) => {
    expect(knownIssuer(digits)).toBe(known);
  });
});
