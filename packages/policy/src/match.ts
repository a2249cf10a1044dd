/**
 * Precompiled matchers for the cheap parts of a rule: events, names and principals. Each
 * list of patterns compiles once per load into one closure, so evaluating a rule that does
 * not apply costs a string comparison or two and allocates nothing.
 */
import { matchesEvent, type Principal } from '@fleet/core';

/** Tests a concrete value against the compiled patterns. */
export type Matcher<T> = (value: T) => boolean;

const always = (): boolean => true;

/** Compiles hook-style event patterns (exact, `"*"`, `"prefix/*"`); matching is core's. */
export function compileEventMatcher(patterns: readonly string[]): Matcher<string> {
  if (patterns.includes('*')) return always;
  const exact = patterns.filter((p) => !p.endsWith('/*'));
  const globs = patterns.filter((p) => p.endsWith('/*'));
  if (globs.length === 0 && exact.length === 1) {
    const only = exact[0];
    return (event) => event === only;
  }
  const exactSet = new Set(exact);
  if (globs.length === 0) return (event) => exactSet.has(event);
  return (event) => {
    if (exactSet.has(event)) return true;
    for (const glob of globs) if (matchesEvent(glob, event)) return true;
    return false;
  };
}

/**
 * Compiles one name glob: `*` matches any run of characters (also `/` and the empty run);
 * every other character matches itself, case-sensitively.
 */
export function compileGlob(pattern: string): Matcher<string> {
  if (pattern === '*') return always;
  const parts = pattern.split('*');
  if (parts.length === 1) return (name) => name === pattern;
  const first = parts[0] ?? '';
  const last = parts[parts.length - 1] ?? '';
  if (parts.length === 2) {
    if (first === '') return (name) => name.endsWith(last);
    if (last === '') return (name) => name.startsWith(first);
    const min = first.length + last.length;
    return (name) => name.length >= min && name.startsWith(first) && name.endsWith(last);
  }
  const middle = parts.slice(1, -1).filter((p) => p !== '');
  if (first === '' && last === '' && middle.length === 1) {
    const needle = middle[0] ?? '';
    return (name) => name.includes(needle);
  }
  // Leftmost matching of each middle part is enough for `*`-only globs, and it is linear:
  // no backtracking, whatever the pattern.
  const min = first.length + last.length + middle.reduce((n, p) => n + p.length, 0);
  return (name) => {
    if (name.length < min || !name.startsWith(first) || !name.endsWith(last)) return false;
    let at = first.length;
    const end = name.length - last.length;
    for (const part of middle) {
      const found = name.indexOf(part, at);
      if (found === -1 || found + part.length > end) return false;
      at = found + part.length;
    }
    return true;
  };
}

/** Compiles a list of name globs; a name matches when any glob does. */
export function compileGlobs(patterns: readonly string[]): Matcher<string> {
  if (patterns.includes('*')) return always;
  const exact = new Set(patterns.filter((p) => !p.includes('*')));
  const globs = patterns.filter((p) => p.includes('*')).map(compileGlob);
  if (globs.length === 0) {
    if (exact.size === 1) {
      const [only] = exact;
      return (name) => name === only;
    }
    return (name) => exact.has(name);
  }
  if (exact.size === 0 && globs.length === 1) return globs[0] ?? always;
  return (name) => {
    if (exact.has(name)) return true;
    for (const glob of globs) if (glob(name)) return true;
    return false;
  };
}

/** The principal types a pattern may name (`*` is any). */
export const PRINCIPAL_TYPES = ['user', 'service', 'anonymous'] as const;

/**
 * True when `pattern` is a principal pattern: a type (`user`, `service`, `anonymous`, `*`),
 * optionally followed by `:` and a glob on the principal id (`service:ci-*`).
 */
export function isValidPrincipalPattern(pattern: string): boolean {
  const colon = pattern.indexOf(':');
  const type = colon === -1 ? pattern : pattern.slice(0, colon);
  if (type !== '*' && !(PRINCIPAL_TYPES as readonly string[]).includes(type)) return false;
  return colon === -1 || colon < pattern.length - 1;
}

/** Compiles principal patterns; an absent principal id matches an id glob as `""`. */
export function compilePrincipalMatcher(patterns: readonly string[]): Matcher<Principal> {
  const tests = patterns.map((pattern): Matcher<Principal> => {
    const colon = pattern.indexOf(':');
    const type = colon === -1 ? pattern : pattern.slice(0, colon);
    const id = colon === -1 ? undefined : compileGlob(pattern.slice(colon + 1));
    if (id === undefined) return type === '*' ? always : (p) => p.type === type;
    return type === '*' ? (p) => id(p.id ?? '') : (p) => p.type === type && id(p.id ?? '');
  });
  if (tests.length === 1) return tests[0] ?? always;
  return (principal) => {
    for (const test of tests) if (test(principal)) return true;
    return false;
  };
}
