/**
 * Connections to the real MCP servers behind the gateway: one SDK client per backend,
 * shared by every client session, over Streamable HTTP or stdio (spawned and supervised:
 * restarted with backoff when it exits), with per-backend resilience (timeout, retries for
 * idempotent methods, circuit breaker, bounded concurrency queued fairly per principal).
 */
import { FleetError, ProtocolError } from '@fleet/core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { DEFAULT_INHERITED_ENV_VARS } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  McpError,
  type Notification,
  type Progress,
  type Result,
  ResultSchema,
  type ServerCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import type { Context } from '@opentelemetry/api';
import {
  BrokenCircuitError,
  BulkheadRejectedError,
  type CircuitBreakerPolicy,
  CircuitState,
  ConsecutiveBreaker,
  circuitBreaker,
  DelegateBackoff,
  ExponentialBackoff,
  handleWhen,
  type IHalfOpenAfterBackoffContext,
  type RetryPolicy,
  retry,
  TaskCancelledError,
} from 'cockatiel';
import {
  BackendHttpError,
  cancelledError,
  createBackendAgent,
  HttpBackendTransport,
} from './backend-transport.ts';
import type { BackendConfig } from './config.ts';
import { FairGate, GATEWAY_FAIRNESS_KEY, shownFairnessKey } from './fair-gate.ts';
import { type Logger, logThrottle } from './logger.ts';
import { StdioBackendTransport } from './stdio-transport.ts';
import { scrubName } from './telemetry.ts';

/** A request the backend sends to the client side (sampling, elicitation, roots). */
export interface ServerToClientRequest {
  method: string;
  params?: Record<string, unknown> | undefined;
}

/**
 * Why the gateway refused a backend call without sending it (`fleet.refusal.reason`):
 * `overloaded`, every `resilience.maxConcurrent` slot runs and as many calls wait (the
 * {@link FairGate} refused it); `circuit_open`, the backend's circuit breaker is open.
 */
export type BackendRefusalReason = 'overloaded' | 'circuit_open';

/**
 * Whose backend call it was (`fleet.call.origin`): `client`, a client's request forwarded to
 * the backend (the calls `fleet.backend.duration` counts); `gateway`, one the gateway makes
 * itself ({@link GATEWAY_FAIRNESS_KEY}: reading a backend's lists, on connecting or for the
 * tool schema cache, subscribing again after a reconnect, the log level).
 */
export type BackendCallOrigin = 'client' | 'gateway';

/** How often a backend's refusals are logged: the first, then at most once per this. */
const REFUSAL_LOG_INTERVAL_MS = 60_000;

/** What a backend reports upward. */
export interface BackendHooks {
  /** A notification from the backend (not progress, which is routed per call). */
  onNotification(backend: Backend, notification: Notification): void;
  /** A request from the backend to "its client": relay it to the right session. */
  onServerRequest(
    backend: Backend,
    request: ServerToClientRequest,
    signal: AbortSignal,
  ): Promise<Result>;
  /**
   * A connection was made: the first (`again` false), or one that replaced a lost one (a
   * restarted stdio child, an HTTP backend that forgot the session), and what the backend held
   * for the gateway's sessions (resource subscriptions, the log level) went with the old one.
   */
  onConnected?(backend: Backend, again: boolean): void;
  /** A call was refused without being sent (counted: `fleet.backend.refusals`). */
  onRefused?(backend: Backend, reason: BackendRefusalReason, origin: BackendCallOrigin): void;
}

/** Options for one backend call. */
export interface BackendCallOptions {
  signal?: AbortSignal | undefined;
  onprogress?: ((progress: Progress) => void) | undefined;
  /** Lists and reads may be retried; tools/call never. */
  idempotent?: boolean;
  /** Extra HTTP headers for this request's POST (HTTP backends; ignored over stdio). */
  headers?: Readonly<Record<string, string>> | undefined;
  /** Whose trace context the request's POST carries (HTTP backends). Default: the active one. */
  trace?: Context | undefined;
  /**
   * Whose turn the call waits for when every slot of the backend runs ({@link FairGate},
   * `fairnessKeyOf`). Default {@link GATEWAY_FAIRNESS_KEY}: a call the gateway makes for itself.
   */
  fairness?: string | undefined;
}

const CLIENT_INFO = { name: 'interceptor-fleet-gateway', version: '0.1.0' };

function isTransportFailure(error: unknown): boolean {
  // Not sent at all: refused at capacity, behind an open circuit, or cancelled while it waited
  // for a slot or for a half-open circuit's trial. Retrying those would only add load to a
  // backend that is shedding it.
  if (
    error instanceof CallerCancelled ||
    error instanceof BulkheadRejectedError ||
    error instanceof BrokenCircuitError ||
    error instanceof TaskCancelledError
  )
    return false;
  if (error instanceof McpError) {
    return error.code === ErrorCode.ConnectionClosed || error.code === ErrorCode.RequestTimeout;
  }
  return !(error instanceof ProtocolError);
}

/**
 * A call that failed because its caller cancelled it (the client's `notifications/cancelled`,
 * its closed POST): carried through the resilience policies as this, so that neither the
 * circuit breaker nor the retries take it for a failure of the backend, then unwrapped. A
 * cancelled call reads like a timed-out one (-32001), which is a transport failure: before,
 * `breaker.failures` cancellations in a row opened the circuit for every client.
 */
class CallerCancelled extends Error {
  constructor(readonly error: unknown) {
    super('cancelled by the caller');
  }
}

/**
 * The half-open circuit's trial call, cancelled by its caller: it showed neither that the
 * backend recovered nor that it still fails. cockatiel closes the circuit on any outcome its
 * policy does not count as a failure, so this one is counted, and re-opens the circuit with no
 * wait (`halfOpenAfter` in the constructor): the next call is the trial, as if this one had
 * never been made, and the calls that waited for this trial wait for that one. Not for another
 * `breaker.resetMs`: that would refuse calls for nothing the backend did, and a client that
 * cancels each trial would keep the circuit open.
 */
class CancelledTrial extends CallerCancelled {}

/** `error` of a call its caller cancelled, as the resilience policies must see it. */
function callerCancelled(trial: boolean, error: unknown): CallerCancelled {
  return trial ? new CancelledTrial(error) : new CallerCancelled(error);
}

/**
 * The error a client sees for a failed backend call: the backend's own JSON-RPC error
 * passes through with its code, message (without the SDK's "MCP error N:" prefix, which
 * the client side adds again) and data; a transport failure is -32603 naming the backend.
 */
function toBackendError(error: unknown, backend: string): ProtocolError {
  // The SDK client's own failures (not the backend's answers) name the backend: a closed
  // connection reads like every other transport failure, -32603 {backend, reason}.
  if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
    return new ProtocolError(
      -32603,
      `backend "${backend}" closed the connection`,
      { backend, reason: 'connection closed' },
      { cause: error },
    );
  }
  const timeout = (error as { data?: { timeout?: unknown } } | undefined)?.data?.timeout;
  if (
    error instanceof McpError &&
    error.code === ErrorCode.RequestTimeout &&
    typeof timeout === 'number'
  ) {
    // Keeps the SDK's request-timeout code (-32001), which MCP clients know, and its budget.
    return new ProtocolError(
      ErrorCode.RequestTimeout,
      `backend "${backend}" timed out after ${timeout} ms`,
      { timeout, backend, reason: 'timeout' },
      { cause: error },
    );
  }
  if (error instanceof McpError) {
    return new ProtocolError(
      error.code,
      error.message.replace(/^MCP error -?\d+: /, ''),
      error.data,
      { cause: error },
    );
  }
  if (error instanceof ProtocolError) return error;
  const message = error instanceof FleetError ? error.message : `backend "${backend}" failed`;
  return new ProtocolError(-32603, message, { backend, reason: 'unavailable' }, { cause: error });
}

/** One backend MCP server. */
export class Backend {
  readonly id: string;
  readonly prefix: string;
  readonly config: BackendConfig;
  #client: Client | undefined;
  #connecting: Promise<Client> | undefined;
  #capabilities: ServerCapabilities | undefined;
  #closed = false;
  /** True once a connection was made: the next one is a reconnection. */
  #everConnected = false;
  #restartDelayMs = 500;
  #restartTimer: ReturnType<typeof setTimeout> | undefined;
  readonly #hooks: BackendHooks;
  readonly #log: Logger;
  /** `resilience.maxConcurrent` running and as many waiting, served per principal in turn. */
  readonly #gate: FairGate;
  readonly #breaker: CircuitBreakerPolicy;
  /** Retries for idempotent methods; undefined with `resilience.retries` 0. */
  readonly #retry: RetryPolicy | undefined;
  readonly #http = createBackendAgent();
  /** Refusals are logged at most once a minute, with how many there were since the last line. */
  readonly #refusalLog = logThrottle(REFUSAL_LOG_INTERVAL_MS);
  #refusedSinceLog: Record<BackendRefusalReason, number> = { overloaded: 0, circuit_open: 0 };

  readonly #maxMessageBytes: number | undefined;

  constructor(
    config: BackendConfig,
    hooks: BackendHooks,
    log: Logger,
    options: { maxMessageBytes?: number | undefined } = {},
  ) {
    this.#maxMessageBytes = options.maxMessageBytes;
    this.id = config.id;
    this.prefix = config.prefix;
    this.config = config;
    this.#hooks = hooks;
    this.#log = log;
    const { breaker, maxConcurrent, retries } = config.resilience;
    this.#breaker = circuitBreaker(
      // A cancelled trial is counted only so that it does not close the circuit.
      handleWhen((error) => isTransportFailure(error) || error instanceof CancelledTrial),
      {
        halfOpenAfter: new DelegateBackoff<IHalfOpenAfterBackoffContext>(({ result }) =>
          'error' in result && result.error instanceof CancelledTrial ? 0 : breaker.resetMs,
        ),
        breaker: new ConsecutiveBreaker(breaker.failures),
      },
    );
    this.#gate = new FairGate({ maxRunning: maxConcurrent, maxQueued: maxConcurrent });
    this.#retry =
      retries > 0
        ? retry(handleWhen(isTransportFailure), {
            maxAttempts: retries,
            backoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 2000 }),
          })
        : undefined;
  }

  /** The backend's capabilities once connected. */
  get capabilities(): ServerCapabilities | undefined {
    return this.#capabilities;
  }

  /** True for a Streamable HTTP backend (per-request headers reach it). */
  get http(): boolean {
    return this.config.url !== undefined;
  }

  /** True when a live connection exists. */
  get connected(): boolean {
    return this.#client !== undefined;
  }

  /** Connect now; on failure keep retrying in the background (never throws). */
  async start(): Promise<void> {
    try {
      await this.#connect();
    } catch (error) {
      this.#log.warn(
        { backend: this.id, err: String(error) },
        'backend not reachable yet; retrying in the background',
      );
      this.#scheduleRestart();
    }
  }

  #transport(): Transport {
    const { url, command, args, env, inheritEnv, cwd, headers } = this.config;
    if (url !== undefined) {
      return new HttpBackendTransport(new URL(url), {
        headers,
        dispatcher: this.#http,
        maxMessageBytes: this.#maxMessageBytes,
      });
    }
    return new StdioBackendTransport({
      command: command as string,
      args,
      env: stdioEnvironment(inheritEnv, env),
      cwd,
      maxMessageBytes: this.#maxMessageBytes,
    });
  }

  #connect(): Promise<Client> {
    this.#connecting ??= (async () => {
      const client = new Client(CLIENT_INFO, {
        capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } },
      });
      client.fallbackNotificationHandler = async (notification) =>
        this.#hooks.onNotification(this, notification);
      const relay = async (
        request: { method: string; params?: Record<string, unknown> },
        extra: { signal: AbortSignal },
      ) => this.#hooks.onServerRequest(this, request, extra.signal);
      client.setRequestHandler(CreateMessageRequestSchema, relay as never);
      client.setRequestHandler(ElicitRequestSchema, relay as never);
      client.setRequestHandler(ListRootsRequestSchema, relay as never);
      client.onclose = () => {
        if (this.#client !== client) return;
        this.#client = undefined;
        if (!this.#closed) {
          this.#log.warn({ backend: this.id }, 'backend connection closed; reconnecting');
          this.#scheduleRestart();
        }
      };
      await client.connect(this.#transport(), { timeout: this.config.resilience.timeoutMs });
      if (this.#closed) {
        // close() ran while we were connecting: do not leave a child or session behind.
        await client.close().catch(() => undefined);
        throw new FleetError('TRANSPORT_ERROR', `backend "${this.id}" is closed`);
      }
      const previous = this.#client;
      this.#client = client;
      if (this.#restartTimer !== undefined) {
        clearTimeout(this.#restartTimer);
        this.#restartTimer = undefined;
      }
      if (previous && previous !== client) await previous.close().catch(() => undefined);
      this.#capabilities = client.getServerCapabilities();
      this.#restartDelayMs = 500;
      this.#log.info(
        { backend: this.id, server: client.getServerVersion()?.name },
        'backend connected',
      );
      const again = this.#everConnected;
      this.#everConnected = true;
      try {
        this.#hooks.onConnected?.(this, again);
      } catch (error) {
        this.#log.warn({ backend: this.id, err: String(error) }, 'backend connect hook failed');
      }
      return client;
    })().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  #scheduleRestart(): void {
    if (this.#closed || this.#restartTimer !== undefined) return;
    const delay = this.#restartDelayMs;
    this.#restartDelayMs = Math.min(this.#restartDelayMs * 2, 30_000);
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      if (this.#client || this.#closed) return; // reconnected on demand meanwhile
      this.#connect().catch((error: unknown) => {
        this.#log.warn(
          { backend: this.id, err: String(error), retryInMs: this.#restartDelayMs },
          'backend reconnect failed',
        );
        this.#scheduleRestart();
      });
    }, delay);
    this.#restartTimer.unref();
  }

  async #live(): Promise<Client> {
    if (this.#client) return this.#client;
    try {
      return await this.#connect();
    } catch (error) {
      this.#scheduleRestart();
      throw new FleetError('TRANSPORT_ERROR', `backend "${this.id}" is unavailable`, {
        data: { backend: this.id },
        cause: error,
      });
    }
  }

  /**
   * Run `send` through the backend's resilience: each attempt waits for its turn at the gate
   * (as `options.fairness`) and holds a slot only while it runs, so a retry backing off holds
   * none (the order of cockatiel's `wrap(retry, bulkhead, breaker)`). The signal also ends
   * the retries: a cancelled call is not sent again.
   */
  async #resilient<T>(options: BackendCallOptions, send: () => Promise<T>): Promise<T> {
    const { signal } = options;
    const fairness = options.fairness ?? GATEWAY_FAIRNESS_KEY;
    // What fails after the caller cancelled is no news of the backend (see CallerCancelled).
    const sent = signal
      ? () => {
          // The breaker runs a call outside its Closed state only as the half-open trial.
          const trial = this.#breaker.state !== CircuitState.Closed;
          // cockatiel may run a call whose caller left while it waited for a trial (see
          // #throughBreaker): it is not sent, and as a trial it hands the trial on.
          if (signal.aborted)
            return Promise.reject(callerCancelled(trial, new TaskCancelledError()));
          return send().catch((error: unknown) => {
            if (!signal.aborted) throw error;
            throw callerCancelled(trial, error);
          });
        }
      : send;
    const attempt = () =>
      this.#gate.execute(fairness, () => this.#throughBreaker(sent, signal), signal);
    try {
      return await (options.idempotent && this.#retry
        ? this.#retry.execute(attempt, signal)
        : attempt());
    } catch (error) {
      throw error instanceof CallerCancelled ? error.error : error;
    }
  }

  /**
   * Run `sent` through the circuit breaker, leaving with `TaskCancelledError` if `signal`
   * aborts before cockatiel starts it, as a call cancelled while it waits for a slot does. The
   * wait this ends is a half-open circuit's: cockatiel makes each call that comes meanwhile
   * wait for the trial's outcome, deaf to its signal, and a call whose client cancelled held
   * its slot until the trial ended (up to `resilience.timeoutMs`). cockatiel goes on with a
   * call that left, unobserved: when the trial ends it drops it, or, if the trial was cancelled
   * (the circuit re-opened with no wait), runs it as the next trial, which `sent` then does not
   * send.
   */
  #throughBreaker<T>(sent: () => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    // Only a call that reaches a circuit that is not closed can wait in cockatiel; the rest
    // (nearly every call) pay for no promise and listener of their own.
    if (signal === undefined || this.#breaker.state === CircuitState.Closed)
      return this.#breaker.execute(sent, signal);
    return new Promise<T>((resolve, reject) => {
      const leave = () => reject(new TaskCancelledError());
      if (signal.aborted) {
        leave();
        return;
      }
      const stopListening = () => signal.removeEventListener('abort', leave);
      signal.addEventListener('abort', leave, { once: true });
      // Once the call runs, its signal reaches the backend, which ends it: no race then.
      const started = () => {
        stopListening();
        return sent();
      };
      this.#breaker.execute(started, signal).finally(stopListening).then(resolve, reject);
    });
  }

  /**
   * A call of `fairness` was refused for `reason`: counted (`onRefused`, by origin), and logged
   * at most once a minute, whoever made it. An `overloaded` line names the call's fairness key
   * (its principal's id scrubbed), which is always one with the most calls waiting: the
   * {@link FairGate} refuses the newest call of the key with the most, or a newcomer whose key
   * has as many.
   */
  #refused(reason: BackendRefusalReason, fairness: string): void {
    try {
      this.#hooks.onRefused?.(
        this,
        reason,
        fairness === GATEWAY_FAIRNESS_KEY ? 'gateway' : 'client',
      );
    } catch {
      // Counting a refusal never changes what the caller is told.
    }
    this.#refusedSinceLog[reason]++;
    if (!this.#refusalLog.due()) return;
    const reasons = this.#refusedSinceLog;
    this.#refusedSinceLog = { overloaded: 0, circuit_open: 0 };
    this.#log.warn(
      {
        backend: this.id,
        reason,
        refused: reasons.overloaded + reasons.circuit_open,
        reasons,
        ...(reason === 'overloaded'
          ? {
              busiest: shownFairnessKey(fairness, scrubName),
              waiting: this.#gate.queuedFor(fairness),
              maxConcurrent: this.config.resilience.maxConcurrent,
            }
          : {}),
      },
      reason === 'overloaded'
        ? 'refused backend calls: at capacity (resilience.maxConcurrent)'
        : 'refused backend calls: circuit open',
    );
  }

  /** Send one request through the backend's resilience policy. */
  async request(
    method: string,
    params: Record<string, unknown> | undefined,
    options: BackendCallOptions = {},
  ): Promise<Result> {
    try {
      return await this.#resilient(options, async () => {
        const client = await this.#live();
        const call = (c: Client) => {
          const transport = c.transport;
          // HTTP backends: straight through our transport, past the SDK's protocol object.
          if (transport instanceof HttpBackendTransport)
            return transport.call(method, params, {
              timeoutMs: this.config.resilience.timeoutMs,
              signal: options.signal,
              onprogress: options.onprogress,
              headers: options.headers,
              trace: options.trace,
            });
          return c.request({ method, ...(params === undefined ? {} : { params }) }, ResultSchema, {
            timeout: this.config.resilience.timeoutMs,
            resetTimeoutOnProgress: true,
            ...(options.signal ? { signal: options.signal } : {}),
            ...(options.onprogress ? { onprogress: options.onprogress } : {}),
          });
        };
        try {
          return await call(client);
        } catch (error) {
          // The server forgot our session (it restarted): reconnect once and retry.
          if (error instanceof BackendHttpError && error.status === 404) {
            this.#client = undefined;
            await client.close().catch(() => undefined);
            return await call(await this.#live());
          }
          throw error;
        }
      });
    } catch (error) {
      const fairness = options.fairness ?? GATEWAY_FAIRNESS_KEY;
      if (error instanceof BrokenCircuitError) {
        this.#refused('circuit_open', fairness);
        throw new ProtocolError(-32603, `Backend "${this.id}" is unavailable (circuit open)`, {
          backend: this.id,
          reason: 'circuit_open',
        });
      }
      if (error instanceof BulkheadRejectedError) {
        this.#refused('overloaded', fairness);
        throw new ProtocolError(-32603, `Backend "${this.id}" is at capacity`, {
          backend: this.id,
          reason: 'overloaded',
        });
      }
      // Cancelled while it waited for a slot or a half-open circuit's trial: the error of a
      // call cancelled at the backend.
      if (error instanceof TaskCancelledError)
        throw toBackendError(cancelledError(options.signal?.reason), this.id);
      if (!(error instanceof McpError) && !(error instanceof ProtocolError))
        // The client only learns that the backend failed: the operator needs the cause.
        this.#log.warn({ backend: this.id, method, err: String(error) }, 'backend call failed');
      throw toBackendError(error, this.id);
    }
  }

  /** Send a notification to the backend (best effort). */
  async notify(notification: Notification): Promise<void> {
    try {
      await this.#client?.notification(notification as never);
    } catch (error) {
      this.#log.debug({ backend: this.id, err: String(error) }, 'notification to backend failed');
    }
  }

  /** Close the connection (and stop a stdio child). */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    const client = this.#client;
    this.#client = undefined;
    await client?.close().catch(() => undefined);
    await this.#http.close().catch(() => undefined);
  }
}

/**
 * A stdio backend's whole environment: of the gateway's own, only the MCP SDK's default set
 * (HOME, LOGNAME, PATH, SHELL, TERM, USER) and the names in `inherit`, then `env`. Never the
 * rest, which holds the gateway's secrets. A value that starts with `()` (a shell function,
 * as the SDK guards) is not passed on.
 */
export function stdioEnvironment(
  inherit: readonly string[],
  env: Readonly<Record<string, string>>,
  from: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const chosen: Record<string, string> = {};
  for (const name of [...DEFAULT_INHERITED_ENV_VARS, ...inherit]) {
    const value = from[name];
    if (value !== undefined && !value.startsWith('()')) chosen[name] = value;
  }
  return { ...chosen, ...env };
}
