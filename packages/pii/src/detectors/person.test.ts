import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'PERSON')
    .map((d) => text.slice(d.start, d.end));

describe('PERSON', () => {
  it.each([
    ['Name: Toshimi Arata', 'Toshimi Arata'],
    ['Dr. Jane Q. Doe will see you', 'Jane Q. Doe'],
    ["Mrs. O'Brien called", "O'Brien"],
    ['My name is Chen Wei.', 'Chen Wei'],
    ['Prof Müller-Lüdenscheidt approved', 'Müller-Lüdenscheidt'],
    ["Dr. Smith's office", 'Smith'],
    ['Name: Kamila Červinková', 'Kamila Červinková'],
    ['Professor Ada Lovelace', 'Ada Lovelace'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it.each([
    'Capitalized words like Wisdom and Discipline are often mistaken with names.',
    'We met at 12 Oak Dr Springfield yesterday.',
    'Name: required',
    'File name: Report.pdf',
    'Dr. The results',
    'name: leone mazzi',
    'Excuse me, Sir bot',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });
});
