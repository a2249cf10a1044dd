import { describe, expect, it } from 'vitest';
import { deniedWith, recordAt } from '../test/stores.ts';
import { AUDIT_RECORD_LIMITS, TRUNCATION_MARKER } from './bounds.ts';
import { type AuditRecord, PAYLOAD_PREVIEW_MAX_LENGTH } from './record.ts';
import { defaultScrubber, SCRUB_FAILED, scrubRecord } from './scrub.ts';

describe('defaultScrubber', () => {
  it.each([
    ['mail alice.smith+tag@example.co.uk now', 'mail [EMAIL] now'],
    ['call +1 (555) 010-9999 today', 'call [NUMBER] today'],
    ['card 4111 1111 1111 1111', 'card [NUMBER]'],
    ['iban digits 123456', 'iban digits [NUMBER]'],
    ['ssn 123-45-6789', 'ssn [NUMBER]'],
    ['password=hunter2 next', 'password=[SECRET] next'],
    ['{"apiKey": "abc def", "city": "Paris"}', '{"apiKey": "[SECRET]", "city": "Paris"}'],
    ["db_password: 'p@ss w'", "db_password: '[SECRET]'"],
    ['authorization: Bearer abc.def-123', 'authorization: [SECRET] [SECRET]'],
    ['token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig', 'token=[SECRET]'],
    ['jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln', 'jwt [SECRET]'],
    ['AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI', 'AWS_SECRET_ACCESS_KEY=[SECRET]'],
  ])('%j → %j', (input, output) => {
    expect(defaultScrubber(input)).toBe(output);
  });

  it.each(['weather in Paris', 'retry 3 of 5 after 1000 ms', 'tools/call get_weather', ''])(
    'leaves %j alone',
    (text) => {
      expect(defaultScrubber(text)).toBe(text);
    },
  );
});

describe('scrubRecord', () => {
  it('scrubs the preview, abort reasons and messages, and leaves the input unchanged', () => {
    const record = recordAt(0, {
      payloadPreview: '{"email":"bob@example.com"}',
      ...deniedWith('found bob@example.com', 'phone 5550109999'),
    });
    const before = structuredClone(record);
    const { record: clean, failed } = scrubRecord(record, defaultScrubber);
    expect(failed).toBe(0);
    expect(clean.payloadPreview).toBe('{"email":"[EMAIL]"}');
    expect(clean.abortReasons[0]?.reason).toBe('found [EMAIL]');
    expect(clean.interceptors[0]?.messages?.[0]?.message).toBe('phone [NUMBER]');
    expect(record).toEqual(before);
  });

  it('scrubs a validator message path, which may run through a caller-chosen key', () => {
    const denied = deniedWith('duplicate contact');
    const [entry] = denied.interceptors;
    const record = recordAt(0, {
      ...denied,
      interceptors: [
        {
          ...(entry as AuditRecord['interceptors'][number]),
          messages: [
            { path: 'arguments.contacts["bob@example.com"]', severity: 'error', message: 'dup' },
            { path: 'arguments.city', severity: 'warn', message: 'odd city' },
            { severity: 'info', message: 'no path' },
          ],
        },
      ],
    });
    const { record: clean, failed } = scrubRecord(record, defaultScrubber);
    expect(failed).toBe(0);
    expect(clean.interceptors[0]?.messages).toEqual([
      { path: 'arguments.contacts["[EMAIL]"]', severity: 'error', message: 'dup' },
      { path: 'arguments.city', severity: 'warn', message: 'odd city' },
      { severity: 'info', message: 'no path' },
    ]);
  });

  it('scrubs the target (tool, prompt name or resource URI) like the rest', () => {
    const record = recordAt(0, {
      event: 'resources/read',
      method: 'resources/read',
      target: 'mailto:bob@example.com?card=4111111111111111',
    });
    const { record: clean, failed } = scrubRecord(record, defaultScrubber);
    expect(failed).toBe(0);
    expect(clean.target).toBe('mailto:[EMAIL]?card=[NUMBER]');
    expect(scrubRecord(recordAt(0, { target: 'get_weather' }), defaultScrubber).record.target).toBe(
      'get_weather',
    );
  });

  it('scrubs the event and method (a made-up method names its event), keeping MCP methods', () => {
    const invented = recordAt(0, {
      event: 'tools/bob@example.com',
      method: 'tools/bob@example.com',
    });
    const { record: clean, failed } = scrubRecord(invented, defaultScrubber);
    expect(failed).toBe(0);
    expect(clean).toMatchObject({ event: 'tools/[EMAIL]', method: 'tools/[EMAIL]' });
    const apart = recordAt(0, { event: 'x/alice@example.com', method: 'y/4111 1111 1111 1111' });
    expect(scrubRecord(apart, defaultScrubber).record).toMatchObject({
      event: 'x/[EMAIL]',
      method: 'y/[NUMBER]',
    });
    for (const method of ['tools/call', 'resources/templates/list', 'notifications/progress'])
      expect(
        scrubRecord(recordAt(0, { event: method, method }), defaultScrubber).record,
      ).toMatchObject({ event: method, method });
  });

  it('keeps a scrubbed event within its bound when the replacement is longer', () => {
    // 36 addresses of 6 characters each become 36 of `[EMAIL]` (7): 288 characters.
    const event = Array.from({ length: 36 }, () => 'a@b.io').join(' ');
    expect(event.length).toBeLessThanOrEqual(AUDIT_RECORD_LIMITS.eventLength);
    const { record: clean } = scrubRecord(recordAt(0, { event, method: event }), defaultScrubber);
    expect(clean.event).toHaveLength(AUDIT_RECORD_LIMITS.eventLength);
    expect(clean.event.endsWith(TRUNCATION_MARKER)).toBe(true);
    expect(clean.event).not.toContain('@b.io');
    expect(clean.method).toBe(clean.event);
  });

  it('keeps a scrubbed target within its bound when the replacement is longer', () => {
    // 73 addresses of 6 characters each (510 with spaces) become 73 of `[EMAIL]` (583).
    const target = Array.from({ length: 73 }, () => 'a@b.io').join(' ');
    expect(target.length).toBeLessThanOrEqual(AUDIT_RECORD_LIMITS.idLength);
    const { record: clean } = scrubRecord(recordAt(0, { target }), defaultScrubber);
    expect(clean.target).toHaveLength(AUDIT_RECORD_LIMITS.idLength);
    expect(clean.target?.endsWith(TRUNCATION_MARKER)).toBe(true);
    expect(clean.target).not.toContain('@b.io');
  });

  it('cuts a scrubbed target before an emoji straddling the cut, never through it', () => {
    // `x@y.io ` becomes `[EMAIL] ` (one longer), which moves the emoji onto the cut.
    const kept = AUDIT_RECORD_LIMITS.idLength - TRUNCATION_MARKER.length;
    const head = 'a'.repeat(kept - 1 - '[EMAIL] '.length);
    const target = `x@y.io ${head}\u{1F600}${'b'.repeat(12)}`;
    expect(target.length).toBe(AUDIT_RECORD_LIMITS.idLength);
    const { record: clean } = scrubRecord(recordAt(0, { target }), defaultScrubber);
    expect(clean.target).toBe(`[EMAIL] ${head}${TRUNCATION_MARKER}`);
  });

  it('keeps scrubbed abort reasons and validator messages within their bound', () => {
    // 73 addresses of 6 characters each (510 with spaces) become 73 of `[EMAIL]` (583).
    const text = Array.from({ length: 73 }, () => 'a@b.io').join(' ');
    expect(text.length).toBeLessThanOrEqual(AUDIT_RECORD_LIMITS.messageLength);
    const { record: clean } = scrubRecord(recordAt(0, deniedWith(text)), defaultScrubber);
    const texts = [clean.abortReasons[0]?.reason, clean.interceptors[0]?.messages?.[0]?.message];
    for (const cut of texts) {
      expect(cut).toHaveLength(AUDIT_RECORD_LIMITS.messageLength);
      expect(cut?.endsWith(TRUNCATION_MARKER)).toBe(true);
      expect(cut).not.toContain('@b.io');
    }
  });

  it('cuts a scrubbed abort reason or message before an emoji straddling the cut', () => {
    // `x@y.io ` becomes `[EMAIL] ` (one longer), which moves the emoji onto the cut.
    const kept = AUDIT_RECORD_LIMITS.messageLength - TRUNCATION_MARKER.length;
    const head = 'a'.repeat(kept - 1 - '[EMAIL] '.length);
    const text = `x@y.io ${head}\u{1F600}${'b'.repeat(12)}`;
    expect(text.length).toBe(AUDIT_RECORD_LIMITS.messageLength);
    const { record: clean } = scrubRecord(recordAt(0, deniedWith(text)), defaultScrubber);
    expect(clean.abortReasons[0]?.reason).toBe(`[EMAIL] ${head}${TRUNCATION_MARKER}`);
    expect(clean.interceptors[0]?.messages?.[0]?.message).toBe(
      `[EMAIL] ${head}${TRUNCATION_MARKER}`,
    );
  });

  it('cuts a long preview to its stored length only after scrubbing it', () => {
    // A producer's preview may run PAYLOAD_PREVIEW_SCRUB_MARGIN past the stored length so a
    // value cut there is still whole when scrubbed; here an email straddles the stored cut.
    const head = 'x'.repeat(PAYLOAD_PREVIEW_MAX_LENGTH - 6);
    const record = recordAt(0, { payloadPreview: `${head} bob@example.com and more` });
    const { record: clean } = scrubRecord(record, defaultScrubber);
    expect(clean.payloadPreview).toBe(`${head} [EMAI`);
    expect(clean.payloadPreview).toHaveLength(PAYLOAD_PREVIEW_MAX_LENGTH);
  });

  it('cuts a preview before an emoji straddling its stored length, never through it', () => {
    const straddling = recordAt(0, {
      payloadPreview: `${'a'.repeat(PAYLOAD_PREVIEW_MAX_LENGTH - 1)}\u{1F600} and more`,
    });
    expect(scrubRecord(straddling, defaultScrubber).record.payloadPreview).toBe(
      'a'.repeat(PAYLOAD_PREVIEW_MAX_LENGTH - 1),
    );
    const ending = recordAt(0, {
      payloadPreview: `${'a'.repeat(PAYLOAD_PREVIEW_MAX_LENGTH - 2)}\u{1F600} and more`,
    });
    expect(scrubRecord(ending, defaultScrubber).record.payloadPreview).toBe(
      `${'a'.repeat(PAYLOAD_PREVIEW_MAX_LENGTH - 2)}\u{1F600}`,
    );
  });

  it('blanks text the scrubber fails on instead of storing it', () => {
    const record = recordAt(0, { payloadPreview: 'secret stuff' });
    const { record: clean, failed } = scrubRecord(record, () => {
      throw new Error('boom');
    });
    // Every text of the record (its preview, its target `echo`, its event `tools/call`, which
    // is its method too and scrubbed once) is blanked and counted.
    expect(failed).toBe(3);
    expect(clean.payloadPreview).toBe(SCRUB_FAILED);
    expect(clean.target).toBe(SCRUB_FAILED);
    expect(clean).toMatchObject({ event: SCRUB_FAILED, method: SCRUB_FAILED });
  });
});
