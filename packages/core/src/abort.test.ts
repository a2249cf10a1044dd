import { describe, expect, it } from 'vitest';
import {
  type ChainResult,
  chainAbortToError,
  chainAbortToToolResult,
  FleetError,
  JsonRpcCode,
  ProtocolError,
  toProtocolError,
} from './index.ts';

const base: Omit<ChainResult, 'status' | 'abortedAt'> = {
  event: 'tools/call',
  phase: 'request',
  results: [],
  validationSummary: { errors: 0, warnings: 0, infos: 0 },
  totalDurationMs: 1,
};

describe('chain abort mapping', () => {
  it('maps success to nothing', () => {
    expect(chainAbortToError({ ...base, status: 'success', abortedAt: [] })).toBeUndefined();
    expect(chainAbortToToolResult({ ...base, status: 'success', abortedAt: [] })).toBeUndefined();
  });

  it('maps denials to -32602 listing every blocking validator (DESIGN.md §2)', () => {
    const error = chainAbortToError({
      ...base,
      status: 'validation_failed',
      abortedAt: [
        {
          interceptor: 'policy',
          serviceId: 's',
          reason: 'rule x',
          type: 'validation',
          phase: 'request',
        },
        {
          interceptor: 'pii-guard',
          serviceId: 's',
          reason: 'down',
          type: 'invocation',
          phase: 'request',
        },
      ],
    });
    expect(error).toBeInstanceOf(ProtocolError);
    expect(error?.code).toBe(-32602);
    expect(error?.data).toEqual({
      validationErrors: [
        { interceptor: 'policy', reason: 'rule x', type: 'validation', phase: 'request' },
        { interceptor: 'pii-guard', reason: 'down', type: 'invocation', phase: 'request' },
      ],
    });
  });

  it('maps a validator invocation failure alone to -32603 naming it', () => {
    const error = chainAbortToError({
      ...base,
      status: 'validation_failed',
      abortedAt: [
        {
          interceptor: 'pii-guard',
          serviceId: 's',
          reason: 'connection refused',
          type: 'invocation',
          phase: 'request',
        },
      ],
    });
    expect(error?.code).toBe(JsonRpcCode.INTERNAL_ERROR);
    expect(error?.data).toEqual({
      failedInterceptor: 'pii-guard',
      reason: 'connection refused',
      phase: 'request',
    });
  });

  it('maps a mutator failure to -32603 {failedInterceptor, reason, phase}', () => {
    const error = chainAbortToError({
      ...base,
      phase: 'response',
      status: 'mutation_failed',
      abortedAt: [
        {
          interceptor: 'pii-redactor',
          serviceId: 's',
          reason: 'boom',
          type: 'mutation',
          phase: 'response',
        },
      ],
    });
    expect(error?.code).toBe(-32603);
    expect(error?.data).toEqual({
      failedInterceptor: 'pii-redactor',
      reason: 'boom',
      phase: 'response',
    });
  });

  it('maps a chain timeout to -32603 {reason: timeout, phase, timeoutMs}', () => {
    const error = chainAbortToError({
      ...base,
      status: 'timeout',
      timeoutMs: 2000,
      abortedAt: [
        {
          interceptor: 'slow',
          serviceId: 's',
          reason: 'timeout',
          type: 'timeout',
          phase: 'request',
        },
      ],
    });
    expect(error?.code).toBe(-32603);
    expect(error?.data).toMatchObject({ reason: 'timeout', phase: 'request', timeoutMs: 2000 });
  });

  it('offers the CallToolResult form with isError', () => {
    const result = chainAbortToToolResult({
      ...base,
      status: 'validation_failed',
      abortedAt: [
        {
          interceptor: 'policy',
          serviceId: 's',
          reason: 'rule big-transfers',
          type: 'validation',
          phase: 'request',
        },
      ],
    });
    if (result === undefined) throw new Error('expected a tool result');
    expect(result.isError).toBe(true);
    expect(result.content[0]?.text).toContain('rule big-transfers');
    expect((result._meta as Record<string, { code: number }>)['fleet/denial']?.code).toBe(-32602);
  });
});

describe('toProtocolError', () => {
  it('passes protocol errors through, maps fleet errors by code and hides unknown failures', () => {
    const p = new ProtocolError(-32602, 'bad', { name: 'x' });
    expect(toProtocolError(p)).toBe(p);
    const f = toProtocolError(
      new FleetError('UNKNOWN_INTERCEPTOR', 'nope', { data: { name: 'x' } }),
    );
    expect([f.code, f.data]).toEqual([-32602, { name: 'x' }]);
    const u = toProtocolError(new TypeError('secret internals'));
    expect([u.code, u.message]).toEqual([-32603, 'Internal error']);
  });
});
