import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';
import { knownIssuer } from './credit-card.ts';
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

  it.each([
    '4111 1111 1111 1112',
    '0000 0000 0000 0000',
    'ref 675984103431',
    '41 1111 1111 1111 11',
    '4111 1111-1111 1111 0',
    'x4111111111111111',
    '4111111111111111234567',
    'build 12345678901234567890',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
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
