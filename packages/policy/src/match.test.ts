import type { Principal } from '@fleet/core';
import { describe, expect, it } from 'vitest';
import {
  compileEventMatcher,
  compileGlob,
  compileGlobs,
  compilePrincipalMatcher,
  isValidPrincipalPattern,
} from './match.ts';

describe('name globs', () => {
  it.each([
    ['echo', 'echo', true],
    ['echo', 'echo2', false],
    ['*', '', true],
    ['*', 'anything/at:all', true],
    ['fs_write_*', 'fs_write_file', true],
    ['fs_write_*', 'fs_write_', true],
    ['fs_write_*', 'fs_read_file', false],
    ['*_delete', 'file_delete', true],
    ['*_delete', 'file_delete_all', false],
    ['*delete*', 'delete', true],
    ['*delete*', 'bulk_delete_rows', true],
    ['*delete*', 'Delete', false],
    ['a*b', 'ab', true],
    ['a*b', 'axxb', true],
    ['a*b', 'axxbc', false],
    ['a*b*c', 'abc', true],
    ['a*b*c', 'a-b-b-c', true],
    ['a*b*c', 'ac', false],
    ['a*b*b', 'ab', false],
    ['a*bc*cd', 'abcd', false],
    ['a*bc*cd', 'abccd', true],
    ['file:///etc/*', 'file:///etc/passwd', true],
    ['file:///etc/*', 'file:///home/x', false],
    ['**', 'x', true],
  ])('%s ~ %j: %s', (pattern, name, want) => {
    expect(compileGlob(pattern)(name)).toBe(want);
    expect(compileGlobs([pattern])(name)).toBe(want);
  });

  it.each([
    [['a', 'b'], 'b', true],
    [['a', 'b'], 'c', false],
    [['a', 'x*'], 'xy', true],
    [['a', 'x*', '*z'], 'yz', true],
    [['a', 'x*', '*z'], 'y', false],
  ])('any of %j ~ %j: %s', (patterns, name, want) => {
    expect(compileGlobs(patterns)(name)).toBe(want);
  });

  it('matches a pathological pattern in linear time', () => {
    const pattern = `${'*a'.repeat(50)}*b`;
    const started = performance.now();
    expect(compileGlob(pattern)('a'.repeat(10_000))).toBe(false);
    expect(performance.now() - started).toBeLessThan(100);
  });
});

describe('event matchers (core semantics)', () => {
  it.each([
    [['tools/call'], 'tools/call', true],
    [['tools/call'], 'tools/list', false],
    [['*'], 'anything', true],
    [['tools/*'], 'tools/call', true],
    [['tools/*'], 'tools', false],
    [['prompts/get', 'tools/*'], 'tools/list', true],
    [['prompts/get', 'resources/read'], 'resources/read', true],
    [['prompts/get', 'resources/read'], 'tools/call', false],
  ])('%j matches %s: %s', (patterns, event, want) => {
    expect(compileEventMatcher(patterns)(event)).toBe(want);
  });
});

describe('principal patterns', () => {
  const alice: Principal = { type: 'user', id: 'alice' };
  const ci: Principal = { type: 'service', id: 'ci-runner' };
  const nobody: Principal = { type: 'anonymous' };

  it.each([
    ['user', alice, true],
    ['user', ci, false],
    ['user:alice', alice, true],
    ['user:bob', alice, false],
    ['service:ci-*', ci, true],
    ['*:ci-*', ci, true],
    ['*', nobody, true],
    ['anonymous', nobody, true],
    ['user:*', { type: 'user' }, true],
    ['user:a*', { type: 'user' }, false],
  ] as const)('%s ~ %j: %s', (pattern, principal, want) => {
    expect(compilePrincipalMatcher([pattern])(principal)).toBe(want);
  });

  it.each([
    ['user', true],
    ['service:ci-*', true],
    ['*', true],
    ['*:x', true],
    ['admin', false],
    ['user:', false],
    ['', false],
  ])('isValidPrincipalPattern(%j) = %s', (pattern, want) => {
    expect(isValidPrincipalPattern(pattern)).toBe(want);
  });
});
