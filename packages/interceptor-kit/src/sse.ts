/**
 * A server-sent events parser (the WHATWG "event stream" format) that works on plain strings:
 * fed chunk by chunk from a Node stream, it emits each complete event. It replaces the
 * WHATWG stream pipeline (`TextDecoderStream` + a transform) that costs more than the
 * request it carries on a hot path.
 */

/** One dispatched event. `event` is `message` when the stream did not name it. */
export interface SseEvent {
  event: string;
  data: string;
  /** The last event id seen on the stream so far (for `Last-Event-ID` on reconnect). */
  id: string | undefined;
  /** A `retry:` reconnection delay in milliseconds, when the server sent one. */
  retryMs: number | undefined;
}

/** Incremental event-stream parser. Lines end with CRLF, LF or CR. */
export class SseParser {
  /** Pieces of the line not yet ended: joined once, when its end arrives. */
  #partial: string[] = [];
  #data: string[] = [];
  #event = '';
  #id: string | undefined;
  #retryMs: number | undefined;
  #pendingCr = false;
  readonly #onEvent: (event: SseEvent) => void;

  constructor(onEvent: (event: SseEvent) => void) {
    this.#onEvent = onEvent;
  }

  /** The last event id seen, if any. */
  get lastEventId(): string | undefined {
    return this.#id;
  }

  /**
   * Feed decoded text; complete events are emitted synchronously. Only the new chunk is
   * scanned: a line that spans many chunks (a multi-megabyte `data:` line) is kept as pieces,
   * so its cost is linear in its length, not in its length times its number of chunks.
   */
  push(chunk: string): void {
    if (chunk === '') return;
    // A CR at the end of the previous chunk already ended its line; a LF right after it is
    // the second half of that CRLF, not an empty line.
    let start = this.#pendingCr && chunk.charCodeAt(0) === 10 ? 1 : 0;
    this.#pendingCr = false;
    for (let i = start; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      let line = chunk.slice(start, i);
      if (this.#partial.length > 0) {
        this.#partial.push(line);
        line = this.#partial.join('');
        this.#partial = [];
      }
      this.#line(line);
      if (c === 13) {
        if (i + 1 < chunk.length) {
          if (chunk.charCodeAt(i + 1) === 10) i++;
        } else this.#pendingCr = true;
      }
      start = i + 1;
    }
    if (start < chunk.length) this.#partial.push(start === 0 ? chunk : chunk.slice(start));
  }

  #line(line: string): void {
    if (line === '') {
      this.#dispatch();
      return;
    }
    if (line.charCodeAt(0) === 58) return; // ':' comment
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case 'data':
        this.#data.push(value);
        break;
      case 'event':
        this.#event = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.#id = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.#retryMs = Number(value);
        break;
      default:
      // Unknown fields are ignored, as the format requires.
    }
  }

  #dispatch(): void {
    const data = this.#data;
    const event = this.#event || 'message';
    this.#data = [];
    this.#event = '';
    if (data.length === 0) return;
    this.#onEvent({ event, data: data.join('\n'), id: this.#id, retryMs: this.#retryMs });
  }
}

/** Every event in a complete event-stream text (a stream that ended without a blank line still dispatches its last event). */
export function parseSseEvents(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  const parser = new SseParser((e) => events.push(e));
  parser.push(text);
  parser.push('\n\n');
  return events;
}
