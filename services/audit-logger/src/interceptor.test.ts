import {
  AUDIT_RECORD_LIMITS,
  type AuditRecord,
  parseAuditRecord,
  SCRUB_FAILED,
} from '@fleet/audit';
import type { InvocationContext } from '@fleet/core';
import { createInterceptorHost } from '@fleet/interceptor-kit';
import { describe, expect, it } from 'vitest';
import {
  AUDIT_LOGGER_INTERCEPTOR,
  createAuditLoggerInterceptor,
  invocationRecord,
  targetOf,
} from './interceptor.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

describe('invocationRecord', () => {
  it('records the context the orchestrator sent, and no payload values', () => {
    const record = invocationRecord(
      { name: 'get_weather', arguments: { city: 'Paris', email: 'bob@example.com' } },
      {
        event: 'tools/call',
        phase: 'request',
        context: {
          traceId: TRACE,
          spanId: SPAN,
          sessionId: 'session-1',
          timestamp: '2025-06-01T12:00:00Z',
          principal: {
            type: 'user',
            id: 'alice',
            claims: {
              sub: 'alice',
              roles: ['admin'],
              email: 'alice@example.com',
              nested: { a: 1 },
            },
          },
        },
      },
    );
    expect(parseAuditRecord(record)).toEqual(record);
    expect(record).toMatchObject({
      kind: 'invocation',
      event: 'tools/call',
      phase: 'request',
      method: 'tools/call',
      target: 'get_weather',
      traceId: TRACE,
      spanId: SPAN,
      sessionId: 'session-1',
      principal: { type: 'user', id: 'alice', claims: { sub: 'alice', roles: ['admin'] } },
      decision: 'allowed',
      status: 'success',
      interceptors: [{ name: AUDIT_LOGGER_INTERCEPTOR, type: 'validation', mode: 'audit' }],
    });
    expect(record.payloadPreview).toBeUndefined();
    expect(JSON.stringify(record)).not.toMatch(/Paris|example\.com/);
  });

  it('keeps a short preview only when asked (the worker scrubs it)', () => {
    const record = invocationRecord(
      { name: 'echo', arguments: { text: 'x'.repeat(100) } },
      { event: 'tools/call', phase: 'request', context: {} },
      { previewChars: 20 },
    );
    expect(record.payloadPreview).toBe('{"name":"echo","argu');
  });

  it.each([
    // The cut (at 24 characters) falls inside the value: `{"note":"hi bob@example` alone is
    // no email to a scrubber, so cutting first would store it.
    ['an email', { note: 'hi bob@example.com, thanks' }, /bob|example/],
    ['a card number', { note: '4111 1111 1111 1111' }, /4111|1111/],
  ])('never keeps part of %s that straddles the preview cut', (_what, payload, leak) => {
    const record = invocationRecord(
      payload,
      { event: 'tools/call', phase: 'request', context: {} },
      { previewChars: 24 },
    );
    expect(JSON.stringify(payload).slice(0, 24)).toMatch(leak);
    expect(record.payloadPreview).toHaveLength(24);
    expect(record.payloadPreview).not.toMatch(leak);
    expect(record.payloadPreview).toMatch(/^\{"note":"[^"]*\[/);
  });

  it('stores no preview text when the scrubber fails', () => {
    const record = invocationRecord(
      { note: 'bob@example.com' },
      { event: 'tools/call', phase: 'request', context: {} },
      {
        previewChars: 10,
        scrub: () => {
          throw new Error('engine down');
        },
      },
    );
    expect(record.payloadPreview).toBe(SCRUB_FAILED);
  });

  it('leaves out ids that are not W3C ids, so the worker never refuses the record', () => {
    const record = invocationRecord(
      {},
      {
        event: 'x/y',
        phase: 'response',
        context: {
          traceId: 'NOT-A-TRACE',
          spanId: 'zz',
          sessionId: '',
          principal: { type: 'anonymous', id: '' },
        },
      },
    );
    expect(record.traceId).toBeUndefined();
    expect(record.sessionId).toBeUndefined();
    expect(record.principal).toEqual({ type: 'anonymous' });
    expect(() => parseAuditRecord(record)).not.toThrow();
  });

  it.each([
    [{ name: 'get_weather' }, 'get_weather'],
    [{ uri: 'file:///etc/motd' }, 'file:///etc/motd'],
    [{ name: '' }, undefined],
    [{ name: 42 }, undefined],
    [null, undefined],
    ['text', undefined],
  ])('targetOf(%j) is %j', (payload, target) => {
    expect(targetOf(payload)).toBe(target);
  });

  it('cuts a made-up event at the record bound: a 1 MiB event queues no 2 MiB record', () => {
    // The interceptor hooks `*`: the caller may send any event, and it is both event and method.
    const event = `e/${'x'.repeat(1024 * 1024)}`;
    const record = invocationRecord({}, { event, phase: 'request', context: {} });
    expect(record.event).toBe(event.slice(0, AUDIT_RECORD_LIMITS.eventLength));
    expect(record.method).toBe(record.event);
    expect(JSON.stringify(record).length).toBeLessThan(2000);
    expect(parseAuditRecord(record).event).toBe(record.event);
  });

  describe('never cuts through an emoji (a surrogate pair) straddling a bound', () => {
    const EMOJI = '\u{1F600}';
    // A lone surrogate is what a cut through a pair leaves; jsonb refuses it.
    const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
    /** `max - 1` characters, then the emoji: its first half is the last one the cut keeps. */
    const straddling = (max: number) => `${'a'.repeat(max - 1)}${EMOJI}tail`;
    const { eventLength, idLength } = AUDIT_RECORD_LIMITS;
    const request = (context: InvocationContext, event = 'tools/call') =>
      invocationRecord({ name: straddling(idLength) }, { event, phase: 'request', context });
    it.each<[string, () => string | undefined, number]>([
      ['event', () => request({}, straddling(eventLength)).event, eventLength],
      ['method', () => request({}, straddling(eventLength)).method, eventLength],
      ['target', () => request({}).target, idLength],
      ['sessionId', () => request({ sessionId: straddling(idLength) }).sessionId, idLength],
      [
        'principal id',
        () => request({ principal: { type: 'user', id: straddling(idLength) } }).principal?.id,
        idLength,
      ],
      [
        'claim',
        () =>
          request({ principal: { type: 'user', claims: { sub: straddling(256) } } }).principal
            ?.claims?.sub as string | undefined,
        // Cut at 256 here (the worker's parse then cuts to the claim bound, with a marker).
        256,
      ],
      [
        'payload preview',
        () =>
          invocationRecord(
            // After `{"note":"` the emoji straddles the 40-character preview.
            { note: straddling(40 - '{"note":"'.length) },
            { event: 'tools/call', phase: 'request', context: {} },
            { previewChars: 40, scrub: (text) => text },
          ).payloadPreview?.slice('{"note":"'.length),
        40 - '{"note":"'.length,
      ],
    ])('%s', (_field, cut, max) => {
      const text = cut();
      expect(text).not.toMatch(LONE_SURROGATE);
      // The emoji is left out whole: one character short of the bound.
      expect(text).toBe('a'.repeat(max - 1));
    });
  });

  it('has no target in the response phase (the payload is a result)', () => {
    const record = invocationRecord(
      { name: 'looks-like-a-name' },
      { event: 'tools/call', phase: 'response', context: {} },
    );
    expect(record.target).toBeUndefined();
  });
});

describe('the audit-logger interceptor', () => {
  it('is a validation interceptor in audit mode with failOpen, on every event in both phases', () => {
    const host = createInterceptorHost([
      createAuditLoggerInterceptor({ sink: { enqueue: () => undefined } }),
    ]);
    expect(host.list({}).interceptors).toEqual([
      expect.objectContaining({
        name: 'audit-logger',
        type: 'validation',
        mode: 'audit',
        failOpen: true,
        hooks: [
          { events: ['*'], phase: 'request' },
          { events: ['*'], phase: 'response' },
        ],
      }),
    ]);
    expect(host.list({ event: 'resources/read' }).interceptors).toHaveLength(1);
  });

  it('queues one record per invocation and answers valid: true, even when the sink throws', async () => {
    const records: AuditRecord[] = [];
    const errors: unknown[] = [];
    let broken = false;
    const host = createInterceptorHost([
      createAuditLoggerInterceptor({
        sink: {
          enqueue: (record) => {
            if (broken) throw new Error('sink broken');
            records.push(record);
          },
        },
        onError: (error) => errors.push(error),
      }),
    ]);
    const invoke = () =>
      host.invoke({
        name: 'audit-logger',
        event: 'tools/call',
        phase: 'request',
        payload: { name: 'echo' },
        context: { traceId: TRACE },
      });
    await expect(invoke()).resolves.toMatchObject({ interceptor: 'audit-logger', valid: true });
    broken = true;
    await expect(invoke()).resolves.toMatchObject({ valid: true });
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ traceId: TRACE, target: 'echo' });
    expect(errors).toHaveLength(1);
  });
});
