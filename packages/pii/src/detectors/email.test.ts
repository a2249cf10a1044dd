import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'EMAIL_ADDRESS')
    .map((d) => text.slice(d.start, d.end));

describe('EMAIL_ADDRESS', () => {
  it.each([
    ['Contact me at john.doe@example.com.', 'john.doe@example.com'],
    ['first.last+tag@sub.example.co.uk wrote', 'first.last+tag@sub.example.co.uk'],
    ['(jane_doe-1@example.org)', 'jane_doe-1@example.org'],
    ['mailto:ops@example.io', 'ops@example.io'],
    ['josé@correo.es', 'josé@correo.es'],
    ['user@bücher.de', 'user@bücher.de'],
    ['user@xn--bcher-kva.ch', 'user@xn--bcher-kva.ch'],
    ['邮箱：john@example.com。', 'john@example.com'],
    ['电子邮件john@example.com是我的', 'john@example.com'],
    ['Ünïcödé before: test@example.com, after', 'test@example.com'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it.each([
    'user@localhost',
    'a@b',
    'john@example',
    'https://user@example.com/path',
    'john..doe@example.com',
    '.john@example.com',
    'john.@example.com',
    'name at example dot com',
    'follow @handle on social',
    'john@example.c0m',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });

  it('reports UTF-16 offsets around astral characters', () => {
    const text = '😀😀 a@example.com';
    const [d] = engine.detect(text);
    expect(d?.start).toBe(5);
    expect(text.slice(d?.start, d?.end)).toBe('a@example.com');
  });
});
