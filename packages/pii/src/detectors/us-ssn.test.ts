import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';
import { ssnValid } from './us-ssn.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'US_SSN')
    .map((d) => text.slice(d.start, d.end));

describe('US_SSN', () => {
  it.each([
    ['536-22-8726', '536-22-8726'],
    ["Here's my SSN: 853-37-1694", '853-37-1694'],
    ['SSN 536 22 8726', '536 22 8726'],
    ['social security number 536228726', '536228726'],
    ['社会保障号536-22-8726。', '536-22-8726'],
    // glued to a word: needs an SSN word
    ['ssn_536-22-8726', '536-22-8726'],
    ['ssn-536-22-8726.pdf', '536-22-8726'],
    ['ssn/536228726', '536228726'],
    ['SSN#536-22-8726', '536-22-8726'],
    ['ssn=536-22-8726', '536-22-8726'],
    ['id:536-22-8726', '536-22-8726'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it.each([
    '000-12-3456',
    '666-12-3456',
    '900-12-3456',
    '536-00-8726',
    '536-22-0000',
    '123-45-6789',
    '078-05-1120',
    '111-11-1111',
    '536228726',
    '536 22 8726',
    '536-22 8726',
    'a536-22-8726',
    '1536-22-8726',
    'SKU-536-22-8726',
    'part_536-22-8726',
    '/files/536-22-8726.pdf',
    '536-22-8726x',
    '1.536-22-8726',
    '12/536-22-8726',
    '536-22-87261',
    '536-22-8726-1',
    '+536-22-8726',
    'ssn 536-22-8726٣',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });

  it.each([
    ['536228726', true],
    ['772345678', true],
    ['899991234', true],
    ['900123456', false],
    ['987654320', false],
  ])('ssnValid(%s) = %s', (digits, valid) => {
    expect(ssnValid(digits)).toBe(valid);
  });
});
