import { describe, expect, it } from 'vitest';
import { createPiiEngine, hashValue, maskValue, PiiError, type TokenPair } from './index.ts';

const KEY = 'k'.repeat(32);

describe('strategies', () => {
  const text = 'Mail a@example.com, card 4242-4242-4242-4242.';

  it('redact → [TYPE]', () => {
    const r = createPiiEngine().transformText(text);
    expect(r.text).toBe('Mail [EMAIL_ADDRESS], card [CREDIT_CARD].');
    expect(r.counts).toEqual({ EMAIL_ADDRESS: 1, CREDIT_CARD: 1 });
    expect(r.changed).toBe(true);
    expect(r.findings.map((f) => [f.type, f.start, f.end, f.strategy])).toEqual([
      ['EMAIL_ADDRESS', 5, 18, 'redact'],
      ['CREDIT_CARD', 25, 44, 'redact'],
    ]);
  });

  it('mask → keeps the last N characters and the separators', () => {
    const e = createPiiEngine({ config: { defaultStrategy: 'mask' } });
    expect(e.transformText(text).text).toBe('Mail *@******e.com, card ****-****-****-4242.');
  });

  it.each([
    ['4242-4242-4242-4242', 4, '****-****-****-4242'],
    ['4242424242424242', 2, '**************42'],
    ['abc12', 4, '***12'],
    ['ab', 4, '*b'],
    ['+1 (212) 736-5000', 4, '+* (***) ***-5000'],
    ['x', 4, '*'],
  ])('maskValue(%j, %i) = %j', (value, keep, want) => {
    expect(maskValue(value, keep)).toBe(want);
  });

  it('hash → <TYPE:8 hex>, stable for one key, different across keys', () => {
    const e1 = createPiiEngine({ config: { defaultStrategy: 'hash' }, hmacKey: KEY });
    const e2 = createPiiEngine({ config: { defaultStrategy: 'hash' }, hmacKey: 'x'.repeat(32) });
    const a = e1.transformText('a@example.com').text;
    expect(a).toMatch(/^<EMAIL_ADDRESS:[0-9a-f]{8}>$/);
    expect(e1.transformText('mail a@example.com').text).toBe(`mail ${a}`);
    expect(e2.transformText('a@example.com').text).not.toBe(a);
  });

  it('hash is computed on the canonical form', () => {
    const key = Buffer.from(KEY);
    expect(hashValue('CREDIT_CARD', '4111 1111 1111 1111', key)).toBe(
      hashValue('CREDIT_CARD', '4111-1111-1111-1111', key),
    );
    expect(hashValue('EMAIL_ADDRESS', 'A@Example.com', key)).toBe(
      hashValue('EMAIL_ADDRESS', 'a@example.com', key),
    );
    expect(hashValue('EMAIL_ADDRESS', 'a@example.com', key)).not.toBe(
      hashValue('PERSON', 'a@example.com', key),
    );
  });

  it('hash without a key of 16 bytes is refused at construction', () => {
    const build = (hmacKey?: string) => () =>
      createPiiEngine({
        config: { tools: { t: { entities: { PERSON: { strategy: 'hash' } } } } },
        hmacKey,
      });
    expect(build()).toThrow(PiiError);
    expect(build('short')).toThrow(expect.objectContaining({ code: 'PII_HMAC_KEY_INVALID' }));
    expect(build(KEY)).not.toThrow();
  });

  it('tokenize → one token per distinct value, reported once to the tokenizer', () => {
    const pairs: TokenPair[] = [];
    let n = 0;
    const e = createPiiEngine({ config: { defaultStrategy: 'tokenize' } });
    const r = e.transformText('a@example.com, b@example.com, a@example.com', {
      tokenizer: {
        onToken: (p) => pairs.push(p),
        mintId: () => String(++n).padStart(12, '0'),
      },
    });
    expect(r.text).toBe(
      '<<EMAIL_ADDRESS:tok_000000000001>>, <<EMAIL_ADDRESS:tok_000000000002>>, <<EMAIL_ADDRESS:tok_000000000001>>',
    );
    expect(pairs).toEqual([
      {
        type: 'EMAIL_ADDRESS',
        original: 'a@example.com',
        token: '<<EMAIL_ADDRESS:tok_000000000001>>',
      },
      {
        type: 'EMAIL_ADDRESS',
        original: 'b@example.com',
        token: '<<EMAIL_ADDRESS:tok_000000000002>>',
      },
    ]);
    expect(r.counts).toEqual({ EMAIL_ADDRESS: 3 });
  });

  it('tokenize mints random 12-character ids by default', () => {
    const e = createPiiEngine({ config: { defaultStrategy: 'tokenize' } });
    const onToken = () => {};
    const a = e.transformText('a@example.com', { tokenizer: { onToken } }).text;
    const b = e.transformText('a@example.com', { tokenizer: { onToken } }).text;
    expect(a).toMatch(/^<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>$/);
    expect(a).not.toBe(b);
  });

  it('tokenize without a tokenizer is an error, a bad id too', () => {
    const e = createPiiEngine({ config: { defaultStrategy: 'tokenize' } });
    expect(() => e.transformText('a@example.com')).toThrow(
      expect.objectContaining({ code: 'PII_TOKENIZER_MISSING' }),
    );
    expect(() =>
      e.transformText('a@example.com', { tokenizer: { onToken() {}, mintId: () => 'BAD' } }),
    ).toThrow(RangeError);
  });

  it('block → redacted and reported in blocked', () => {
    const e = createPiiEngine({ config: { entities: { CREDIT_CARD: { strategy: 'block' } } } });
    const r = e.transformText(text);
    expect(r.text).toBe('Mail [EMAIL_ADDRESS], card [CREDIT_CARD].');
    expect(r.blocked.map((f) => [f.type, f.strategy])).toEqual([['CREDIT_CARD', 'block']]);
  });

  it('per-tool overrides change the strategy for that tool only', () => {
    const e = createPiiEngine({
      config: {
        tools: { crm: { defaultStrategy: 'mask', entities: { EMAIL_ADDRESS: { keepLast: 3 } } } },
      },
    });
    expect(e.transformText('a@example.com', { tool: 'crm' }).text).toBe('*@*******.com');
    expect(e.transformText('a@example.com', { tool: 'other' }).text).toBe('[EMAIL_ADDRESS]');
  });

  it('counts never carry values', () => {
    const r = createPiiEngine().transformText(text);
    expect(JSON.stringify([r.counts, r.findings])).not.toContain('example');
  });
});
