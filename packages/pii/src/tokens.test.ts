import { describe, expect, it } from 'vitest';
import {
  collectTokens,
  createPiiEngine,
  findTokens,
  formatToken,
  restoreTokens,
  restoreTokensInValue,
} from './index.ts';

const A = formatToken('EMAIL_ADDRESS', 'aaaaaaaaaaaa');
const B = formatToken('PHONE_NUMBER', 'bbbbbbbbbbbb');
const vault = new Map([
  [A, 'a@example.com'],
  [B, '+1 212-736-5000'],
]);

describe('tokens', () => {
  it('finds tokens with their offsets', () => {
    const text = `to ${A} and ${B}; not <<EMAIL_ADDRESS:tok_short>>`;
    expect(findTokens(text)).toEqual([
      { token: A, type: 'EMAIL_ADDRESS', id: 'aaaaaaaaaaaa', start: 3, end: 3 + A.length },
      {
        token: B,
        type: 'PHONE_NUMBER',
        id: 'bbbbbbbbbbbb',
        start: 8 + A.length,
        end: 8 + A.length + B.length,
      },
    ]);
    expect(findTokens('no tokens')).toEqual([]);
  });

  it('restores known tokens and leaves unknown ones', () => {
    const unknown = formatToken('EMAIL_ADDRESS', 'cccccccccccc');
    const r = restoreTokens(`${A}, ${unknown}, ${B}`, (t) => vault.get(t));
    expect(r).toEqual({
      text: `a@example.com, ${unknown}, +1 212-736-5000`,
      restored: 2,
      unknown: 1,
    });
    expect(restoreTokens(unknown, () => undefined).text).toBe(unknown);
  });

  it('collects and restores tokens across a JSON value (copy-on-write)', () => {
    const args = { to: A, cc: [B, 'plain'], n: 3, nested: { keep: 'x' } };
    expect(collectTokens(args).sort()).toEqual([A, B].sort());
    const r = restoreTokensInValue(args, (t) => vault.get(t));
    expect(r.value).toEqual({
      to: 'a@example.com',
      cc: ['+1 212-736-5000', 'plain'],
      n: 3,
      nested: { keep: 'x' },
    });
    expect(r.value.nested).toBe(args.nested);
    expect(r.restored).toBe(2);
    const same = { a: 'nothing here' };
    expect(restoreTokensInValue(same, (t) => vault.get(t)).value).toBe(same);
  });

  it('round-trips through tokenize', () => {
    const store = new Map<string, string>();
    const e = createPiiEngine({ config: { defaultStrategy: 'tokenize' } });
    const out = e.transformValue(
      { content: [{ type: 'text', text: 'Reach a@example.com or +1 212-736-5000' }] },
      { tokenizer: { onToken: (p) => store.set(p.token, p.original) } },
    );
    const text = out.value.content[0]?.text ?? '';
    expect(text).not.toContain('example');
    expect(restoreTokens(text, (t) => store.get(t)).text).toBe(
      'Reach a@example.com or +1 212-736-5000',
    );
  });
});
