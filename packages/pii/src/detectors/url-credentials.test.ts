import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'URL_CREDENTIALS')
    .map((d) => text.slice(d.start, d.end));

describe('URL_CREDENTIALS', () => {
  it.each([
    ['https://alice:s3cret@example.com/x', 'alice:s3cret'],
    ['DATABASE_URL=postgres://app:pw@db.internal:5432/prod', 'app:pw'],
    ['redis://:pw123@10.0.0.5:6379', ':pw123'],
    ['mongodb+srv://u:p%40ss@cluster0.example.net/app', 'u:p%40ss'],
    ['链接https://bob:hunter2@example.org', 'bob:hunter2'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it.each([
    'https://alice@example.com',
    'https://example.com/a:b@c',
    'https://alice:@example.com',
    'see https://alice:pw@ for details',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });
});
