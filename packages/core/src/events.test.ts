import { describe, expect, it } from 'vitest';
import { isNeverIntercepted, isValidEventPattern, matchesEvent, patternCovers } from './index.ts';

describe('event matching', () => {
  it.each([
    ['tools/call', 'tools/call', true],
    ['tools/call', 'tools/list', false],
    ['*', 'anything/at-all', true],
    ['tools/*', 'tools/call', true],
    ['tools/*', 'tools/list', true],
    ['tools/*', 'tools', false],
    ['tools/*', 'toolsx/call', false],
    ['tools/*', 'prompts/get', false],
    ['resources/*', 'resources/templates/list', true],
  ])('%s matches %s: %s', (pattern, event, want) => {
    expect(matchesEvent(pattern, event)).toBe(want);
  });

  it.each([
    ['*', 'tools/*', true],
    ['*', '*', true],
    ['tools/*', '*', false],
    ['tools/*', 'tools/call', true],
    ['tools/*', 'tools/x/*', true],
    ['tools/x/*', 'tools/*', false],
    ['tools/call', 'tools/call', true],
    ['tools/call', 'tools/*', false],
    ['tools/call', 'tools/list', false],
  ])('%s covers %s: %s', (outer, inner, want) => {
    expect(patternCovers(outer, inner)).toBe(want);
  });

  it.each([
    ['initialize', true],
    ['ping', true],
    ['notifications/initialized', true],
    ['notifications/cancelled', true],
    ['interceptors/list', true],
    ['interceptor/invoke', true],
    ['tools/call', false],
    ['tools/list', false],
    ['completion/complete', false],
    ['vendor/custom', false],
  ])('isNeverIntercepted(%s) = %s', (method, want) => {
    expect(isNeverIntercepted(method)).toBe(want);
  });

  it.each([
    ['*', true],
    ['tools/call', true],
    ['tools/*', true],
    ['', false],
    ['tools*', false],
    ['*/call', false],
    ['/*', false],
    ['tools /call', false],
  ])('isValidEventPattern(%j) = %s', (pattern, want) => {
    expect(isValidEventPattern(pattern)).toBe(want);
  });
});
