import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  batchItemError,
  FleetError,
  InvokeParamsSchema,
  ProtocolError,
  parseInterceptorInfo,
  parseInvokeResult,
  parseListResult,
  parseWire,
  WireParseError,
} from './index.ts';

const goldenDir = new URL('../test/golden/', import.meta.url);
const golden = readdirSync(goldenDir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => [f, JSON.parse(readFileSync(new URL(f, goldenDir), 'utf8'))] as const);

describe('golden wire fixtures', () => {
  it.each(golden)('%s parses to its canonical form', (_file, fixture) => {
    let canonical: unknown;
    if (fixture.expected) canonical = parseInvokeResult(fixture.input, fixture.expected);
    else if (fixture.input.interceptors)
      canonical = { interceptors: parseListResult(fixture.input).interceptors };
    else canonical = parseInterceptorInfo(fixture.input);
    expect(canonical).toEqual(fixture.canonical);
    // Canonical output is a fixed point.
    if (!fixture.expected && !fixture.input.interceptors)
      expect(parseInterceptorInfo(canonical)).toEqual(canonical);
  });
});

function parseError(fn: () => unknown): WireParseError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(WireParseError);
    expect(error).toBeInstanceOf(FleetError);
    expect((error as FleetError).code).toBe('INVALID_WIRE_SHAPE');
    return error as WireParseError;
  }
  throw new Error('expected a WireParseError');
}

describe('descriptor parsing', () => {
  it.each([
    [{ type: 'validation', hooks: [] }, 'name'],
    [{ name: 'x', type: 'sink', hooks: [] }, 'type'],
    [
      { name: 'x', type: 'validation', hooks: [{ events: ['tools/call'], phase: 'sideways' }] },
      'hooks[0].phase',
    ],
    [
      { name: 'x', type: 'validation', hooks: [{ events: ['tools*'], phase: 'request' }] },
      'hooks[0].events[0]',
    ],
    [{ name: 'x', type: 'validation', hooks: [], priorityHint: 1.5 }, 'priorityHint'],
    [{ name: 'x', type: 'validation', hooks: [], mode: 'loud' }, 'mode'],
    [{ name: 'x', type: 'validation', hooks: [], compat: {} }, 'compat.minProtocol'],
    [{ name: 'x', type: 'validation' }, 'hooks'],
  ])('%j fails naming %s', (input, path) => {
    const error = parseError(() => parseInterceptorInfo(input));
    expect(error.issues.map((i) => i.path)).toContain(path);
    expect(error.message).toContain(path);
  });

  it('keeps an empty hooks array (matches nothing) and ignores unknown fields', () => {
    expect(parseInterceptorInfo({ name: 'x', type: 'mutation', hooks: [], future: 1 })).toEqual({
      name: 'x',
      type: 'mutation',
      hooks: [],
    });
  });

  it('sets aside unusable descriptors in a list instead of failing it', () => {
    const { interceptors, rejected } = parseListResult({
      interceptors: [
        { name: 'good', type: 'validation', hooks: [] },
        { name: 'sinky', type: 'sink', hooks: [] },
      ],
    });
    expect(interceptors.map((i) => i.name)).toEqual(['good']);
    expect(rejected).toEqual([
      {
        index: 1,
        name: 'sinky',
        issues: [expect.objectContaining({ path: 'interceptors[1].type' })],
      },
    ]);
  });

  it('rejects a list result without an interceptors array', () => {
    expect(parseError(() => parseListResult({ tools: [] })).issues[0]?.path).toBe('interceptors');
  });
});

describe('result parsing', () => {
  const expected = {
    interceptor: 'v',
    type: 'validation' as const,
    phase: 'request' as const,
    payload: {},
  };

  it.each([
    [{ interceptor: 'other', type: 'validation', phase: 'request', valid: true }, 'interceptor'],
    [
      { interceptor: 'v', type: 'mutation', phase: 'request', modified: false, payload: {} },
      'type',
    ],
    [{ interceptor: 'v', type: 'validation', phase: 'response', valid: true }, 'phase'],
    [{ interceptor: 'v', type: 'validation', phase: 'request', valid: 'yes' }, 'valid'],
    [
      { interceptor: 'v', type: 'validation', phase: 'request', valid: false, severity: 'fatal' },
      'severity',
    ],
  ])('%j is malformed at %s', (input, path) => {
    expect(
      parseError(() => parseInvokeResult(input, expected)).issues.map((i) => i.path),
    ).toContain(path);
  });

  it('refuses a modified mutation without a payload', () => {
    const error = parseError(() =>
      parseInvokeResult(
        { interceptor: 'm', type: 'mutation', phase: 'request', modified: true },
        { ...expected, interceptor: 'm', type: 'mutation' },
      ),
    );
    expect(error.issues.map((i) => i.path)).toContain('payload');
  });

  it('refuses a non-object result', () => {
    parseError(() => parseInvokeResult('ok', expected));
  });
});

describe('invoke params', () => {
  it.each([
    [{ event: 'tools/call', phase: 'request', payload: {} }, 'name'],
    [{ name: 'x', event: 'tools/*', phase: 'request', payload: {} }, 'event'],
    [{ name: 'x', event: 'tools/call', phase: 'both', payload: {} }, 'phase'],
    [{ name: 'x', event: 'tools/call', phase: 'request', timeoutMs: -1 }, 'timeoutMs'],
    [
      {
        name: 'x',
        event: 'tools/call',
        phase: 'request',
        context: { principal: { type: 'robot' } },
      },
      'context.principal.type',
    ],
  ])('%j fails naming %s', (input, path) => {
    const error = parseError(() =>
      parseWire(InvokeParamsSchema, input, 'interceptor/invoke params'),
    );
    expect(error.issues.map((i) => i.path)).toContain(path);
  });
});

describe('batchItemError', () => {
  it("marks a -32602 answered to a whole batch as the batch refused, keeping the service's answer", () => {
    const refusal = new ProtocolError(-32602, 'Invalid params: too many', { maxItems: 2 });
    const item = batchItemError(refusal, 3);
    expect(item).toBeInstanceOf(ProtocolError);
    expect((item as ProtocolError).code).toBe(-32602);
    expect((item as ProtocolError).message).toBe('Invalid params: too many');
    expect((item as ProtocolError).data).toEqual({
      reason: 'batch_refused',
      items: 3,
      error: { code: -32602, message: 'Invalid params: too many', data: { maxItems: 2 } },
    });
    expect((item as ProtocolError).cause).toBe(refusal);
  });

  it.each([
    ['another JSON-RPC error', new ProtocolError(-32603, 'boom', { reason: 'timeout' })],
    ['a transport failure', new FleetError('TRANSPORT_ERROR', 'unreachable')],
    ['anything else', new Error('socket hang up')],
  ])('passes %s on as it is', (_label, error) => {
    expect(batchItemError(error, 2)).toBe(error);
  });
});
