import { describe, expect, it } from 'vitest';
import { keywordEnding, OPERATOR } from './assignment.ts';
import { codeAt } from './chars.ts';
import { CARD_RUN } from './credit-card.ts';
import { ADDRESS, addressStarts } from './crypto-wallet.ts';
import { gapLength, groupsInRuns, scanDigits } from './digits.ts';
import { IPV4 } from './ip.ts';
import { MAC, macStarts } from './mac.ts';
import { PHONE_RUN, runStarts } from './phone.ts';
import { forEachMatch, forEachMatchAt, TextScans } from './recognizer.ts';
import { SSN } from './us-ssn.ts';

/** Deterministic PRNG (mulberry32), so that a failure reproduces. */
function rng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Random digit-heavy texts: groups of digits among separators, letters and other scripts. */
function randomTexts(seed: number, count: number): string[] {
  const next = rng(seed);
  const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)] as T;
  const atoms = [
    ...'0123456789 -./()+#xX:,_@%'.split(''),
    '  ',
    ' - ',
    'ext',
    'ext.',
    'EXT ',
    'extension',
    '0x',
    'bc1',
    'BC1',
    'DE',
    'gb',
    'ab',
    'é',
    '电话',
    '٣',
    '\n',
    '\u0000',
    'aa:bb',
    'f0.',
    'aa:bb:cc:dd:ee:0f',
    '00-1A-2B-3C-4D-5E',
    '0a1b.2c3d.4e5f',
    '+44 (0)20 7946 0018',
    '4111 1111 1111 1111',
    '192.168.0.1',
    '1BoatSLRHtKNngkdXEeobR76b53LETtpyT',
  ];
  const hex = '0123456789abcdefABCDEF';
  return Array.from({ length: count }, () => {
    let text = '';
    const parts = 1 + Math.floor(next() * 24);
    for (let j = 0; j < parts; j++) {
      const r = next();
      if (r < 0.45) {
        const n = 1 + Math.floor(next() * 5);
        for (let k = 0; k < n; k++) text += String(Math.floor(next() * 10));
      } else if (r < 0.55) {
        for (let k = 0; k < 2 + Math.floor(next() * 3); k++) text += pick(hex.split(''));
      } else {
        text += pick(atoms);
      }
    }
    return text;
  });
}

const global = (re: RegExp) => new RegExp(re.source, re.flags.replace('y', 'g'));
const spans = (run: (fn: (m: RegExpExecArray) => void) => void) => {
  const out: string[] = [];
  run((m) => out.push(`${m.index}:${m[0]}`));
  return out;
};

describe('gapLength', () => {
  it.each([
    ['1-2', 1, 1],
    ['1.2', 1, 1],
    ['1/2', 1, 1],
    ['1 2', 1, 1],
    ['1 - 2', 1, 3],
    ['1 (2', 1, 2],
    ['1) 2', 1, 2],
    ['1#2', 1, 1],
    ['1 x 2', 1, 3],
    ['1X2', 1, 1],
    ['1 ext. 2', 1, 6],
    ['1 EXT 2', 1, 5],
    ['1 extension 2', 1, 11],
  ])('%j at %i → %i', (text, at, want) => {
    expect(gapLength(text, at)).toBe(want);
  });

  it.each([
    ['1--2', 1],
    ['1, 2', 1],
    ['1:2', 1],
    ['1e2', 1],
    ['1 Extension 2', 1],
    ['1 - x', 1],
    ['1 ', 1],
    ['1', 1],
    ['1 ٣', 1],
  ])('%j at %i is no gap', (text, at) => {
    expect(gapLength(text, at)).toBe(0);
  });
});

describe('scanDigits', () => {
  it('finds every digit group, at a digit after a non-digit', () => {
    const text = 'a1 22-333 电话13812345678号 x٣4 5';
    expect(scanDigits(text).groups).toEqual([1, 3, 6, 12, 27, 29]);
  });

  it('records the runs of 7 digits or 3 dots, with their digits and dots', () => {
    const text = 'call +1 (555) 010-9999 x12, ip 10.0.0.1, id 42, date 2024-01-31';
    const { groups, runs } = scanDigits(text);
    const run = (r: number) => {
      const [first = 0, end = 0, digits = 0, dots = 0] = runs.slice(4 * r, 4 * r + 4);
      return [text.slice(groups[first], groups[end - 1]), digits, dots];
    };
    expect(runs.length).toBe(12);
    // Each run as [from its first group to the start of its last group, digits, dots].
    expect(run(0)).toEqual(['1 (555) 010-9999 x', 13, 0]);
    expect(run(1)).toEqual(['10.0.0.', 5, 3]);
    expect(run(2)).toEqual(['2024-01-', 8, 0]);
  });

  it('does not join groups across other separators', () => {
    const { runs } = scanDigits('555,010,9999 12:30:45 1--234567');
    expect(runs).toEqual([]);
  });

  it('finds nothing in a text without ASCII digits', () => {
    expect(scanDigits('no digits here ٣٤٥ ٦٧٨').groups).toEqual([]);
    expect(scanDigits('')).toEqual({ groups: [], runs: [] });
  });

  it('groupsInRuns keeps the groups of qualifying runs, in order', () => {
    const scan = scanDigits('12 34 56 789 and 1.2.3.4 and 5551234');
    expect(groupsInRuns(scan, 7)).toEqual([0, 3, 6, 9, 29]);
    expect(groupsInRuns(scan, 8)).toEqual([0, 3, 6, 9]);
    expect(groupsInRuns(scan, 4, 3)).toEqual([17, 19, 21, 23]);
    expect(() => groupsInRuns(scan, 6)).toThrow(RangeError);
  });
});

describe('anchored patterns find what a global scan finds', () => {
  // Tried only at their anchors (in the digit runs that can hold a match the recognizer
  // keeps), the patterns must find the global scan's matches, less only matches with fewer
  // digits than the recognizer needs (which it rejects): those lie in runs of their own, so
  // skipping them changes nothing else.
  const texts = randomTexts(20_240_604, 4000);
  const digitRuns =
    (minDigits: number, minDots = 0) =>
    (text: string) =>
      groupsInRuns(new TextScans(text).digits, minDigits, minDots);
  const digitsIn = (s: string) => s.replace(/\D/g, '').length;
  it.each([
    ['phone', PHONE_RUN, (text: string) => runStarts(text, new TextScans(text)), 7],
    ['card', CARD_RUN, digitRuns(12), 12],
    ['SSN', SSN, digitRuns(9), 0],
    ['IPv4', IPV4, digitRuns(4, 3), 0],
    ['wallet', ADDRESS, (text: string) => addressStarts(text, new TextScans(text)), 0],
    ['MAC', MAC, (text: string) => macStarts(text, new TextScans(text)), 0],
  ] as const)('%s', (_name, sticky, starts, needs) => {
    const scan = global(sticky);
    let kept = 0;
    for (const text of texts) {
      const want = spans((fn) =>
        forEachMatch(scan, text, (m) => {
          if (digitsIn(m[0]) >= needs) fn(m);
        }),
      );
      const got = spans((fn) =>
        forEachMatchAt(sticky, text, starts(text), (m) => {
          if (digitsIn(m[0]) >= needs) fn(m);
        }),
      );
      kept += want.length;
      expect(got).toEqual(want);
    }
    expect(kept).toBeGreaterThan(20);
  });

  it('every operator after a keyword passes keywordEnding', () => {
    const next = rng(7);
    const words = ['password', 'PassWD', 'pwd', 'secret', 'api_key', 'apiKey', 'token', 'ID-TOKEN'];
    const more = ['client_secret', 'credentials', 'Credential', 'type', 'name', 'base', 'x'];
    const pool = [...words, ...more, ':', '=', ' ', '\t', '"', "'", ':=', '=>', 'é', '\n'];
    const scan = global(OPERATOR);
    let matched = 0;
    for (let i = 0; i < 3000; i++) {
      let text = '';
      for (let j = 0; j < 8; j++) text += pool[Math.floor(next() * pool.length)];
      forEachMatch(scan, text, (m) => {
        matched++;
        expect(keywordEnding(text, m.index)).toBe(true);
      });
    }
    expect(matched).toBeGreaterThan(100);
  });
});

describe('codeAt', () => {
  it('reads inside the text and gives -1 outside', () => {
    expect(codeAt('ab', 0)).toBe(97);
    expect(codeAt('ab', 1)).toBe(98);
    expect(codeAt('ab', -1)).toBe(-1);
    expect(codeAt('ab', 2)).toBe(-1);
  });
});

describe('TextScans', () => {
  it('computes each scan once and shares it', () => {
    const scans = new TextScans('a:b:c 12-34');
    expect(scans.indexesOf(':')).toEqual([1, 3]);
    expect(scans.indexesOf(':')).toBe(scans.indexesOf(':'));
    expect(scans.digits).toBe(scans.digits);
    expect(scans.digits.groups).toEqual([6, 9]);
  });
});
