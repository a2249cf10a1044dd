// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these are configuration texts with ${VAR}, not templates
import { describe, expect, it } from 'vitest';
import { expandVariables } from './env.ts';

describe('expandVariables', () => {
  it.each([
    ['${A}', { A: 'x' }, 'x'],
    ['${A}', {}, ''],
    ['${A:-fallback}', {}, 'fallback'],
    ['${A:-fallback}', { A: '' }, 'fallback'],
    ['${A:-fallback}', { A: 'set' }, 'set'],
    ['pre-${A}-${B:-b}-post', { A: 'a' }, 'pre-a-b-post'],
    ['$A and ${1A} stay', { A: 'x' }, '$A and ${1A} stay'],
  ])('%s with %j is %j', (text, env, expected) => {
    expect(expandVariables(text, env)).toBe(expected);
  });
});
