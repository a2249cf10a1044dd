/**
 * The gateway's tracer and instruments, on `@opentelemetry/api` only (the service's main
 * wires the SDK). Every recording is wrapped so telemetry never breaks a request.
 */
import {
  type ChainResult,
  type InterceptorResult,
  type InvocationOutcome,
  type Invoker,
  isKnownMcpMethod,
  merged,
  quoteCut,
  resultOutcome,
} from '@fleet/core';
import { createTextRedactor } from '@fleet/pii';
import { ATTR, createFleetMetrics, interceptorInvokeSpanName } from '@fleet/telemetry';
import {
  type Context,
  context,
  createContextKey,
  type Exception,
  metrics,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';

/** How the gateway answered one request (`fleet.request.status`). */
export type RequestStatus = 'ok' | 'denied' | 'error';

/**
 * How one chain phase ended (`fleet.chain.status`): the engine's status, except that a
 * validator stage that stopped only because invocations failed (no validator said no) is
 * `invocation_failed`, not `validation_failed` — the audit record tells them apart the same way.
 */
export type ChainStatus = ChainResult['status'] | 'invocation_failed';

/** The {@link ChainStatus} of `result`. */
export function chainStatusOf(result: ChainResult): ChainStatus {
  if (result.status !== 'validation_failed') return result.status;
  return result.abortedAt.some((a) => a.type === 'validation')
    ? 'validation_failed'
    : 'invocation_failed';
}

/** Tracer and metric recorders used by the gateway. */
export interface GatewayTelemetry {
  tracer: Tracer;
  /** `errorType`: a low-cardinality class of the failure when `status` is `error`. */
  recordRequest(
    method: string,
    status: RequestStatus,
    durationMs: number,
    errorType?: string,
  ): void;
  recordChain(result: ChainResult): void;
  recordInvocation(outcome: InvocationOutcome): void;
  recordBackend(backend: string, method: string, durationMs: number, errorType?: string): void;
  /**
   * The MCP ingress refused a request before serving it: `kind` is its error table's entry in
   * lower case (`unauthorized`, `payload_too_large`, ...) or `overloaded`.
   */
  recordRejection(kind: string): void;
  /**
   * The gateway refused a call to `backend` without sending it: `reason` `overloaded` (its
   * `resilience.maxConcurrent` slots and queue are full) or `circuit_open`; `origin` `client`
   * (a client's request, as `recordBackend` counts) or `gateway` (one the gateway makes itself).
   */
  recordBackendRefusal(backend: string, reason: string, origin: string): void;
}

/** `method` as an error message quotes it: a made-up name can be as long as the body. */
export function shownMethod(method: string): string {
  return quoteCut(method, 128);
}

/**
 * `method` as a metric label: itself when it is a known MCP method (`@fleet/core`'s
 * `KNOWN_MCP_METHODS`), else `other`. Any other method, which a client can make up at will, is
 * counted as `other`: a label value per made-up name would grow `/metrics` and the gateway's
 * memory without bound (spans still carry the name, scrubbed: {@link spanMethod}).
 */
export function methodLabel(method: string): string {
  return isKnownMcpMethod(method) ? method : 'other';
}

/** How many distinct client-chosen strings keep their scrubbed form (tool names repeat). */
const SCRUBBED_CACHE_ENTRIES = 1024;
/** Longer strings are scrubbed every time rather than held as cache keys. */
const SCRUBBED_CACHE_MAX_LENGTH = 512;
/** What a span shows when the PII engine fails on a text: never the text itself. */
const SCRUB_FAILED = '[REDACTED]';

let redact: ((text: string) => string) | undefined;
const scrubbed = new Map<string, string>();

/**
 * `text` with every PII and secret value `@fleet/pii` detects replaced by `[TYPE]`, uncached:
 * for error messages and other one-off text on the error path. Never throws.
 */
export function scrubText(text: string): string {
  try {
    // One redactor per process, made on first use (it is pure).
    redact ??= createTextRedactor();
    return redact(text);
  } catch {
    return SCRUB_FAILED;
  }
}

/**
 * A client-chosen name (tool, prompt, resource URI, made-up method) as a span may show it:
 * scrubbed like {@link scrubText}, and remembered per distinct string in a bounded map (the
 * oldest entry goes first), since the same names arrive on every call.
 */
export function scrubName(text: string): string {
  const hit = scrubbed.get(text);
  if (hit !== undefined) return hit;
  const result = scrubText(text);
  if (text.length <= SCRUBBED_CACHE_MAX_LENGTH) {
    if (scrubbed.size >= SCRUBBED_CACHE_ENTRIES) {
      const oldest = scrubbed.keys().next();
      if (!oldest.done) scrubbed.delete(oldest.value);
    }
    scrubbed.set(text, result);
  }
  return result;
}

/** `method` as a span shows it: itself when it is a known MCP method, else {@link scrubName}d. */
export function spanMethod(method: string): string {
  return isKnownMcpMethod(method) ? method : scrubName(method);
}

/**
 * Record `error` on `span` (exception event, status ERROR) with its message and stack
 * scrubbed: a message may quote what the client sent (`Unknown tool: <name>`). Never throws.
 */
export function recordScrubbedError(span: Span, error: unknown): void {
  guard(() => {
    if (!span.isRecording()) return;
    const message = scrubText(error instanceof Error ? error.message : String(error));
    const exception: Exception = { message };
    if (error instanceof Error) {
      exception.name = error.name;
      if (error.stack !== undefined) exception.stack = scrubText(error.stack);
    }
    span.recordException(exception);
    span.setStatus({ code: SpanStatusCode.ERROR, message });
  });
}

function guard(fn: () => void): void {
  try {
    fn();
  } catch {
    // Telemetry never breaks a request.
  }
}

/**
 * Build the gateway's telemetry from the global OpenTelemetry API. The instruments are
 * `@fleet/telemetry`'s (`createFleetMetrics`): names, attribute names and histogram buckets
 * are defined there, once.
 */
export function createGatewayTelemetry(): GatewayTelemetry {
  const fleet = createFleetMetrics(metrics.getMeter('@fleet/orchestrator'));
  scrubText(''); // makes the PII engine now, not during the first request
  return {
    tracer: trace.getTracer('@fleet/orchestrator'),
    recordRequest: (method, status, durationMs, errorType) =>
      fleet.recordRequest(durationMs, { method: methodLabel(method), status, errorType }),
    recordChain: (result) => {
      fleet.recordChain(result.totalDurationMs, {
        event: methodLabel(result.event),
        phase: result.phase,
        status: chainStatusOf(result),
      });
      for (const abort of result.abortedAt)
        fleet.countAbort({
          type: abort.type,
          interceptor: abort.interceptor,
          outcome: result.results.find(
            (o) => o.interceptor === abort.interceptor && o.serviceId === abort.serviceId,
          )?.outcome,
          phase: abort.phase,
        });
    },
    recordInvocation: (o) =>
      fleet.recordInterceptor(o.durationMs, {
        interceptor: o.interceptor,
        outcome: o.outcome,
        service: o.serviceId,
        type: o.type,
        mode: o.mode,
        phase: o.phase,
      }),
    recordRejection: (kind) => fleet.countRejection(kind),
    recordBackendRefusal: (backend, reason, origin) =>
      fleet.countBackendRefusal(backend, reason, origin),
    recordBackend: (id, method, durationMs, errorType) =>
      fleet.recordBackend(durationMs, {
        backend: id,
        method: methodLabel(method),
        status: errorType === undefined ? 'ok' : 'error',
        errorType,
      }),
  };
}

/**
 * A low-cardinality class of `error` for `error.type`: its JSON-RPC code (`-32603`), else a
 * string code (`BACKEND_UNAVAILABLE`), else its name.
 */
export function errorTypeOf(error: unknown): string {
  const { code, name } = (error ?? {}) as { code?: unknown; name?: unknown };
  if (typeof code === 'number' && Number.isInteger(code)) return String(code);
  if (typeof code === 'string' && code.length > 0 && code.length <= 64) return code;
  return typeof name === 'string' && name.length > 0 && name.length <= 64 ? name : '_OTHER';
}

const OPEN_INVOCATIONS = createContextKey('@fleet/orchestrator open invocation spans');

/**
 * The invocation spans of one chain phase that wait for the chain's verdict on them. The
 * chain, not the service's answer, decides an invocation's outcome: an answer that arrives
 * after the invocation's budget ran out is a timeout, whatever it says. So a span started by
 * {@link tracedInvoker} under a stage context that holds this registry is ended by
 * {@link OpenInvocations.settle}, called with each outcome the chain reports (`onOutcome`,
 * `onAuditOutcome`); within one phase an interceptor of a service is invoked at most once,
 * which makes (service id, name) a key.
 */
export class OpenInvocations {
  /** Made on the first recording span: without a tracing SDK nothing is held. */
  #spans: Map<string, Span> | undefined;

  /** `scope` (a stage's tracing context) carrying this registry to {@link tracedInvoker}. */
  scope(scope: Context): Context {
    return scope.setValue(OPEN_INVOCATIONS, this);
  }

  /** Hold `span` until the chain reports the outcome of that invocation. */
  open(serviceId: string, interceptor: string, span: Span): void {
    const key = `${serviceId}\n${interceptor}`;
    // Never expected (one invocation per interceptor and phase); never leak a span either.
    this.#spans ??= new Map();
    guard(() => this.#spans?.get(key)?.end());
    this.#spans.set(key, span);
  }

  /**
   * End the span of the invocation `outcome` reports, with that outcome: `failed` and
   * `timeout` set status ERROR, `rejected` (the caller's params refused) does not.
   */
  settle(outcome: InvocationOutcome): void {
    if (this.#spans === undefined) return;
    const key = `${outcome.serviceId}\n${outcome.interceptor}`;
    const span = this.#spans.get(key);
    if (span === undefined) return;
    this.#spans.delete(key);
    guard(() => {
      span.setAttributes({
        [ATTR.FLEET_INTERCEPTOR_TYPE]: outcome.type,
        [ATTR.FLEET_INTERCEPTOR_MODE]: outcome.mode,
        [ATTR.FLEET_INTERCEPTOR_OUTCOME]: outcome.outcome,
      });
      if (outcome.outcome === 'failed' || outcome.outcome === 'timeout') {
        const code = outcome.error?.code;
        span.setAttribute(ATTR.ERROR_TYPE, code === undefined ? outcome.outcome : String(code));
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: scrubText(outcome.error?.reason ?? outcome.outcome),
        });
      } else if (outcome.outcome === 'rejected') {
        // The service refused the caller's params (-32602): the caller's fault, not the
        // service's, so no ERROR status (as a denial); the code says what it answered.
        span.setAttribute(ATTR.RPC_RESPONSE_STATUS_CODE, String(outcome.error?.code));
      }
    });
    guard(() => span.end());
  }
}

/** What a raw answer says, for an invocation no chain settles (see {@link OpenInvocations}). */
function answerOutcome(answer: unknown): string {
  const result = answer as { valid?: unknown; modified?: unknown; severity?: unknown } | undefined;
  if (typeof result?.valid === 'boolean')
    return resultOutcome({ ...result, type: 'validation' } as InterceptorResult);
  return result?.modified === true ? 'modified' : 'unchanged';
}

/**
 * Wrap a service's invoker so each invocation runs in a CLIENT span named after the
 * interceptor, a child of the chain stage that runs it (its context arrives as the
 * invocation's `scope`), whose trace context the remote call carries to the service. When
 * the stage's context holds {@link OpenInvocations}, the chain's outcome ends the span;
 * otherwise the answer does. The
 * span is started and ended explicitly: nothing here enters an ambient context, which on
 * Node 20 would make every promise of the process pay for context propagation.
 */
export function tracedInvoker(invoker: Invoker, serviceId: string, tracer: Tracer): Invoker {
  return {
    async invoke(params, options) {
      const parent = (options.scope as Context | undefined) ?? context.active();
      const span = tracer.startSpan(
        interceptorInvokeSpanName(params.name),
        {
          kind: SpanKind.CLIENT,
          attributes: {
            [ATTR.FLEET_INTERCEPTOR_NAME]: params.name,
            [ATTR.FLEET_INTERCEPTOR_SERVICE]: serviceId,
            [ATTR.FLEET_CHAIN_PHASE]: params.phase,
            [ATTR.FLEET_CHAIN_EVENT]: spanMethod(params.event),
          },
        },
        parent,
      );
      const open = span.isRecording()
        ? (parent.getValue(OPEN_INVOCATIONS) as OpenInvocations | undefined)
        : undefined;
      open?.open(serviceId, params.name, span);
      const traceHeaders: Record<string, string> = {};
      guard(() => propagation.inject(trace.setSpan(parent, span), traceHeaders));
      let answer: unknown;
      try {
        answer = await invoker.invoke(
          params,
          traceHeaders.traceparent ? merged(options, { traceHeaders }) : options,
        );
      } catch (error) {
        if (!open) {
          guard(() => span.setAttribute(ATTR.FLEET_INTERCEPTOR_OUTCOME, 'failed'));
          recordScrubbedError(span, error);
          guard(() => span.end());
        }
        throw error;
      }
      if (!open) {
        guard(() => {
          if (span.isRecording())
            span.setAttribute(ATTR.FLEET_INTERCEPTOR_OUTCOME, answerOutcome(answer));
          span.end();
        });
      }
      return answer;
    },
  };
}
