/**
 * The known MCP methods against the SDK, and the event label built on them. `@fleet/core`
 * holds the list by hand (it depends on zod only); the SDK is a dependency here, so this is
 * where an SDK upgrade that adds a request method fails until the list has it.
 */
import { type InterceptorInfo, KNOWN_MCP_METHODS } from '@fleet/core';
import { ClientRequestSchema, ServerRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { eventLabel } from '../src/labels.ts';

describe('KNOWN_MCP_METHODS', () => {
  it('holds every request method of both directions the MCP SDK names', () => {
    const sdk = [...ClientRequestSchema.options, ...ServerRequestSchema.options].map(
      (request) => request.shape.method.value,
    );
    expect(sdk.length).toBeGreaterThan(0);
    expect(sdk.filter((method) => !KNOWN_MCP_METHODS.has(method))).toEqual([]);
  });
});

describe('eventLabel', () => {
  const info: InterceptorInfo = {
    name: 'watch',
    type: 'validation',
    hooks: [
      { events: ['*'], phase: 'request' },
      { events: ['fleet/custom'], phase: 'request' },
    ],
  };

  it.each([
    ['an SDK request method', 'tools/call', 'tools/call'],
    ['a server-to-client method', 'roots/list', 'roots/list'],
    // Not in the SDK's schemas: `other` before the list moved to @fleet/core.
    ['a 2026-07-28 method', 'server/discover', 'server/discover'],
    ['a 2026-07-28 stream', 'subscriptions/listen', 'subscriptions/listen'],
    ['the interceptor listing', 'interceptors/list', 'interceptors/list'],
    ['an interceptor invocation', 'interceptor/invoke', 'interceptor/invoke'],
    ['an event a hook names as it is', 'fleet/custom', 'fleet/custom'],
    ['an event only the wildcard matches', 'made/up', 'other'],
    ['a made-up event with PII', 'tools/bob@example.com', 'other'],
    ['a notification', 'notifications/initialized', 'other'],
    ['a non-string', 42, 'other'],
  ])('shows %s (%j) as %j', (_what, event, shown) => {
    expect(eventLabel(event, info)).toBe(shown);
  });

  it('shows only known methods when the interceptor is unknown', () => {
    expect(eventLabel('tools/call', undefined)).toBe('tools/call');
    expect(eventLabel('fleet/custom', undefined)).toBe('other');
  });
});
