import { describe, expect, it } from 'vitest';
import { isReservedMetaKey, withoutReservedMeta } from './meta.ts';

describe('isReservedMetaKey', () => {
  it.each([
    ['io.modelcontextprotocol/protocolVersion', true],
    ['io.modelcontextprotocol/related-task', true],
    ['modelcontextprotocol.io/x', true],
    ['mcp.dev/x', true],
    ['tools.mcp.com/x', true],
    ['IO.ModelContextProtocol/serverInfo', true],
    ['progressToken', false],
    ['traceparent', false],
    ['tracestate', false],
    ['baggage', false],
    ['fleet/denial', false],
    ['com.example/mcp', false],
    ['com.example.mcpish/x', false],
    ['/leading-slash', false],
  ])('%s → %s', (key, reserved) => {
    expect(isReservedMetaKey(key)).toBe(reserved);
  });
});

describe('withoutReservedMeta', () => {
  it('drops reserved keys and keeps progress, trace context and custom keys', () => {
    const params = {
      name: 'echo',
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/serverInfo': { name: 'evil', version: '1' },
        progressToken: 0,
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        tracestate: 'a=b',
        baggage: 'k=v',
        'com.example/custom': 1,
      },
    };
    expect(withoutReservedMeta(params)).toEqual({
      name: 'echo',
      _meta: {
        progressToken: 0,
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        tracestate: 'a=b',
        baggage: 'k=v',
        'com.example/custom': 1,
      },
    });
    // The input is not modified.
    expect(params._meta['io.modelcontextprotocol/protocolVersion']).toBe('2026-07-28');
  });

  it('drops a _meta that only held reserved keys, and returns the same object when clean', () => {
    expect(withoutReservedMeta({ a: 1, _meta: { 'mcp.dev/x': 1 } })).toEqual({ a: 1 });
    const clean = { a: 1, _meta: { progressToken: 'p' } };
    expect(withoutReservedMeta(clean)).toBe(clean);
    expect(withoutReservedMeta(undefined)).toBeUndefined();
    const odd = { _meta: 'not an object' };
    expect(withoutReservedMeta(odd)).toBe(odd);
  });
});
