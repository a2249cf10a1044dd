/**
 * Listening and draining, shared by every service's `main.ts`: bind (loopback unless told
 * otherwise), print the one JSON start-up line `{"service","url"}`, and on SIGTERM/SIGINT
 * stop accepting, let in-flight requests finish, run cleanups, exit.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Options for {@link listen}. */
export interface ListenOptions {
  /** The service name printed in the start-up line. */
  service: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 picks a free port. Default 0. */
  port?: number;
  /** Print the start-up line to stdout. Default true. */
  announce?: boolean;
  /**
   * Longest time a client may take to send a whole request (headers and body); a slower
   * one (a slow-loris body) gets HTTP 408 and its connection closed. Default 30 s.
   */
  requestTimeoutMs?: number;
  /** Longest time a client may take to send the request headers. Default 10 s. */
  headersTimeoutMs?: number;
}

/** Default {@link ListenOptions.requestTimeoutMs}. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** Default {@link ListenOptions.headersTimeoutMs}. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;

/** A listening HTTP server and its base URL. */
export interface Listening {
  server: Server;
  url: string;
  port: number;
  /** Stop accepting, wait for in-flight requests (at most `graceMs`), then close idle sockets. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Listen with `listener` and announce the base URL. The start-up line tells a supervisor the
 * process is ready, so register {@link onShutdown} before calling this: until a handler is
 * installed, a SIGTERM ends the process by the signal, without draining.
 */
export async function listen(
  listener: RequestListener,
  options: ListenOptions,
): Promise<Listening> {
  const {
    service,
    host = '127.0.0.1',
    port = 0,
    announce = true,
    requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS,
    headersTimeoutMs = DEFAULT_HEADERS_TIMEOUT_MS,
  } = options;
  const headersTimeout = Math.min(headersTimeoutMs, requestTimeoutMs);
  const server = createServer(
    {
      keepAlive: true,
      requestTimeout: requestTimeoutMs,
      headersTimeout,
      // Node checks both deadlines on this interval (30 s by default): keep it well under them.
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersTimeout / 4))),
    },
    listener,
  );
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${shownHost}:${address.port}`;
  if (announce) process.stdout.write(`${JSON.stringify({ service, url })}\n`);
  return {
    server,
    url,
    port: address.port,
    close: (graceMs = 10_000) =>
      new Promise<void>((resolve) => {
        // Keep-alive connections that finish their last request during the drain must not
        // hold the server open: sweep idle ones until it closes, force the rest at the end.
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        const force = setTimeout(() => server.closeAllConnections(), graceMs);
        sweep.unref();
        force.unref();
        server.close(() => {
          clearInterval(sweep);
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}

/** Default {@link ShutdownOptions.deadlineMs}. */
export const DEFAULT_SHUTDOWN_DEADLINE_MS = 25_000;

/** Options for {@link onShutdown}. */
export interface ShutdownOptions {
  /**
   * Longest the whole shutdown may take: past it an error is logged and the process exits
   * with code 1, so a cleanup waiting on something that never answers (a dead Redis, a hung
   * database) cannot keep a stopping service alive. Default 25 s: inside Kubernetes' default
   * 30 s grace period, so the error line is written before SIGKILL.
   */
  deadlineMs?: number;
}

/**
 * On SIGTERM or SIGINT run `shutdown` once, then exit 0 (1 if it throws, or if it has not
 * finished within `deadlineMs`). A second signal exits at once. Returns a function that
 * starts the same shutdown (e.g. when stdin closes).
 */
export function onShutdown(
  shutdown: () => Promise<void>,
  options: ShutdownOptions = {},
): (reason?: string) => void {
  const { deadlineMs = DEFAULT_SHUTDOWN_DEADLINE_MS } = options;
  if (!(Number.isFinite(deadlineMs) && deadlineMs > 0))
    throw new RangeError(`deadlineMs must be a positive number, got ${deadlineMs}`);
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    process.stderr.write(`${JSON.stringify({ level: 'info', msg: 'shutting down', signal })}\n`);
    // Not unref'd: a shutdown stuck on a promise with nothing else pending still ends here.
    setTimeout(() => {
      process.stderr.write(
        `${JSON.stringify({ level: 'error', msg: 'shutdown did not finish within its deadline; exiting', deadlineMs })}\n`,
      );
      process.exit(1);
    }, deadlineMs);
    shutdown().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(
          `${JSON.stringify({ level: 'error', msg: 'shutdown failed', error: String(error) })}\n`,
        );
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  return (reason = 'requested') => {
    if (!stopping) handler(reason);
  };
}
