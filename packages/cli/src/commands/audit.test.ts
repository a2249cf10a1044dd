import { describe, expect, it } from 'vitest';
import { formatPrincipal, recordQuery } from './audit.ts';

describe('the PRINCIPAL column and --principal', () => {
  it.each([
    [undefined, '-'],
    [{ type: 'user', id: 'alice' }, 'user:alice'],
    [{ type: 'service', id: 'bot' }, 'service:bot'],
    [{ type: 'anonymous' }, 'anonymous (no id)'],
  ])('shows %j as %s', (principal, cell) => {
    expect(formatPrincipal(principal)).toBe(cell);
  });

  it.each([
    ['alice', 'alice'],
    ['user:alice', 'alice'],
    ['service:ci:bot', 'ci:bot'],
    ['team:x', 'team:x'],
  ])('sends --principal %s as the id %s', (given, id) => {
    expect(recordQuery({ principal: given }).get('principal')).toBe(id);
  });
});

describe('recordQuery', () => {
  it('maps the flags to the audit API parameters', () => {
    expect(
      recordQuery({
        trace: 'ab'.repeat(16),
        since: '10m',
        until: '2025-01-31',
        limit: '5',
      }).toString(),
    ).toBe(`traceId=${'ab'.repeat(16)}&since=10m&until=2025-01-31&limit=5`);
  });
});
