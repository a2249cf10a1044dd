/**
 * The dispatcher behind every transport: `interceptors/list` and `interceptor/invoke` with
 * the error codes of DESIGN.md §2. The HTTP fast path, the MCP SDK server (stdio and the
 * rest of HTTP) and the in-process invoker all call the same host, so semantics are
 * identical whichever way an interceptor is reached.
 */
import {
  failureReason,
  formatPath,
  type InterceptorInfo,
  type InterceptorResult,
  type InvocationContext,
  InvokeErrorReason,
  type InvokeParams,
  InvokeParamsSchema,
  JsonRpcCode,
  ListInterceptorsParamsSchema,
  type ListInterceptorsResult,
  matchesAnyEvent,
  type Phase,
  ProtocolError,
  type ResultOutcome,
  resultOutcome,
  type SignalSource,
  signalOf,
} from '@fleet/core';
import type { HandlerContext, Interceptor, MutationVerdict, ValidationVerdict } from './define.ts';
import { eventLabel } from './labels.ts';
import { MAX_TIMER_MS } from './limits.ts';

/** Options for {@link createInterceptorHost}. */
export interface InterceptorHostOptions {
  /** Budget for an invocation that carries no `timeoutMs` and whose definition sets none. Default 30 000. */
  defaultTimeoutMs?: number;
  /** Called after every invocation, successful or not (for metrics). Never throws into the host. */
  onInvoked?: (event: InvokedEvent) => void;
}

/**
 * What {@link InterceptorHostOptions.onInvoked} reports: only invocations of an interceptor the
 * host has, on a hook it advertises. Never the payload.
 */
export interface InvokedEvent {
  interceptor: string;
  /**
   * The event when it is an MCP request method or one of the interceptor's hooks names it as
   * it is; `other` for one only a wildcard hook matches (the caller may invent any).
   */
  event: string;
  phase: string;
  durationMs: number;
  /**
   * `rejected`: the invocation threw -32602 (invalid params, e.g. a payload over an engine's
   * limits): the caller's input at fault, not a failure of the interceptor.
   */
  outcome: 'ok' | 'error' | 'rejected' | 'timeout';
  /** The interceptor's type and mode (from its descriptor). */
  type: 'validation' | 'mutation';
  mode: 'active' | 'audit';
  /** When `ok`: what the verdict was. */
  verdict?: ResultOutcome;
  /** When not `ok`: the `reason` the caller was sent (`timeout` for a timeout). */
  reason?: string;
}

/** Serves a set of interceptors, transport-agnostic. */
export interface InterceptorHost {
  readonly interceptors: readonly Interceptor[];
  /** `interceptors/list`. @throws {ProtocolError} -32602 for malformed params. */
  list(params: unknown): ListInterceptorsResult;
  /**
   * `interceptor/invoke`. @throws {ProtocolError} with the codes of DESIGN.md §2. The caller's
   * `signal` may be lazy (a function that makes it): it is only needed when a handler asks
   * for its own signal, and on Node 20 each AbortSignal costs a promotion to the old heap.
   */
  invoke(params: unknown, options?: { signal?: SignalSource }): Promise<InterceptorResult>;
  /** Every event pattern any hook names, sorted and de-duplicated. */
  supportedEvents(): string[];
}

const TIMEOUT = Symbol('timeout');

/**
 * What a handler gets as its context. A class, not a literal with a `get signal()`: on Node
 * 20 each such literal gets its own hidden class holding that invocation's getter closure,
 * which keeps the whole invocation (payload included) alive through young-generation GCs.
 * The handler's signal is made when a handler first asks for it: most never do, and an
 * AbortController (plus a listener on the caller's signal) per invocation is a real share
 * of a small interceptor's cost.
 */
class InvocationContextImpl implements HandlerContext {
  readonly event: string;
  readonly phase: Phase;
  readonly config: Record<string, unknown>;
  readonly context: InvocationContext;
  #source: SignalSource | undefined;
  #caller: AbortSignal | undefined;
  #controller: AbortController | undefined;
  #timedOut = false;

  constructor(params: InvokeParams, source: SignalSource | undefined) {
    this.event = params.event;
    this.phase = params.phase;
    this.config = params.config ?? {};
    this.context = params.context ?? {};
    this.#source = source;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      const controller = new AbortController();
      this.#controller = controller;
      const caller = this.#source === undefined ? undefined : signalOf(this.#source);
      this.#caller = caller;
      if (this.#timedOut) controller.abort(new Error('timeout'));
      else if (caller?.aborted) controller.abort(caller.reason);
      else caller?.addEventListener('abort', this, { once: true });
    }
    return this.#controller.signal;
  }

  /** The budget ran out: abort the handler's signal (now, or when it is made). */
  timeOut(): void {
    this.#timedOut = true;
    this.#controller?.abort(new Error('timeout'));
  }

  /** The invocation is over: stop listening to the caller's signal. */
  release(): void {
    this.#caller?.removeEventListener('abort', this);
    this.#caller = undefined;
  }

  /** The caller's signal aborted (this object is its listener: no closure per invocation). */
  handleEvent(): void {
    this.#controller?.abort(this.#caller?.reason);
  }
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

function invalidParams(message: string, data: Record<string, unknown>): ProtocolError {
  return new ProtocolError(JsonRpcCode.INVALID_PARAMS, message, data);
}

function handlerFailure(interceptor: string, reason: string): ProtocolError {
  return new ProtocolError(JsonRpcCode.INTERNAL_ERROR, 'Interceptor execution failed', {
    interceptor,
    reason,
  });
}

function checkVerdict(
  interceptor: Interceptor,
  verdict: unknown,
): asserts verdict is ValidationVerdict | MutationVerdict {
  const v = verdict as Record<string, unknown> | null;
  const name = interceptor.info.name;
  if (typeof v !== 'object' || v === null)
    throw handlerFailure(name, 'handler returned no verdict');
  if (interceptor.info.type === 'validation' && typeof v.valid !== 'boolean')
    throw handlerFailure(name, 'handler verdict lacks a boolean "valid"');
  if (interceptor.info.type === 'mutation') {
    if (typeof v.modified !== 'boolean')
      throw handlerFailure(name, 'handler verdict lacks a boolean "modified"');
    if (v.modified && v.payload === undefined)
      throw handlerFailure(name, 'handler verdict is modified but has no payload');
  }
}

/**
 * The wire result of a verdict. Built as plain literals on purpose: on Node 20, an object
 * cloned with a spread that then gains properties (`{ ...base, type }`) is not reclaimed by
 * young-generation GCs and drags what it references (here the payload) into the old
 * generation; measured on a kit service, ~2 MB promoted per scavenge and 3-5 ms pauses.
 */
function toResult(
  interceptor: Interceptor,
  params: InvokeParams,
  verdict: ValidationVerdict | MutationVerdict,
  durationMs: number,
): InterceptorResult {
  const interceptorName = params.name;
  const phase = params.phase;
  const rounded = round(durationMs);
  if (interceptor.info.type === 'validation') {
    const v = verdict as ValidationVerdict;
    const result: InterceptorResult = {
      interceptor: interceptorName,
      phase,
      durationMs: rounded,
      type: 'validation',
      valid: v.valid,
    };
    if (v.severity !== undefined) result.severity = v.severity;
    if (v.messages !== undefined) result.messages = v.messages;
    if (v.suggestions !== undefined) result.suggestions = v.suggestions;
    if (v.info !== undefined) result.info = v.info;
    return result;
  }
  const m = verdict as MutationVerdict;
  const result: InterceptorResult = {
    interceptor: interceptorName,
    phase,
    durationMs: rounded,
    type: 'mutation',
    modified: m.modified,
    payload: m.modified ? m.payload : params.payload,
  };
  if (m.info !== undefined) result.info = m.info;
  return result;
}

/**
 * Build a host for `interceptors`. Names must be unique.
 * @throws {Error} on duplicate names.
 */
export function createInterceptorHost(
  interceptors: readonly Interceptor[],
  options: InterceptorHostOptions = {},
): InterceptorHost {
  const { defaultTimeoutMs = 30_000, onInvoked } = options;
  const byName = new Map<string, Interceptor>();
  for (const interceptor of interceptors) {
    if (byName.has(interceptor.info.name))
      throw new Error(`duplicate interceptor name "${interceptor.info.name}"`);
    byName.set(interceptor.info.name, interceptor);
  }
  const infos: InterceptorInfo[] = interceptors.map((i) => i.info);
  const events = [...new Set(infos.flatMap((i) => i.hooks.flatMap((h) => h.events)))].sort();

  const report = (event: InvokedEvent) => {
    try {
      onInvoked?.(event);
    } catch {
      // Metrics never break an invocation.
    }
  };

  return {
    interceptors,
    supportedEvents: () => [...events],

    list(raw) {
      const parsed = ListInterceptorsParamsSchema.safeParse(raw ?? undefined);
      if (!parsed.success) {
        throw invalidParams('Invalid interceptors/list params', {
          issues: parsed.error.issues.map((i) => ({
            path: formatPath(i.path),
            message: i.message,
          })),
        });
      }
      const event = parsed.data?.event;
      if (event === undefined) return { interceptors: infos };
      return {
        interceptors: infos.filter((i) => i.hooks.some((h) => matchesAnyEvent(h.events, event))),
      };
    },

    async invoke(raw, { signal: source } = {}) {
      const parsed = InvokeParamsSchema.safeParse(raw);
      if (!parsed.success) {
        const name = (raw as { name?: unknown } | null)?.name;
        throw invalidParams('Invalid interceptor/invoke params', {
          ...(typeof name === 'string' ? { name } : {}),
          issues: parsed.error.issues.map((i) => ({
            path: formatPath(i.path),
            message: i.message,
          })),
        });
      }
      const params = parsed.data;
      const interceptor = byName.get(params.name);
      if (interceptor === undefined) {
        // `reason` tells the caller its list of this service's interceptors is out of date
        // (the service was redeployed without it), not that its params are at fault.
        throw invalidParams(`Unknown interceptor "${params.name}"`, {
          name: params.name,
          reason: InvokeErrorReason.UNKNOWN_INTERCEPTOR,
        });
      }
      const hooked = interceptor.info.hooks.some(
        (h) => h.phase === params.phase && matchesAnyEvent(h.events, params.event),
      );
      if (!hooked) {
        throw invalidParams('Hook not advertised by interceptor', {
          name: params.name,
          event: params.event,
          phase: params.phase,
          advertisedHooks: interceptor.info.hooks,
        });
      }
      const timeoutMs = params.timeoutMs ?? interceptor.info.timeoutMs ?? defaultTimeoutMs;
      const ctx = new InvocationContextImpl(params, source);
      const started = performance.now();
      let outcome: InvokedEvent['outcome'] = 'error';
      let verdictKind: InvokedEvent['verdict'];
      let reason: string | undefined;
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        // The verdict, or TIMEOUT when the budget runs out first.
        const verdict = await new Promise<unknown>((resolve, reject) => {
          // Capped: setTimeout runs a delay past 2^31-1 ms after 1 ms.
          timer = setTimeout(() => resolve(TIMEOUT), Math.min(timeoutMs, MAX_TIMER_MS));
          // A handler that throws synchronously rejects this promise (the executor throws).
          Promise.resolve(interceptor.handler(params.payload, ctx)).then(resolve, reject);
        });
        if (verdict === TIMEOUT) {
          outcome = 'timeout';
          ctx.timeOut();
          throw new ProtocolError(JsonRpcCode.INTERNAL_ERROR, 'Interceptor execution timeout', {
            interceptor: params.name,
            reason: 'timeout',
            timeoutMs,
            phase: params.phase,
          });
        }
        checkVerdict(interceptor, verdict);
        const result = toResult(interceptor, params, verdict, performance.now() - started);
        outcome = 'ok';
        verdictKind = resultOutcome(result);
        return result;
      } catch (error) {
        const failure =
          error instanceof ProtocolError
            ? error
            : handlerFailure(
                params.name,
                error instanceof Error ? error.message || error.name : String(error),
              );
        reason = failureReason(failure).reason;
        if (failure.code === JsonRpcCode.INVALID_PARAMS) outcome = 'rejected';
        throw failure;
      } finally {
        if (timer !== undefined) clearTimeout(timer);
        ctx.release();
        if (onInvoked !== undefined) {
          const event: InvokedEvent = {
            interceptor: params.name,
            event: eventLabel(params.event, interceptor.info),
            phase: params.phase,
            durationMs: performance.now() - started,
            outcome,
            type: interceptor.info.type,
            mode: interceptor.info.mode ?? 'active',
          };
          if (verdictKind !== undefined) event.verdict = verdictKind;
          if (reason !== undefined) event.reason = reason;
          report(event);
        }
      }
    },
  };
}
