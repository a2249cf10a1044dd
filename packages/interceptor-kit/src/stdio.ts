/**
 * MCP over stdio, one JSON-RPC message per line, read through {@link LineReader}: a line's
 * size is bounded, and reading it costs its length once. (The SDK's read buffer concatenates
 * the whole unread buffer on every chunk and searches it for a newline from the start each
 * time, so a long line costs its length times its number of chunks; past its fixed 10 MiB cap
 * it closes the connection.)
 *
 * - {@link BoundedStdioServerTransport}, a server's side on this process's stdin/stdout:
 *   {@link serveStdio} here, the orchestrator's `--stdio`.
 * - {@link LineReader} and {@link writeLine} for a client's side (the orchestrator's stdio
 *   backends).
 */
import type { Readable, Writable } from 'node:stream';
import { JsonRpcCode } from '@fleet/core';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import type { InterceptorHost } from './host.ts';
import { DEFAULT_MAX_BODY, errorEnvelope } from './http.ts';
import type { InvokeLimits } from './limits.ts';
import { createInterceptorMcpServer, type ServerIdentity } from './mcp-server.ts';

/**
 * Connect `host` to this process's stdin/stdout. Resolves once connected. A line over
 * `maxBodyBytes` (default as over HTTP) is refused with -32600, the session going on.
 */
export async function serveStdio(
  host: InterceptorHost,
  identity: ServerIdentity & InvokeLimits & { maxBodyBytes?: number },
): Promise<Server> {
  const server = createInterceptorMcpServer(host, identity);
  await server.connect(new BoundedStdioServerTransport(identity.maxBodyBytes ?? DEFAULT_MAX_BODY));
  return server;
}

/**
 * Bytes kept from each end of a line that is skipped for its size: where a response's `id`
 * is (first with most serialisers' key order, last with the SDK's `{result, jsonrpc, id}`).
 */
const EDGE_BYTES = 256;
const ID = String.raw`(-?\d+|"(?:[^"\\]|\\.)*")`;
/** A top-level `id` as the first member (after an optional `jsonrpc`) of a line. */
const HEAD_ID = new RegExp(
  String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID}\s*[,}]`,
);
/** A top-level `id` as the last member: only the object's own closing brace follows it. */
const TAIL_ID = new RegExp(String.raw`[,{]\s*"id"\s*:\s*${ID}\s*\}\s*$`);

/** A JSON-RPC request id. */
export type RequestId = string | number;

/**
 * Splits a byte stream into lines, each byte scanned once, an unended line kept as the
 * chunks it came in. A line longer than `maxLineBytes` is skipped as it streams; what is
 * left of it for `onTooLarge` is the id it carries at either end, if one is there.
 */
export class LineReader {
  readonly #maxLineBytes: number;
  readonly #onLine: (line: string) => void;
  readonly #onTooLarge: (id: RequestId | undefined) => void;
  #pieces: Buffer[] = [];
  #pending = 0;
  /** The first and latest bytes of a line being skipped for its size. */
  #skipped: { head: Buffer; tail: Buffer } | undefined;

  constructor(
    maxLineBytes: number,
    onLine: (line: string) => void,
    onTooLarge: (id: RequestId | undefined) => void,
  ) {
    this.#maxLineBytes = maxLineBytes;
    this.#onLine = onLine;
    this.#onTooLarge = onTooLarge;
  }

  push(chunk: Buffer): void {
    let from = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, from);
      const piece = chunk.subarray(from, newline === -1 ? chunk.length : newline);
      if (this.#skipped) this.#skipped.tail = edge([this.#skipped.tail, piece], 'tail');
      else if (this.#pending + piece.length > this.#maxLineBytes) {
        const line = [...this.#pieces, piece];
        this.#skipped = { head: edge(line, 'head'), tail: edge(line, 'tail') };
        this.#pieces = [];
        this.#pending = 0;
      } else if (piece.length > 0) {
        this.#pieces.push(piece);
        this.#pending += piece.length;
      }
      if (newline === -1) return;
      this.#endLine();
      from = newline + 1;
    }
  }

  /** Forget an unended line. */
  reset(): void {
    this.#pieces = [];
    this.#pending = 0;
    this.#skipped = undefined;
  }

  #endLine(): void {
    const pieces = this.#pieces;
    const skipped = this.#skipped;
    this.reset();
    if (skipped) {
      const id =
        idOf(skipped.head.toString('utf8'), HEAD_ID) ??
        idOf(skipped.tail.toString('utf8'), TAIL_ID);
      this.#onTooLarge(id);
      return;
    }
    const line = (pieces.length === 1 ? (pieces[0] as Buffer) : Buffer.concat(pieces))
      .toString('utf8')
      .trim();
    // Blank lines are no message; some peers print them between messages.
    if (line !== '') this.#onLine(line);
  }
}

/** Write `message` as one line; settles once the stream takes more (its buffer drained). */
export function writeLine(stream: Writable, message: unknown): Promise<void> {
  return new Promise((resolve) => {
    if (stream.write(`${JSON.stringify(message)}\n`)) resolve();
    else stream.once('drain', resolve);
  });
}

/** The first or last {@link EDGE_BYTES} of the bytes `buffers` hold in order. */
function edge(buffers: Buffer[], end: 'head' | 'tail'): Buffer {
  const taken: Buffer[] = [];
  let length = 0;
  for (let i = 0; i < buffers.length && length < EDGE_BYTES; i++) {
    const buffer = buffers[end === 'head' ? i : buffers.length - 1 - i] as Buffer;
    const need = EDGE_BYTES - length;
    const part =
      end === 'head'
        ? buffer.subarray(0, need)
        : buffer.subarray(Math.max(0, buffer.length - need));
    if (end === 'head') taken.push(part);
    else taken.unshift(part);
    length += part.length;
  }
  // Concatenated, so a copy: the chunk it came from is not kept alive by a few bytes of it.
  return Buffer.concat(taken);
}

function idOf(text: string, pattern: RegExp): RequestId | undefined {
  const raw = pattern.exec(text)?.[1];
  if (raw === undefined) return undefined;
  try {
    const id: unknown = JSON.parse(raw);
    return typeof id === 'string' || typeof id === 'number' ? id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * An MCP server's side of stdio: a client's messages one per line on stdin, ours on stdout.
 * In place of the SDK's `StdioServerTransport`, which reports a bad line only to the server's
 * `onerror` (the client waits for an answer that never comes) and ends the session once its
 * buffer passes 10 MiB: a bad line gets the JSON-RPC error an HTTP server gives the same body
 * (-32700 for one that is not JSON; -32600 for a batch, for JSON that is not a JSON-RPC
 * message and for a line over `maxMessageBytes`, with its id when it carries one) and the
 * session goes on.
 */
export class BoundedStdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  readonly #input: Readable;
  readonly #output: Writable;
  readonly #lines: LineReader;
  #started = false;
  readonly #onData = (chunk: Buffer) => this.#lines.push(chunk);
  readonly #onError = (error: Error) => this.onerror?.(error);

  constructor(
    maxMessageBytes: number,
    input: Readable = process.stdin,
    output: Writable = process.stdout,
  ) {
    this.#input = input;
    this.#output = output;
    this.#lines = new LineReader(
      maxMessageBytes,
      (line) => this.#line(line),
      (id) =>
        this.#refuse(id, JsonRpcCode.INVALID_REQUEST, `Request exceeds ${maxMessageBytes} bytes`, {
          reason: 'limit_exceeded',
          limit: 'maxBodyBytes',
          max: maxMessageBytes,
        }),
    );
  }

  async start(): Promise<void> {
    if (this.#started) throw new Error('BoundedStdioServerTransport already started');
    this.#started = true;
    this.#input.on('data', this.#onData);
    this.#input.on('error', this.#onError);
  }

  send(message: JSONRPCMessage): Promise<void> {
    return writeLine(this.#output, message);
  }

  async close(): Promise<void> {
    this.#input.off('data', this.#onData);
    this.#input.off('error', this.#onError);
    if (this.#input.listenerCount('data') === 0) this.#input.pause();
    this.#lines.reset();
    this.onclose?.();
  }

  #refuse(id: unknown, code: number, message: string, data?: unknown): void {
    void writeLine(this.#output, errorEnvelope(id, code, message, data));
  }

  #line(line: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      this.#refuse(null, JsonRpcCode.PARSE_ERROR, 'Parse error: line is not valid JSON');
      return;
    }
    if (Array.isArray(parsed)) {
      this.#refuse(null, JsonRpcCode.INVALID_REQUEST, 'JSON-RPC batches are not supported');
      return;
    }
    const message = JSONRPCMessageSchema.safeParse(parsed);
    if (!message.success) {
      this.#refuse(
        (parsed as { id?: unknown } | null)?.id,
        JsonRpcCode.INVALID_REQUEST,
        'Invalid Request: expected a JSON-RPC message object',
      );
      return;
    }
    this.onmessage?.(message.data);
  }
}
