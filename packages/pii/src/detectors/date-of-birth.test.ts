import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';
import { hasPhraseCue, plausibleDate } from './date-of-birth.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'DATE_OF_BIRTH')
    .map((d) => text.slice(d.start, d.end));

describe('DATE_OF_BIRTH', () => {
  it.each([
    ['She was born on 2/8/1935. Her maiden name', '2/8/1935'],
    ['DOB: 1985-03-14', '1985-03-14'],
    ['D.O.B. 14.03.1985', '14.03.1985'],
    ['Date of birth: 14 March 1985', '14 March 1985'],
    ["Please tell me your date of birth. It's 6/24/1991", '6/24/1991'],
    ['my birthday is March 14, 1985', 'March 14, 1985'],
    ['born 31st of Dec 1999 in Lyon', '31st of Dec 1999'],
    ['geboren am 01.02.1970', '01.02.1970'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it.each([
    'Meeting on 14 March 2024',
    'Delivery 2024-03-12',
    'born on 31/31/1990',
    'DOB: 2/30/1990',
    'firstborn 1/2/1990',
    'born in 1990',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });

  it.each([
    ['2024-02-29', true],
    ['2023-02-29', false],
    ['12/31/1999', true],
    ['31/12/1999', true],
    ['13/13/1999', false],
  ])('plausibleDate(%s) = %s', (date, ok) => {
    expect(plausibleDate(date)).toBe(ok);
  });
});

describe('the birth phrase cue', () => {
  it.each([
    'born',
    'BORN',
    'reborn',
    'Birthday',
    'DoB',
    'adobe',
    'D.O.B',
    'd.o.b',
    'Geboren',
    'bor n',
    'd.ob',
    'do.b',
    'b',
    'B',
    'bornbirth',
    'ßorn',
    '\u212aborn',
    '',
    'no cue here',
  ])('%j as /born|birth|dob|d\\.o\\.b|geboren/i', (text) => {
    expect(hasPhraseCue(text)).toBe(/born|birth|dob|d\.o\.b|geboren/i.test(text));
  });
});
