import { describe, expect, it } from 'vitest';
import { isKnownMcpMethod, KNOWN_MCP_METHODS } from './methods.ts';
import { InterceptorMethod } from './wire.ts';

describe('isKnownMcpMethod', () => {
  it.each([
    ['a client request', 'tools/call'],
    ['the handshake', 'initialize'],
    ['a task request', 'tasks/result'],
    ['a 2026-07-28 request', 'server/discover'],
    ['a 2026-07-28 stream', 'subscriptions/listen'],
    ['a server-to-client request', 'sampling/createMessage'],
    ['the interceptor listing', InterceptorMethod.LIST],
    ['an interceptor invocation', InterceptorMethod.INVOKE],
  ])('knows %s (%s)', (_what, method) => {
    expect(isKnownMcpMethod(method)).toBe(true);
  });

  it.each([
    ['a made-up method', 'made/up'],
    ['a made-up method under a known prefix', 'tools/bob@example.com'],
    ['another case', 'Tools/Call'],
    ['surrounding space', ' tools/call'],
    ['a prefix of a method', 'tools/'],
    ['the empty string', ''],
    ['a notification', 'notifications/initialized'],
    ["the gateway's batch call", InterceptorMethod.INVOKE_BATCH],
  ])('does not know %s (%j)', (_what, method) => {
    expect(isKnownMcpMethod(method)).toBe(false);
  });

  it('holds method names only, none a notification', () => {
    for (const method of KNOWN_MCP_METHODS) {
      expect(method).toMatch(/^[a-z]+(\/[a-zA-Z]+)*$/);
      expect(method.startsWith('notifications/')).toBe(false);
    }
  });
});
