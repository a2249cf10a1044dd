/**
 * observeInvocations: the one `onInvoked` wiring of every kit service — each invocation's
 * duration recorded by outcome, each failure warned (name, reason; never the payload).
 */
import { describe, expect, it } from 'vitest';
import {
  allow,
  defineMutator,
  defineValidator,
  deny,
  type InvocationMetricAttributes,
  modified,
  observeInvocations,
  unchanged,
} from '../src/index.ts';
import { rawPost } from '../src/testing.ts';
import { capturingLogger, serveInterceptors } from './helpers.ts';

const SECRET = 'bob@example.com';

const interceptors = [
  defineValidator({
    name: 'gate',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: (payload) => {
      const what = (payload as { what?: string }).what;
      if (what === 'crash') throw new Error('gate broke');
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
    const recorded: Array<[number, InvocationMetricAttributes]> = [];
    const { logger, lines } = capturingLogger();
    const { url } = await serveInterceptors(interceptors, {
      onInvoked: observeInvocations({
        metrics: { recordInterceptor: (ms, attributes) => recorded.push([ms, attributes]) },
        logger,
      }),
    });
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
    expect(recorded.map(([, a]) => a)).toEqual([
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
    for (const [ms] of recorded) expect(ms).toBeGreaterThanOrEqual(0);
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
