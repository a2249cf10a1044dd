import { decodeTime } from 'ulid';
import { describe, expect, it } from 'vitest';
import {
  AUDIT_RECORD_LIMITS,
  type AuditMessage,
  type AuditRecord,
  AuditRecordError,
  AuditRecordSchema,
  createAuditRecord,
  PAYLOAD_PREVIEW_MAX_LENGTH,
  PAYLOAD_PREVIEW_SCRUB_MARGIN,
  parseAuditRecord,
  TRUNCATION_MARKER,
} from './index.ts';

const minimal: AuditRecord = {
  id: '01JD6Z4Q8W3V5X7Y9ZABCDEFGH',
  timestamp: '2026-11-30T12:00:00.000Z',
  kind: 'chain',
  event: 'tools/call',
  phase: 'request',
  method: 'tools/call',
  decision: 'allowed',
  status: 'success',
  interceptors: [],
  abortReasons: [],
  durationMs: 3.2,
};

const full: AuditRecord = {
  ...minimal,
  kind: 'invocation',
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
  sessionId: 'session-1',
  principal: { type: 'user', id: 'alice', claims: { roles: ['admin'], tenant: 't1', mfa: true } },
  phase: 'response',
  target: 'get_weather',
  backend: 'everything',
  decision: 'denied',
  status: 'validation_failed',
  interceptors: [
    {
      name: 'pii-guard',
      service: 'svc-1',
      type: 'validation',
      mode: 'active',
      outcome: 'denied',
      durationMs: 1.5,
      messages: [{ path: 'content[0].text', severity: 'error', message: 'contains an email' }],
    },
    { name: 'pii-redactor', type: 'mutation', mode: 'audit', outcome: 'modified', durationMs: 0 },
  ],
  abortReasons: [
    {
      interceptor: 'pii-guard',
      reason: 'contains an email',
      type: 'validation',
      phase: 'response',
    },
  ],
  payloadPreview: '{"content":[{"type":"text","text":"..."}]}',
};

/** The error `make` throws: an AuditRecordError, or the test fails. */
function recordErrorOf(make: () => unknown): AuditRecordError {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(AuditRecordError);
    return error as AuditRecordError;
  }
  throw new Error('expected an AuditRecordError');
}

describe('record bounds', () => {
  const L = AUDIT_RECORD_LIMITS;
  const message = (text: string): AuditMessage => ({ severity: 'warn', message: text });
  const interceptor = (name: string, messages?: AuditMessage[]) => ({
    name,
    type: 'validation' as const,
    mode: 'active' as const,
    outcome: 'allowed',
    durationMs: 1,
    ...(messages ? { messages } : {}),
  });

  it('cuts a 50 000-item roles claim and every long text with a marker, keeping the record', () => {
    const huge = {
      ...minimal,
      event: 'e'.repeat(5000),
      method: 'm'.repeat(5000),
      target: 't'.repeat(5000),
      sessionId: 's'.repeat(5000),
      backend: 'b'.repeat(5000),
      principal: {
        type: 'user',
        id: 'i'.repeat(5000),
        claims: {
          roles: Array.from({ length: 50_000 }, (_, i) => `role-${i}`),
          sub: 'x'.repeat(5000),
          ['k'.repeat(500)]: true,
          ...Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`c${i}`, i])),
        },
      },
      interceptors: [
        {
          ...interceptor('n'.repeat(5000), [
            { ...message('m'.repeat(50_000)), path: 'p'.repeat(5000) },
          ]),
          service: 's'.repeat(5000),
          outcome: 'o'.repeat(5000),
        },
      ],
      abortReasons: [
        {
          interceptor: 'n'.repeat(5000),
          reason: 'r'.repeat(50_000),
          type: 'validation',
          phase: 'request',
        },
      ],
    };
    expect(JSON.stringify(huge).length).toBeGreaterThan(600_000);
    const record = parseAuditRecord(huge);
    expect(JSON.stringify(record).length).toBeLessThan(8_000);
    expect(record.event).toHaveLength(L.eventLength);
    expect(record.event.endsWith(TRUNCATION_MARKER)).toBe(true);
    expect(record.method).toHaveLength(L.eventLength);
    for (const text of [record.target, record.sessionId, record.backend, record.principal?.id])
      expect(text).toHaveLength(L.idLength);
    const claims = record.principal?.claims ?? {};
    expect(Object.keys(claims)).toHaveLength(L.claims);
    expect(claims['…']).toBe('…[28 more claims truncated]');
    const roles = claims.roles as string[];
    expect(roles).toHaveLength(L.claimItems);
    expect(roles.slice(0, 2)).toEqual(['role-0', 'role-1']);
    expect(roles.at(-1)).toBe(`…[${50_000 - L.claimItems + 1} more items truncated]`);
    expect(claims.sub).toHaveLength(L.claimValueLength);
    expect(Object.keys(claims).every((name) => name.length <= L.claimNameLength)).toBe(true);
    const [entry] = record.interceptors;
    expect(entry?.name).toHaveLength(L.nameLength);
    expect(entry?.service).toHaveLength(L.nameLength);
    expect(entry?.outcome).toHaveLength(L.nameLength);
    expect(entry?.messages?.[0]?.message).toHaveLength(L.messageLength);
    expect(entry?.messages?.[0]?.path).toHaveLength(L.pathLength);
    expect(record.abortReasons[0]?.interceptor).toHaveLength(L.nameLength);
    expect(record.abortReasons[0]?.reason).toHaveLength(L.messageLength);
  });

  it('cuts long lists (interceptors, messages over all interceptors, abort reasons) with a marker entry', () => {
    const record = parseAuditRecord({
      ...minimal,
      interceptors: Array.from({ length: 100 }, (_, i) =>
        interceptor(
          `i${i}`,
          i < 3 ? Array.from({ length: 40 }, (_, j) => message(`m${j}`)) : undefined,
        ),
      ),
      abortReasons: Array.from({ length: 100 }, (_, i) => ({
        interceptor: `i${i}`,
        reason: 'no',
        type: 'validation',
        phase: 'response',
      })),
    });
    expect(record.interceptors).toHaveLength(L.interceptors);
    expect(record.interceptors.at(-1)).toMatchObject({
      name: `…[${100 - L.interceptors + 1} more interceptors truncated]`,
      outcome: 'truncated',
    });
    const counts = record.interceptors.map((i) => i.messages?.length ?? 0);
    expect(counts.slice(0, 3)).toEqual([40, L.messages - 40, 1]);
    expect(record.interceptors[1]?.messages?.at(-1)?.message).toBe(
      `…[${40 - (L.messages - 40) + 1} more messages truncated]`,
    );
    expect(record.abortReasons).toHaveLength(L.abortReasons);
    expect(record.abortReasons.at(-1)).toMatchObject({
      interceptor: '…',
      reason: `…[${100 - L.abortReasons + 1} more abort reasons truncated]`,
      phase: minimal.phase, // the record's
    });
  });

  it('leaves a record within its bounds exactly as it was', () => {
    expect(parseAuditRecord(full)).toEqual(full);
  });

  // Every kind of bounded text: where it sits in a record, and its bound.
  const boundedTexts: Array<
    [string, number, (text: string) => unknown, (record: AuditRecord) => unknown]
  > = [
    ['event', L.eventLength, (text) => ({ event: text }), (r) => r.event],
    ['method', L.eventLength, (text) => ({ method: text }), (r) => r.method],
    ['target', L.idLength, (text) => ({ target: text }), (r) => r.target],
    ['sessionId', L.idLength, (text) => ({ sessionId: text }), (r) => r.sessionId],
    ['backend', L.idLength, (text) => ({ backend: text }), (r) => r.backend],
    [
      'principal.id',
      L.idLength,
      (text) => ({ principal: { type: 'user', id: text } }),
      (r) => r.principal?.id,
    ],
    [
      'interceptors[].name',
      L.nameLength,
      (text) => ({ interceptors: [interceptor(text)] }),
      (r) => r.interceptors[0]?.name,
    ],
    [
      'interceptors[].service',
      L.nameLength,
      (text) => ({ interceptors: [{ ...interceptor('i'), service: text }] }),
      (r) => r.interceptors[0]?.service,
    ],
    [
      'interceptors[].outcome',
      L.nameLength,
      (text) => ({ interceptors: [{ ...interceptor('i'), outcome: text }] }),
      (r) => r.interceptors[0]?.outcome,
    ],
    [
      'abortReasons[].interceptor',
      L.nameLength,
      (text) => ({
        abortReasons: [{ interceptor: text, reason: 'r', type: 'validation', phase: 'request' }],
      }),
      (r) => r.abortReasons[0]?.interceptor,
    ],
    [
      'messages[].message',
      L.messageLength,
      (text) => ({ interceptors: [interceptor('i', [message(text)])] }),
      (r) => r.interceptors[0]?.messages?.[0]?.message,
    ],
    [
      'messages[].path',
      L.pathLength,
      (text) => ({ interceptors: [interceptor('i', [{ ...message('m'), path: text }])] }),
      (r) => r.interceptors[0]?.messages?.[0]?.path,
    ],
    [
      'abortReasons[].reason',
      L.messageLength,
      (text) => ({
        abortReasons: [{ interceptor: 'i', reason: text, type: 'validation', phase: 'request' }],
      }),
      (r) => r.abortReasons[0]?.reason,
    ],
    [
      'claim name',
      L.claimNameLength,
      (text) => ({ principal: { type: 'user', claims: { [text]: true } } }),
      (r) => Object.keys(r.principal?.claims ?? {})[0],
    ],
    [
      'claim value',
      L.claimValueLength,
      (text) => ({ principal: { type: 'user', claims: { sub: text } } }),
      (r) => r.principal?.claims?.sub,
    ],
    [
      'claim list item',
      L.claimValueLength,
      (text) => ({ principal: { type: 'user', claims: { roles: [text] } } }),
      (r) => (r.principal?.claims?.roles as string[] | undefined)?.[0],
    ],
  ];

  it.each(boundedTexts)(
    'cuts %s (bound %i) before an emoji straddling the cut, never through it',
    (_field, max, place, read) => {
      const kept = max - TRUNCATION_MARKER.length;
      // The emoji's first half is the last character the cut keeps.
      const straddling = `${'a'.repeat(kept - 1)}\u{1F600}${'z'.repeat(max)}`;
      const cut = read(parseAuditRecord({ ...minimal, ...(place(straddling) as object) }));
      expect(cut).toBe(`${'a'.repeat(kept - 1)}${TRUNCATION_MARKER}`);
      // An emoji that ends exactly at the cut is kept whole, and the bound is reached.
      const ending = `${'a'.repeat(kept - 2)}\u{1F600}${'z'.repeat(max)}`;
      const whole = read(parseAuditRecord({ ...minimal, ...(place(ending) as object) }));
      expect(whole).toBe(`${'a'.repeat(kept - 2)}\u{1F600}${TRUNCATION_MARKER}`);
      expect(whole).toHaveLength(max);
    },
  );
});

describe('AuditRecordSchema', () => {
  it.each([
    ['a minimal record', minimal],
    ['a record with every field', full],
    ['an anonymous principal without id', { ...minimal, principal: { type: 'anonymous' } }],
    ['a timestamp with an offset', { ...minimal, timestamp: '2026-11-30T13:00:00+01:00' }],
    ['a lowercase ULID', { ...minimal, id: minimal.id.toLowerCase() }],
    ['each status', { ...minimal, decision: 'error', status: 'backend_error' }],
    [
      // An interceptor that refused the caller's params (-32602) stops the chain as a failure.
      'an interceptor outcome rejected',
      {
        ...minimal,
        decision: 'error',
        status: 'invocation_failed',
        interceptors: [
          {
            name: 'pii-guard',
            service: 'svc-1',
            type: 'validation',
            mode: 'active',
            outcome: 'rejected',
            durationMs: 0.4,
          },
        ],
        abortReasons: [
          {
            interceptor: 'pii-guard',
            reason: 'limit_exceeded',
            type: 'invocation',
            phase: 'request',
          },
        ],
      },
    ],
  ])('accepts %s', (_, record) => {
    expect(parseAuditRecord(record)).toEqual(record);
  });

  it.each([
    ['id', { ...minimal, id: 'not-a-ulid' }],
    ['id', { ...minimal, id: undefined }],
    ['timestamp', { ...minimal, timestamp: 'yesterday' }],
    ['kind', { ...minimal, kind: 'proxy' }],
    ['traceId', { ...minimal, traceId: '4BF92F3577B34DA6A3CE929D0E0E4736' }],
    ['traceId', { ...minimal, traceId: '0'.repeat(32) }],
    ['spanId', { ...minimal, spanId: 'abc' }],
    ['principal.type', { ...minimal, principal: { type: 'robot' } }],
    [
      'principal.claims.nested',
      { ...minimal, principal: { type: 'user', claims: { nested: {} } } },
    ],
    ['event', { ...minimal, event: '' }],
    ['phase', { ...minimal, phase: 'both' }],
    ['method', { ...minimal, method: undefined }],
    ['decision', { ...minimal, decision: 'maybe' }],
    ['status', { ...minimal, status: 'ok' }],
    ['interceptors', { ...minimal, interceptors: undefined }],
    [
      'interceptors[0].mode',
      { ...minimal, interceptors: [{ ...full.interceptors[1], mode: 'x' }] },
    ],
    [
      'interceptors[0].messages[0].severity',
      {
        ...minimal,
        interceptors: [
          { ...full.interceptors[1], messages: [{ severity: 'fatal', message: 'm' }] },
        ],
      },
    ],
    [
      'abortReasons[0].type',
      { ...minimal, abortReasons: [{ ...full.abortReasons[0], type: 'x' }] },
    ],
    ['durationMs', { ...minimal, durationMs: -1 }],
    [
      'payloadPreview',
      {
        ...minimal,
        payloadPreview: 'x'.repeat(PAYLOAD_PREVIEW_MAX_LENGTH + PAYLOAD_PREVIEW_SCRUB_MARGIN + 1),
      },
    ],
  ])('rejects a bad %s, naming the field', (field, record) => {
    expect(AuditRecordSchema.safeParse(record).success).toBe(false);
    const { issues, message } = recordErrorOf(() => parseAuditRecord(record));
    expect(issues.map((issue) => issue.path)).toContain(field);
    expect(message).toContain(field);
  });

  it.each([
    ['year 1, the earliest', '0001-01-01T00:00:00Z'],
    ['year 9999, the latest', '9999-12-31T23:59:59.999Z'],
    ['an offset of +15:59', '2026-11-30T12:00:00+15:59'],
    ['an offset of -15:59', '2026-11-30T12:00:00-15:59'],
  ])('accepts a timestamp at the edge of what PostgreSQL holds: %s', (_, timestamp) => {
    expect(parseAuditRecord({ ...minimal, timestamp }).timestamp).toBe(timestamp);
  });

  it.each([
    // PostgreSQL: "date/time field value out of range" (SQLSTATE 22008), whatever the offset.
    ['year 0', '0000-01-01T00:00:00Z', /year 0000/],
    ['year 0 with an offset that lands in year 1', '0000-12-31T23:00:00-01:00', /year 0000/],
    // PostgreSQL: "time zone displacement out of range" (SQLSTATE 22009).
    ['an offset of +16:00', '2026-11-30T12:00:00+16:00', /±15:59/],
    ['an offset of -23:59', '2026-11-30T12:00:00-23:59', /±15:59/],
    // Stored by PostgreSQL, but outside the range the audit queries name (year 1..9999 UTC).
    ['an instant in 1 BC', '0001-01-01T00:00:00+01:00', /0001-01-01T00:00:00Z/],
    ['an instant in year 10000', '9999-12-31T23:30:00-01:00', /9999-12-31T23:59:59.999Z/],
  ])('refuses a timestamp of %s when parsed, naming the field', (_, timestamp, why) => {
    const { issues, message } = recordErrorOf(() => parseAuditRecord({ ...minimal, timestamp }));
    expect(issues).toEqual([{ path: 'timestamp', message: expect.stringMatching(why) }]);
    // Where and what, never the value.
    expect(message).not.toContain(timestamp);
  });

  it('strips values a validator message must not carry', () => {
    const leaky = {
      ...minimal,
      interceptors: [
        {
          ...full.interceptors[1],
          messages: [{ severity: 'error', message: 'an email', value: 'a@b.example' }],
        },
      ],
    };
    expect(JSON.stringify(parseAuditRecord(leaky))).not.toContain('a@b.example');
  });
});

describe('createAuditRecord', () => {
  const input = {
    kind: 'chain',
    event: 'tools/call',
    phase: 'request',
    method: 'tools/call',
    decision: 'allowed',
    status: 'success',
    durationMs: 1,
  } as const;

  it('fills a valid id, the time and empty lists', () => {
    const before = Date.now();
    const record = createAuditRecord(input);
    expect(parseAuditRecord(record)).toEqual(record);
    expect(record).toMatchObject({ interceptors: [], abortReasons: [] });
    expect(Date.parse(record.timestamp)).toBeGreaterThanOrEqual(before);
    expect(decodeTime(record.id)).toBeGreaterThanOrEqual(before - 1);
  });

  it('makes ids that sort in creation order, also within one millisecond', () => {
    const ids = Array.from({ length: 1000 }, () => createAuditRecord(input).id);
    expect(new Set(ids).size).toBe(1000);
    expect([...ids].sort()).toEqual(ids);
  });

  it('keeps a given id and timestamp, and cuts a long preview', () => {
    const record = createAuditRecord({
      ...input,
      id: minimal.id,
      timestamp: minimal.timestamp,
      payloadPreview: 'y'.repeat(PAYLOAD_PREVIEW_MAX_LENGTH + PAYLOAD_PREVIEW_SCRUB_MARGIN + 10),
    });
    expect(record.id).toBe(minimal.id);
    expect(record.timestamp).toBe(minimal.timestamp);
    // Cut with a margin past the stored length: the worker scrubs, then cuts to the rest.
    expect(record.payloadPreview).toHaveLength(
      PAYLOAD_PREVIEW_MAX_LENGTH + PAYLOAD_PREVIEW_SCRUB_MARGIN,
    );
  });

  it('cuts a preview before an emoji straddling its window, never through it', () => {
    const window = PAYLOAD_PREVIEW_MAX_LENGTH + PAYLOAD_PREVIEW_SCRUB_MARGIN;
    const straddling = createAuditRecord({
      ...input,
      payloadPreview: `${'a'.repeat(window - 1)}\u{1F600} and more`,
    });
    expect(straddling.payloadPreview).toBe('a'.repeat(window - 1));
    const ending = createAuditRecord({
      ...input,
      payloadPreview: `${'a'.repeat(window - 2)}\u{1F600} and more`,
    });
    expect(ending.payloadPreview).toBe(`${'a'.repeat(window - 2)}\u{1F600}`);
  });

  it.each([
    ['year 0', '0000-01-01T00:00:00Z'],
    ['an offset beyond ±15:59', '2026-11-30T12:00:00+16:00'],
    ['no date-time', 'yesterday'],
  ])('refuses a given timestamp of %s, naming the field', (_, timestamp) => {
    expect(recordErrorOf(() => createAuditRecord({ ...input, timestamp })).issues).toEqual([
      { path: 'timestamp', message: expect.any(String) },
    ]);
  });
});
