import { describe, expect, it } from 'vitest';
import { createPiiScrubber } from './scrubber.ts';

describe('createPiiScrubber', () => {
  const scrub = createPiiScrubber();
  it.each([
    ['mail ada.lovelace@example.com now', 'ada.lovelace@example.com'],
    ['card 4111 1111 1111 1111', '4111 1111 1111 1111'],
    ['key AKIAIOSFODNN7EXAMPLE', 'AKIAIOSFODNN7EXAMPLE'],
    ['iban GB82 WEST 1234 5698 7654 32', 'GB82 WEST 1234 5698 7654 32'],
  ])('removes the value from %j', (text, value) => {
    const out = scrub(text);
    expect(out).not.toContain(value);
    expect(out).toMatch(/\[[A-Z_]+\]/);
  });

  // The worker scrubs every record's event and method too: an ordinary one must stay as it is
  // for the `event` filter to find it.
  it.each([
    'initialize',
    'ping',
    'tools/call',
    'tools/list',
    'prompts/get',
    'prompts/list',
    'resources/read',
    'resources/list',
    'resources/templates/list',
    'resources/subscribe',
    'resources/unsubscribe',
    'completion/complete',
    'logging/setLevel',
    'sampling/createMessage',
    'elicitation/create',
    'roots/list',
    'notifications/progress',
    'notifications/resources/updated',
  ])('leaves the MCP method %s alone', (method) => {
    expect(scrub(method)).toBe(method);
  });

  it('redacts PII in a method a client made up', () => {
    expect(scrub('tools/bob@example.com')).not.toContain('bob@example.com');
  });

  it('leaves text without PII alone', () => {
    expect(scrub('denied by rule "big-transfers"')).toBe('denied by rule "big-transfers"');
  });
});
