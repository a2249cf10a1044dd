import { describe, expect, it } from 'vitest';
import { recordAt } from '../test/stores.ts';
import { PAYLOAD_PREVIEW_MAX_LENGTH } from './record.ts';
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
      abortReasons: [
        { interceptor: 'x', reason: 'found bob@example.com', type: 'validation', phase: 'request' },
      ],
      interceptors: [
        {
          name: 'x',
          type: 'validation',
          mode: 'active',
          outcome: 'denied',
          durationMs: 1,
          messages: [{ severity: 'error', message: 'phone 5550109999' }],
        },
      ],
    });
    const before = structuredClone(record);
    const { record: clean, failed } = scrubRecord(record, defaultScrubber);
    expect(failed).toBe(0);
    expect(clean.payloadPreview).toBe('{"email":"[EMAIL]"}');
    expect(clean.abortReasons[0]?.reason).toBe('found [EMAIL]');
    expect(clean.interceptors[0]?.messages?.[0]?.message).toBe('phone [NUMBER]');
    expect(record).toEqual(before);
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
    // Both texts of the record (its preview and its target, `echo`) are blanked and counted.
    expect(failed).toBe(2);
    expect(clean.payloadPreview).toBe(SCRUB_FAILED);
    expect(clean.target).toBe(SCRUB_FAILED);
  });
});
