import { describe, expect, it } from 'vitest';
import { storableJson, storableText, storableValue } from './storable.ts';

describe('storableText', () => {
  it.each([
    ['plain text', 'get_weather', 'get_weather'],
    ['NUL', 'a\u0000b\u0000', 'a\ufffdb\ufffd'],
    ['a lone high surrogate', 'a\ud83d', 'a\ufffd'],
    ['a lone low surrogate', '\ude00a', '\ufffda'],
    ['a high surrogate before another high one', '\ud83d\ud83d\ude00', '\ufffd\u{1F600}'],
    ['two lone low surrogates', '\ude00\ude00', '\ufffd\ufffd'],
    ['a surrogate pair, kept', 'a\u{1F600}b', 'a\u{1F600}b'],
    [
      'other control characters and noncharacters, kept',
      '\u0001\u001f\u007f\uffff',
      '\u0001\u001f\u007f\uffff',
    ],
  ])('%s', (_case, text, stored) => {
    expect(storableText(text)).toBe(stored);
  });
});

describe('storableValue', () => {
  it('makes every string and key storable, at any depth, and leaves the original alone', () => {
    const value = { 'k\u0000': ['v\ud800', 1, null, true, { deep: 'x\u0000' }], n: 2 };
    expect(storableValue(value)).toEqual({
      'k\ufffd': ['v\ufffd', 1, null, true, { deep: 'x\ufffd' }],
      n: 2,
    });
    expect(value['k\u0000'][0]).toBe('v\ud800');
  });
});

describe('storableJson', () => {
  it.each([
    ['nothing to replace', { a: 'b' }, '{"a":"b"}'],
    ['NUL in a key', { 'a\u0000': 1 }, '{"a\ufffd":1}'],
    ['a lone surrogate', ['\udbff'], '["\ufffd"]'],
    // An escaped backslash before `u0000` is text, not NUL: the walk runs and changes nothing.
    ['a literal backslash-u0000', ['\\u0000'], '["\\\\u0000"]'],
  ])('%s', (_case, value, json) => {
    expect(storableJson(value)).toBe(json);
  });
});
