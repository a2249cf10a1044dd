/**
 * observeInvocations: the one `onInvoked` wiring of every kit service — each invocation's
 * duration recorded by outcome, each failure warned and each refusal of the caller's params
 * told at info (name, reason; never the payload).
 */
import { JsonRpcCode, ProtocolError } from '@fleet/core';
import { describe, expect, it } from 'vitest';
import {
  allow,
  defineMutator,
  defineValidator,
  deny,
  modified,
  observeInvocations,
  unchanged,
} from '../src/index.ts';
import { rawPost } from '../src/testing.ts';
import { serveInterceptors, serveObserved } from './helpers.ts';

const SECRET = 'bob@example.com';

const interceptors = [
  defineValidator({
    name: 'gate',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: (payload) => {
      const what = (payload as { what?: string }).what;
      if (what === 'crash') throw new Error('gate broke');
      // As the pii-redactor refuses a payload over its engine's limits.
      if (what === 'too-deep')
        throw new ProtocolError(JsonRpcCode.INVALID_PARAMS, 'Invalid params: too deep', {
          name: 'gate',
          reason: 'limit_exceeded',
        });
      if (what === 'slow') return new Promise(() => undefined);
      if (what === 'warn') return deny('careful', { severity: 'warn' });
      return what === 'deny' ? deny('no') : allow();
    },
  }),
  defineMutator({
    name: 'shaper',
    mode: 'audit',
    hooks: [{ events: ['tools/call'], phase: 'response' }],
    handler: (payload) =>
      (payload as { what?: string }).what === 'change' ? modified({ changed: true }) : unchanged(),
  }),
];

const invoke = (name: string, phase: string, what: string, timeoutMs?: number) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'interceptor/invoke',
  params: {
    name,
    event: 'tools/call',
    phase,
    payload: { what, email: SECRET },
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  },
});

describe('observeInvocations over HTTP', () => {
  it('records every invocation by outcome and warns of failures without the payload', async () => {
    const { url, recorded, durations, lines } = await serveObserved(interceptors);
    for (const body of [
      invoke('gate', 'request', 'ok'),
      invoke('gate', 'request', 'deny'),
      invoke('gate', 'request', 'warn'),
      invoke('shaper', 'response', 'change'),
      invoke('shaper', 'response', 'same'),
      invoke('gate', 'request', 'crash'),
      invoke('gate', 'request', 'slow', 50),
    ])
      await rawPost(url, body);
    expect(recorded).toEqual([
      {
        interceptor: 'gate',
        outcome: 'allowed',
        type: 'validation',
        mode: 'active',
        phase: 'request',
      },
      {
        interceptor: 'gate',
        outcome: 'denied',
        type: 'validation',
        mode: 'active',
        phase: 'request',
      },
      // Not valid, but only a warning: it does not block, so it is no denial.
      {
        interceptor: 'gate',
        outcome: 'warned',
        type: 'validation',
        mode: 'active',
        phase: 'request',
      },
      {
        interceptor: 'shaper',
        outcome: 'modified',
        type: 'mutation',
        mode: 'audit',
        phase: 'response',
      },
      {
        interceptor: 'shaper',
        outcome: 'unchanged',
        type: 'mutation',
        mode: 'audit',
        phase: 'response',
      },
      {
        interceptor: 'gate',
        outcome: 'failed',
        type: 'validation',
        mode: 'active',
        phase: 'request',
      },
      {
        interceptor: 'gate',
        outcome: 'timeout',
        type: 'validation',
        mode: 'active',
        phase: 'request',
      },
    ]);
    for (const ms of durations) expect(ms).toBeGreaterThanOrEqual(0);
    expect(lines).toEqual([
      {
        level: 'warn',
        msg: 'interceptor invocation failed',
        obj: expect.objectContaining({
          interceptor: 'gate',
          event: 'tools/call',
          phase: 'request',
          outcome: 'failed',
          reason: 'gate broke',
        }),
      },
      {
        level: 'warn',
        msg: 'interceptor invocation failed',
        obj: expect.objectContaining({
          interceptor: 'gate',
          outcome: 'timeout',
          reason: 'timeout',
        }),
      },
    ]);
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });

  it("counts a -32602 refusal of the caller's params as rejected, not failed, and tells it at info", async () => {
    const { url, recorded, lines } = await serveObserved(interceptors);
    const refused = await rawPost(url, invoke('gate', 'request', 'too-deep'));
    expect(refused.json.error).toMatchObject({
      code: -32602,
      data: { name: 'gate', reason: 'limit_exceeded' },
    });
    const crashed = await rawPost(url, invoke('gate', 'request', 'crash'));
    expect(crashed.json.error).toMatchObject({ code: -32603 });
    expect(recorded.map((a) => a.outcome)).toEqual(['rejected', 'failed']);
    expect(lines).toEqual([
      {
        level: 'info',
        msg: 'interceptor invocation rejected',
        obj: expect.objectContaining({
          interceptor: 'gate',
          outcome: 'rejected',
          reason: 'limit_exceeded',
        }),
      },
      {
        level: 'warn',
        msg: 'interceptor invocation failed',
        obj: expect.objectContaining({
          interceptor: 'gate',
          outcome: 'failed',
          reason: 'gate broke',
        }),
      },
    ]);
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });

  it('never breaks an invocation when the meter or the logger throws', async () => {
    const boom = () => {
      throw new Error('broken telemetry');
    };
    const { url } = await serveInterceptors(interceptors, {
      onInvoked: observeInvocations({
        metrics: { recordInterceptor: boom },
        logger: { debug: boom, info: boom, warn: boom, error: boom },
      }),
    });
    expect((await rawPost(url, invoke('gate', 'request', 'ok'))).json.result).toMatchObject({
      valid: true,
    });
    expect((await rawPost(url, invoke('gate', 'request', 'crash'))).json.error).toMatchObject({
      code: -32603,
      data: { interceptor: 'gate', reason: 'gate broke' },
    });
  });
});
