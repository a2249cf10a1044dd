/**
 * The gateway's stdio backend transport: spawns a backend and speaks newline-delimited
 * JSON-RPC over its stdin and stdout, as the SDK's `StdioClientTransport` does (same spawning
 * through cross-spawn, same close sequence, which here also waits for the SIGKILL to land),
 * reading lines through the kit's `LineReader`, which bounds a line's size and reads it in
 * time linear in its length. The SDK's read buffer costs a long line its length times its
 * number of chunks, and past its 10 MiB cap closes the connection, failing every call in
 * flight and restarting the child. Here a line over `limits.maxBackendMessageBytes` is
 * skipped as it streams and the request it answers (if the gateway is waiting for it) fails
 * with the same -32603 an HTTP backend's oversized answer gets; the connection and the other
 * calls on it carry on. (The gateway's own stdio side, for desktop clients, is the kit's
 * `BoundedStdioServerTransport`.)
 */
import type { ChildProcess } from 'node:child_process';
import { LineReader, type RequestId, writeLine } from '@fleet/interceptor-kit';
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

/** A stdio backend: the child, its lines, and the requests it has not answered yet. */
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
