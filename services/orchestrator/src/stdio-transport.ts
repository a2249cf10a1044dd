/**
 * The gateway's two stdio transports, both reading lines through {@link LineReader}, which
 * bounds a line's size and reads it in time linear in its length:
 *
 * - {@link StdioBackendTransport} spawns a backend and speaks newline-delimited JSON-RPC over
 *   its stdin and stdout, as the SDK's `StdioClientTransport` does (same spawning through
 *   cross-spawn, same close sequence, which here also waits for the SIGKILL to land). The
 *   SDK's read buffer concatenates the whole unread buffer on every chunk and searches it for
 *   a newline from the start each time, so a long line costs its length times its number of
 *   chunks, and a buffer over its 10 MiB cap closes the connection, failing every call in
 *   flight and restarting the child. Here a line over `limits.maxBackendMessageBytes` is
 *   skipped as it streams and the request it answers (if the gateway is waiting for it)
 *   fails with the same -32603 an HTTP backend's oversized answer gets; the connection and
 *   the other calls on it carry on.
 * - {@link StdioIngressTransport} is the gateway's own stdio side for desktop clients.
 */
import type { ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { JsonRpcCode } from '@fleet/core';
import { errorEnvelope } from '@fleet/interceptor-kit';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import spawn from 'cross-spawn';
import {
  DEFAULT_MAX_BACKEND_MESSAGE_BYTES,
  tooLargeMessage,
  tooLargeResponse,
} from './backend-transport.ts';

/** Options for {@link StdioBackendTransport}. */
export interface StdioBackendTransportOptions {
  command: string;
  args?: string[] | undefined;
  /** The child's whole environment. */
  env?: Record<string, string> | undefined;
  cwd?: string | undefined;
  /** Most bytes one line from the server may take. Default 64 MiB. */
  maxMessageBytes?: number | undefined;
}

/**
 * How long close() waits for the child after ending its stdin, after SIGTERM and after
 * SIGKILL: a closed transport has no child left unless the kernel could not kill it.
 */
const CLOSE_GRACE_MS = 2000;
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

type RequestId = string | number;

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

export class StdioBackendTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  readonly #options: StdioBackendTransportOptions;
  readonly #maxMessageBytes: number;
  readonly #lines: LineReader;
  #child: ChildProcess | undefined;
  /**
   * Ids of the requests sent and not answered yet: an oversized line is only taken for the
   * answer to one of these, so a guessed id can never fail a call it does not answer.
   */
  readonly #outstanding = new Set<RequestId>();

  constructor(options: StdioBackendTransportOptions) {
    this.#options = options;
    this.#maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_BACKEND_MESSAGE_BYTES;
    this.#lines = new LineReader(
      this.#maxMessageBytes,
      (line) => this.#line(line),
      (id) => this.#tooLarge(id),
    );
  }

  /** The child's pid once started. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  start(): Promise<void> {
    if (this.#child) throw new Error('StdioBackendTransport already started');
    const { command, args = [], env, cwd } = this.#options;
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, {
        env,
        cwd,
        stdio: ['pipe', 'pipe', 'inherit'],
        shell: false,
        windowsHide: process.platform === 'win32',
      });
      this.#child = child;
      child.on('error', (error) => {
        reject(error);
        this.onerror?.(error);
      });
      child.on('spawn', () => resolve());
      child.on('close', () => {
        if (this.#child === child) this.#child = undefined;
        this.#reset();
        this.onclose?.();
      });
      child.stdin?.on('error', (error) => this.onerror?.(error));
      child.stdout?.on('error', (error) => this.onerror?.(error));
      child.stdout?.on('data', (chunk: Buffer) => this.#lines.push(chunk));
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (!stdin) return Promise.reject(new Error('Not connected'));
    if ('method' in message) {
      if ('id' in message) this.#outstanding.add(message.id);
      // A cancelled request may never be answered: stop waiting for it here too.
      else if (message.method === 'notifications/cancelled') {
        const id = (message.params as { requestId?: unknown } | undefined)?.requestId;
        if (typeof id === 'string' || typeof id === 'number') this.#outstanding.delete(id);
      }
    }
    return writeLine(stdin, message);
  }

  async close(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    this.#reset();
    if (!child) return;
    const closed = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('close', () => resolve());
    });
    const within = () =>
      Promise.race([closed, new Promise((r) => setTimeout(r, CLOSE_GRACE_MS).unref())]);
    try {
      child.stdin?.end();
    } catch {
      // already gone
    }
    await within();
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      if (child.exitCode !== null || child.signalCode !== null) break;
      try {
        child.kill(signal);
      } catch {
        // already gone
      }
      await within();
    }
  }

  #reset(): void {
    this.#lines.reset();
    this.#outstanding.clear();
  }

  #line(line: string): void {
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(line));
    } catch {
      this.onerror?.(
        new Error(`backend wrote a line that is not a JSON-RPC message: ${line.slice(0, 200)}`),
      );
      return;
    }
    if (!('method' in message) && 'id' in message && message.id !== undefined)
      this.#outstanding.delete(message.id);
    this.onmessage?.(message);
  }

  /** A line over the limit: the request it answers fails naming the limit, if it is known. */
  #tooLarge(id: RequestId | undefined): void {
    if (id === undefined || !this.#outstanding.delete(id))
      this.onerror?.(new Error(tooLargeMessage(this.#maxMessageBytes)));
    else this.onmessage?.(tooLargeResponse(id, this.#maxMessageBytes));
  }
}

/** Write `message` as one line; settles once the stream takes more (its buffer drained). */
function writeLine(stream: Writable, message: unknown): Promise<void> {
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
 * The gateway's own stdio side (`fleet stdio`, `main.js --stdio`): a desktop client's
 * messages one per line on stdin, ours on stdout. It replaces the SDK's
 * `StdioServerTransport`, which reports a bad line only to the server's `onerror` (the client
 * waits for an answer that never comes) and ends the session once its buffer passes 10 MiB.
 * Here a bad line gets the JSON-RPC error the HTTP ingress gives the same body (-32700 for
 * one that is not JSON; -32600 for a batch, for JSON that is not a JSON-RPC message and for a
 * line over `limits.maxBodyBytes`, with its id when it carries one) and the session goes on.
 */
export class StdioIngressTransport implements Transport {
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
    if (this.#started) throw new Error('StdioIngressTransport already started');
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
