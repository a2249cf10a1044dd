/**
 * The gateway's stdio client transport for backends: spawns the server and speaks
 * newline-delimited JSON-RPC over its stdin and stdout, as the SDK's `StdioClientTransport`
 * does (same spawning through cross-spawn, same close sequence, which here also waits for
 * the SIGKILL to land), with one difference that
 * matters for a gateway: a line's size is bounded by `limits.maxBackendMessageBytes`, and
 * reading it costs its length once.
 *
 * The SDK's read buffer concatenates the whole unread buffer on every chunk and searches it
 * for a newline from the start each time, so a long line costs its length times its number
 * of chunks, and a buffer over its 10 MiB cap closes the connection, failing every call in
 * flight and restarting the child. Here a line is kept as its chunks until its newline; past
 * the limit the rest of it is skipped, and the request it answers (if the gateway is waiting
 * for it) fails with the same -32603 an HTTP backend's oversized answer gets. The connection
 * and the other calls on it carry on.
 */
import type { ChildProcess } from 'node:child_process';
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

/** A line being skipped because it is over the limit: its first and latest bytes. */
interface Skipped {
  head: Buffer;
  tail: Buffer;
}

export class StdioBackendTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  readonly #options: StdioBackendTransportOptions;
  readonly #maxMessageBytes: number;
  #child: ChildProcess | undefined;
  /** The unended line's chunks, and their total length. */
  #pieces: Buffer[] = [];
  #pending = 0;
  #skipped: Skipped | undefined;
  /**
   * Ids of the requests sent and not answered yet: an oversized line is only taken for the
   * answer to one of these, so a guessed id can never fail a call it does not answer.
   */
  readonly #outstanding = new Set<RequestId>();

  constructor(options: StdioBackendTransportOptions) {
    this.#options = options;
    this.#maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_BACKEND_MESSAGE_BYTES;
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
      child.stdout?.on('data', (chunk: Buffer) => this.#read(chunk));
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
    return new Promise((resolve) => {
      if (stdin.write(`${JSON.stringify(message)}\n`)) resolve();
      else stdin.once('drain', resolve);
    });
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
    this.#pieces = [];
    this.#pending = 0;
    this.#skipped = undefined;
    this.#outstanding.clear();
  }

  /** Split `chunk` into lines, each scanned once, the unended rest kept as it came. */
  #read(chunk: Buffer): void {
    let from = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, from);
      const piece = chunk.subarray(from, newline === -1 ? chunk.length : newline);
      if (this.#skipped) this.#skipped.tail = edge([this.#skipped.tail, piece], 'tail');
      else if (this.#pending + piece.length > this.#maxMessageBytes) {
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

  #endLine(): void {
    const skipped = this.#skipped;
    const pieces = this.#pieces;
    this.#skipped = undefined;
    this.#pieces = [];
    this.#pending = 0;
    if (skipped) {
      this.#tooLarge(skipped);
      return;
    }
    const line = (pieces.length === 1 ? (pieces[0] as Buffer) : Buffer.concat(pieces))
      .toString('utf8')
      .trim();
    // Blank lines are no message; some servers print them between messages.
    if (line === '') return;
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
  #tooLarge({ head, tail }: Skipped): void {
    const id = idOf(head.toString('utf8'), HEAD_ID) ?? idOf(tail.toString('utf8'), TAIL_ID);
    if (id === undefined || !this.#outstanding.delete(id)) {
      this.onerror?.(new Error(tooLargeMessage(this.#maxMessageBytes)));
      return;
    }
    this.onmessage?.(tooLargeResponse(id, this.#maxMessageBytes));
  }
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
