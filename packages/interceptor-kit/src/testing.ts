/**
 * Helpers for tests of services built with the kit (`@fleet/interceptor-kit/testing`; needs
 * vitest): cleanups that always run, and a slow-loris client.
 */
import { connect } from 'node:net';
import { afterEach } from 'vitest';

const cleanups: Array<() => Promise<unknown>> = [];

/** Run `cleanup` after the current test (last registered runs first), even when it fails. */
export function defer(cleanup: () => Promise<unknown>): void {
  cleanups.push(cleanup);
}

afterEach(async () => {
  while (cleanups.length > 0)
    await cleanups
      .pop()?.()
      .catch(() => undefined);
});

/** A client that sends a POST's headers, then one byte of its body every `intervalMs`. */
export interface SlowLoris {
  /** True once the server closed the connection. */
  readonly closed: boolean;
  /** Everything the server sent back (latin1). */
  received(): string;
  /** Resolves when the server closes the connection, or after `timeoutMs`. */
  untilClosed(timeoutMs?: number): Promise<boolean>;
  /** Stop dripping and close the socket. */
  stop(): void;
}

/**
 * Open a slow-loris request to `baseUrl` + `path`: a body that keeps arriving, a byte at a
 * time, so the socket is never idle and only a whole-request deadline can end it.
 */
export async function startSlowLoris(
  baseUrl: string,
  options: { path?: string; intervalMs?: number; declaredLength?: number } = {},
): Promise<SlowLoris> {
  const { path = '/mcp', intervalMs = 100, declaredLength = 1000 } = options;
  const target = new URL(baseUrl);
  const socket = connect(Number(target.port), target.hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  let received = '';
  let closed = false;
  const waiters: Array<() => void> = [];
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  socket.on('close', () => {
    closed = true;
    for (const wake of waiters.splice(0)) wake();
  });
  socket.on('error', () => undefined);
  socket.write(
    `POST ${path} HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\n` +
      `accept: application/json, text/event-stream\r\ncontent-length: ${declaredLength}\r\n\r\n`,
  );
  const drip = setInterval(() => {
    if (!socket.destroyed) socket.write(' ');
  }, intervalMs);
  drip.unref();
  return {
    get closed() {
      return closed;
    },
    received: () => received,
    untilClosed: (timeoutMs = 10_000) =>
      new Promise<boolean>((resolve) => {
        if (closed) return resolve(true);
        const timer = setTimeout(() => resolve(closed), timeoutMs);
        waiters.push(() => {
          clearTimeout(timer);
          resolve(true);
        });
      }),
    stop() {
      clearInterval(drip);
      socket.destroy();
    },
  };
}
