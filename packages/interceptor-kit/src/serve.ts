/**
 * Listening and draining, shared by every service's `main.ts`: bind (loopback unless told
 * otherwise), print the one JSON start-up line `{"service","url"}`, and on SIGTERM/SIGINT
 * stop accepting, let in-flight requests finish, run cleanups, exit. A bind that fails is a
 * {@link ListenError}, which `main.ts` turns into one line and exit code 1 with
 * {@link stopOnListenError}.
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

/** Which of {@link ListenOptions}' `host` and `port` a {@link ListenError} is about. */
export type ListenSetting = 'host' | 'port';

/** What each error code of a failed listen means, in words, and which setting is at fault. */
const LISTEN_PROBLEMS: Readonly<
  Record<string, { setting: ListenSetting; words: (port: number) => string }>
> = {
  EADDRINUSE: { setting: 'port', words: () => 'the port is in use' },
  EACCES: {
    setting: 'port',
    words: (port) =>
      port > 0 && port < 1024
        ? 'permission denied: a port below 1024 needs root or CAP_NET_BIND_SERVICE'
        : 'permission denied',
  },
  ERR_SOCKET_BAD_PORT: { setting: 'port', words: () => 'not a port (0 to 65535)' },
  EADDRNOTAVAIL: { setting: 'host', words: () => 'not an address of this machine' },
  EAFNOSUPPORT: {
    setting: 'host',
    words: () => "this machine does not support the address's family",
  },
  ENOTFOUND: { setting: 'host', words: () => 'the host name does not resolve' },
  EAI_NONAME: { setting: 'host', words: () => 'the host name does not resolve' },
  EAI_NODATA: { setting: 'host', words: () => 'the host name does not resolve' },
  EAI_AGAIN: {
    setting: 'host',
    words: () => 'the host name could not be resolved now (the name server did not answer)',
  },
  EAI_FAIL: {
    setting: 'host',
    words: () => 'the host name could not be resolved (the name server failed)',
  },
};

/**
 * {@link listen} could not listen. The message names the host and port and says what is wrong
 * (`cannot listen on 127.0.0.1:8082: the port is in use (EADDRINUSE)`); `code` is Node's
 * error code, `cause` Node's error.
 */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  /** Node's error code (`EADDRINUSE`, `EADDRNOTAVAIL`, `ENOTFOUND`, `EACCES`, ...), if it gave one. */
  readonly code: string | undefined;
  readonly host: string;
  readonly port: number;
  /** The setting at fault, when the code tells: `port` for EADDRINUSE, `host` for ENOTFOUND, ... */
  readonly setting: ListenSetting | undefined;

  constructor(host: string, port: number, cause: unknown) {
    const code = (cause as { code?: unknown } | undefined)?.code;
    const known = typeof code === 'string' ? LISTEN_PROBLEMS[code] : undefined;
    const message = cause instanceof Error ? cause.message : String(cause);
    const why = known
      ? `${known.words(port)} (${code})`
      : typeof code === 'string' && !message.includes(code)
        ? `${message} (${code})`
        : message;
    const shownHost = host.includes(':') ? `[${host}]` : host;
    super(`cannot listen on ${shownHost}:${port}: ${why}`, { cause });
    this.code = typeof code === 'string' ? code : undefined;
    this.host = host;
    this.port = port;
    this.setting = known?.setting;
  }
}

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
 * @throws {ListenError} when it cannot listen (the port in use, a host name that does not
 * resolve or is not this machine's, ...); a service's `main.ts` catches it with
 * {@link stopOnListenError}.
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
    const fail = (error: unknown) => reject(new ListenError(host, port, error));
    server.once('error', fail);
    try {
      server.listen(port, host, () => {
        server.off('error', fail);
        resolve();
      });
    } catch (error) {
      // Thrown at once, not emitted: a port out of range (ERR_SOCKET_BAD_PORT), a bad argument.
      server.off('error', fail);
      fail(error);
    }
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

/** Options of a {@link Stop}. */
export interface StopOptions {
  /** The exit code once the shutdown has finished. Default 0. */
  exitCode?: number;
}

/**
 * Start the shutdown {@link onShutdown} registered, as a signal would, with `reason` in its log
 * line (default `requested`). The process exits with `exitCode` once it has finished (1 if it
 * throws or misses its deadline). While a shutdown runs it starts nothing, but a higher
 * `exitCode` still becomes the exit code.
 */
export type Stop = (reason?: string, options?: StopOptions) => void;

/**
 * On SIGTERM or SIGINT run `shutdown` once, then exit 0 (1 if it throws, or if it has not
 * finished within `deadlineMs`). A second signal exits at once. Returns a {@link Stop} that
 * starts the same shutdown (e.g. when stdin closes, or with exit code 1 when the service
 * cannot listen).
 */
export function onShutdown(shutdown: () => Promise<void>, options: ShutdownOptions = {}): Stop {
  const { deadlineMs = DEFAULT_SHUTDOWN_DEADLINE_MS } = options;
  if (!(Number.isFinite(deadlineMs) && deadlineMs > 0))
    throw new RangeError(`deadlineMs must be a positive number, got ${deadlineMs}`);
  let stopping = false;
  // The exit code once the shutdown has finished: a Stop with a higher one during it raises it
  // (a listen that fails while a SIGTERM's shutdown runs still ends the process with 1).
  let code = 0;
  const handler = (signal: string, exitCode = 0) => {
    if (stopping) process.exit(1);
    stopping = true;
    code = exitCode;
    process.stderr.write(`${JSON.stringify({ level: 'info', msg: 'shutting down', signal })}\n`);
    // Not unref'd: a shutdown stuck on a promise with nothing else pending still ends here.
    setTimeout(() => {
      process.stderr.write(
        `${JSON.stringify({ level: 'error', msg: 'shutdown did not finish within its deadline; exiting', deadlineMs })}\n`,
      );
      process.exit(1);
    }, deadlineMs);
    shutdown().then(
      () => process.exit(code),
      (error: unknown) => {
        process.stderr.write(
          `${JSON.stringify({ level: 'error', msg: 'shutdown failed', error: String(error) })}\n`,
        );
        process.exit(1);
      },
    );
  };
  // Not `handler` itself: Node passes the signal's number after its name.
  const onSignal = (signal: string) => handler(signal);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return (reason = 'requested', { exitCode = 0 } = {}) => {
    if (stopping) code = Math.max(code, exitCode);
    else handler(reason, exitCode);
  };
}

/** The environment variable of each {@link ListenSetting}, as every fleet service reads them. */
const LISTEN_VARIABLES: Readonly<Record<ListenSetting, string>> = { host: 'HOST', port: 'PORT' };

/**
 * The one line a service prints when it cannot listen: the environment variable at fault
 * (`HOST`, `PORT`, or `HOST/PORT` when the error does not tell), then the error's message, e.g.
 * `PORT: cannot listen on 127.0.0.1:8082: the port is in use (EADDRINUSE)`.
 */
export function listenErrorLine(error: ListenError): string {
  const variable = error.setting ? LISTEN_VARIABLES[error.setting] : 'HOST/PORT';
  return `${variable}: ${error.message}`;
}

/**
 * A `catch` handler for {@link listen} in a service's `main.ts`: a {@link ListenError} becomes
 * one line on stderr ({@link listenErrorLine}, no stack trace), then `stop` (what
 * {@link onShutdown} returned) closes what the start-up opened, as on SIGTERM, and the process
 * exits 1. The handler returns undefined in place of the {@link Listening}; anything else is
 * rethrown.
 */
export function stopOnListenError(stop: Stop): (error: unknown) => undefined {
  return (error) => {
    if (!(error instanceof ListenError)) throw error;
    process.stderr.write(`${listenErrorLine(error)}\n`);
    stop('cannot listen', { exitCode: 1 });
    return undefined;
  };
}
