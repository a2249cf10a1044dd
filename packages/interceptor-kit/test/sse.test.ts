/** The event-stream parser: line endings, chunk boundaries anywhere, fields, comments. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseSseEvents, type SseEvent, SseParser } from '../src/sse.ts';

function feed(chunks: string[]): SseEvent[] {
  const events: SseEvent[] = [];
  const parser = new SseParser((e) => events.push(e));
  for (const chunk of chunks) parser.push(chunk);
  return events;
}

const STREAM =
  ': a comment\r\n' +
  'event: message\r\n' +
  'id: 7\r\n' +
  'data: {"jsonrpc":"2.0",\r\n' +
  'data:"id":1}\r\n' +
  '\r\n' +
  'retry: 1500\n' +
  'data: second\n' +
  '\n' +
  'event: ping\r' +
  'data\r' +
  '\r';

const EXPECTED: SseEvent[] = [
  { event: 'message', data: '{"jsonrpc":"2.0",\n"id":1}', id: '7', retryMs: undefined },
  { event: 'message', data: 'second', id: '7', retryMs: 1500 },
  { event: 'ping', data: '', id: '7', retryMs: 1500 },
];

describe('SseParser', () => {
  it('reads CRLF, LF and CR line endings, multi-line data, id, retry and named events', () => {
    expect(feed([STREAM])).toEqual(EXPECTED);
  });

  it('gives the same events whatever the chunk boundaries (CRLF split included)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: STREAM.length - 1 }), { maxLength: 12 }),
        (cuts) => {
          const sorted = [...cuts].sort((a, b) => a - b);
          const chunks: string[] = [];
          let from = 0;
          for (const at of sorted) {
            chunks.push(STREAM.slice(from, at));
            from = at;
          }
          chunks.push(STREAM.slice(from));
          expect(feed(chunks)).toEqual(EXPECTED);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('dispatches nothing for an event without data, and ignores unknown fields and bad ids', () => {
    const events = feed(['event: x\nfoo: bar\n\nid: a\0b\ndata: d\nretry: soon\n\n']);
    expect(events).toEqual([{ event: 'message', data: 'd', id: undefined, retryMs: undefined }]);
  });

  it('keeps a partial event until its blank line arrives; parseSseEvents ends the stream', () => {
    expect(feed(['data: unfinished\n'])).toEqual([]);
    expect(parseSseEvents('data: a\n\ndata: unfinished')).toEqual([
      { event: 'message', data: 'a', id: undefined, retryMs: undefined },
      { event: 'message', data: 'unfinished', id: undefined, retryMs: undefined },
    ]);
  });

  it('keeps multi-byte text and a leading space only once removed', () => {
    expect(feed(['data:  café 🚀\n\n'])).toEqual([
      { event: 'message', data: ' café 🚀', id: undefined, retryMs: undefined },
    ]);
  });

  it('reads a multi-megabyte data line fed in a thousand chunks, CRLF split at the end', () => {
    const text = `{"text":"${'y'.repeat(4 * 1024 * 1024)}"}`;
    const stream = `event: message\r\ndata: ${text}\r\n\r\n`;
    const size = Math.ceil(stream.length / 1000);
    const chunks: string[] = [];
    for (let at = 0; at < stream.length; at += size) chunks.push(stream.slice(at, at + size));
    // The last CRLF split across two chunks, as a 4 KiB boundary can fall.
    const last = chunks.pop() ?? '';
    chunks.push(last.slice(0, -1), last.slice(-1));
    const events = feed(chunks);
    expect(events).toHaveLength(1);
    expect(events[0]?.data.length).toBe(text.length);
    expect(events[0]?.data).toBe(text);
  });

  it('takes an empty chunk between a CR and its LF without seeing an empty line', () => {
    expect(feed(['data: a\r', '', '\ndata: b\n\n'])).toEqual([
      { event: 'message', data: 'a\nb', id: undefined, retryMs: undefined },
    ]);
  });
});
