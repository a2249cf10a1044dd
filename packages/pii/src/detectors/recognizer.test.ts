import { describe, expect, it } from 'vitest';
import { createPiiEngine, type EntityType } from '../index.ts';
import { forEachMatch, forEachMatchAt, indexesOf, matchIndexes, memoize } from './recognizer.ts';

const spans = (run: (fn: (m: RegExpExecArray) => void) => void) => {
  const out: string[] = [];
  run((m) => out.push(`${m.index}:${m[0]}`));
  return out;
};

describe('forEachMatchAt', () => {
  const global = /(?<![a-z])ab+(?:-ab+)*/g;
  const sticky = /(?<![a-z])ab+(?:-ab+)*/y;
  const every = (text: string) => Array.from({ length: text.length }, (_, i) => i);

  it.each(['ab abb-ab xab ab-', '', 'abab ab-abbb-ab', 'é ab 电话ab-ab号 ab', 'no match here'])(
    'finds what a global scan finds in %j when tried everywhere',
    (text) => {
      expect(spans((fn) => forEachMatchAt(sticky, text, every(text), fn))).toEqual(
        spans((fn) => forEachMatch(global, text, fn)),
      );
    },
  );

  it('skips starts inside the previous match, as a global scan does', () => {
    // `ab-ab` consumes the second `ab`: it is not reported on its own.
    expect(spans((fn) => forEachMatchAt(sticky, 'ab-ab ab', [0, 3, 6], fn))).toEqual([
      '0:ab-ab',
      '6:ab',
    ]);
  });

  it('tries only the given starts', () => {
    expect(spans((fn) => forEachMatchAt(sticky, 'ab ab ab', [3], fn))).toEqual(['3:ab']);
    expect(spans((fn) => forEachMatchAt(sticky, 'ab ab ab', [], fn))).toEqual([]);
  });
});

describe('indexesOf', () => {
  it.each([
    ['xox xoxo', ['xox'], 0, [0, 4]],
    ['aaaa', ['aa'], 0, [0, 1, 2]],
    ['k_live_ sk_test_ _live_', ['_live_', '_test_'], 1, [0, 9, 16]],
    ['_live_ at the start', ['_live_'], 1, []],
    ['電話 eyJ… «eyJ»', ['yJ'], 1, [3, 9]],
    ['nothing', ['AKIA', 'ghp_'], 0, []],
  ])('%j %j back %i → %j', (text, literals, back, want) => {
    expect(indexesOf(text, literals, back)).toEqual(want);
  });
});

describe('matchIndexes', () => {
  it('reports overlapping matches', () => {
    expect(matchIndexes(/aba/gi, 'ABABA aba')).toEqual([0, 2, 6]);
  });
});

describe('memoize', () => {
  it('computes each value once, falsy results included', () => {
    const calls: string[] = [];
    const f = memoize((v) => {
      calls.push(v);
      return v.length > 1 ? v.length : undefined;
    });
    expect([f('ab'), f('a'), f('ab'), f('a')]).toEqual([2, undefined, 2, undefined]);
    expect(calls).toEqual(['ab', 'a']);
  });

  it('is bounded', () => {
    let calls = 0;
    const f = memoize(() => ++calls, 2);
    f('a');
    f('b');
    f('c'); // full: cleared, then c cached
    f('a');
    expect(calls).toBe(4);
  });
});

// The recognizers below try their pattern only at anchors found cheaply (indexOf, an operator,
// a colon): the values must still be found at the edges of the text and next to other scripts.
const engine = createPiiEngine();
const found = (text: string, type: EntityType) =>
  engine
    .detect(text)
    .filter((d) => d.type === type)
    .map((d) => text.slice(d.start, d.end));
const chars = (n: number) => {
  const a = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let s = '';
  for (let i = 0; i < n; i++) s += a[(i * 7 + 3) % a.length];
  return s;
};
const pat = `${'github'}_pat_${chars(22)}`;
const glpat = `${'glpat'}-${chars(20)}`;
const stripe = `${'rk'}_${'test'}_${chars(24)}`;
const b64url = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const jwt = `${b64url({ alg: 'HS256' })}.${b64url({ sub: '1' })}.${chars(43)}`;

describe('anchored recognizers', () => {
  it.each<[string, EntityType, string[]]>([
    [pat, 'GITHUB_TOKEN', [pat]],
    [`令牌${pat}。`, 'GITHUB_TOKEN', [pat]],
    [`x${pat}`, 'GITHUB_TOKEN', []],
    [`«${glpat}»`, 'GITLAB_TOKEN', [glpat]],
    [`${stripe}`, 'STRIPE_KEY', [stripe]],
    [`s${stripe}`, 'STRIPE_KEY', []],
    [`密钥：${jwt}`, 'JWT', [jwt]],
    [`a.${jwt}`, 'JWT', []],
    ['client_secret = "k9Fh2!xQ"', 'SECRET', ['k9Fh2!xQ']],
    ["pwd:'hunter2!'", 'SECRET', ['hunter2!']],
    ['REFRESH_TOKEN\t=>\tr3fr3sh-t0k3n', 'SECRET', ['r3fr3sh-t0k3n']],
    ['Passwort: égal, PASSWORD := Zürich#2024', 'SECRET', ['Zürich#2024']],
    ['bypass=abc12345', 'SECRET', []],
    ['next_page_token: abc12345', 'SECRET', []],
    ['Patient :  Ana María López', 'PERSON', ['Ana María López']],
    ['患者 Customer:Jean-Luc Picard', 'PERSON', ['Jean-Luc Picard']],
    ['My \t name is Chen Wei', 'PERSON', ['Chen Wei']],
    ['Prof. Müller', 'PERSON', ['Müller']],
    ['filename: Report', 'PERSON', []],
    ['DrMüller', 'PERSON', []],
  ])('%j → %s %j', (text, type, want) => {
    expect(found(text, type)).toEqual(want);
  });
});
