/**
 * The chain engine: which interceptors run for an (event, phase), in which order, and what
 * their answers add up to. Transport-agnostic: an {@link Invoker} performs each
 * `interceptor/invoke`, whether over HTTP, stdio or in process.
 *
 * Semantics (DESIGN.md §2, SEP-2624): the request phase is receiving (validators in
 * parallel, then mutators in sequence); the response phase is sending (mutators, then
 * validators, which see the mutated payload). Audit-mode interceptors are started off the
 * critical path and never block or mutate. failOpen covers invocation failures only.
 *
 * An invocation failure is `failed` (crash, transport error, malformed result), `timeout`,
 * or `rejected`: the service answered -32602, refusing the params it was given (e.g. a payload
 * over one of its limits), which says the caller's input is at fault rather than the service.
 * A -32602 whose `data.reason` is one of {@link InvokeErrorReason} (the service no longer has
 * the interceptor; the service refused the batch the invocation travelled in) is nobody's
 * input at fault, so `failed`. All three block the chain alike (fail-closed unless failOpen);
 * only reports tell them apart.
 */
import { setMaxListeners } from 'node:events';
import { FleetError, JsonRpcCode, ProtocolError } from './errors.ts';
import { matchesAnyEvent } from './events.ts';
import type { InFlightLimit } from './in-flight.ts';
import type { ResolvedInterceptor } from './overrides.ts';
import { compareChainOrder } from './priority.ts';
import type {
  InterceptorMode,
  InterceptorResult,
  InterceptorType,
  InvocationContext,
  InvokeParams,
  Phase,
} from './types.ts';
import { InvokeErrorReason, parseInvokeResult } from './wire.ts';

/** Options for one invocation. */
export interface InvokeOptions {
  /**
   * Aborted when the caller gives up (one signal may serve many invocations). The engine
   * enforces each invocation's own budget by not waiting past it; the service enforces it
   * too (it gets `timeoutMs`).
   */
  signal: AbortSignal;
  /**
   * The invoker may send this invocation together with others to the same service started
   * in the same turn of the event loop (always for audit-mode invocations, which nobody
   * waits on; for active ones when the chain runs with {@link RunChainOptions.coalesce}).
   */
  batchable?: boolean;
  /**
   * What the stage running this invocation handed to `run` (see
   * {@link RunChainOptions.wrapStage}), e.g. its tracing context; opaque to the engine.
   */
  scope?: unknown;
  /**
   * W3C trace context headers (`traceparent`, maybe `tracestate`) to send with the
   * invocation, when the caller traces it explicitly; otherwise the invoker uses the active
   * tracing context or the invocation context's ids.
   */
  traceHeaders?: Readonly<Record<string, string>>;
}

/**
 * Performs `interceptor/invoke`. Resolves with the raw result (parsed liberally by the
 * engine); rejects with a {@link ProtocolError} for a JSON-RPC error or any other error for
 * a transport failure. An invoker that sent the invocation in a batch and had the batch
 * request refused as a whole rejects each item with what `batchItemError` makes of that error.
 */
export interface Invoker {
  invoke(params: InvokeParams, options: InvokeOptions): Promise<unknown>;
}

/** An interceptor as the chain sees it. */
export type ChainInterceptor = ResolvedInterceptor<Invoker>;

/** One interceptor placed in a plan, with its priority in the plan's phase. */
export interface ChainStep {
  interceptor: ChainInterceptor;
  priority: number;
}

/** Validators run together; mutators run one after another. */
export interface ChainStage {
  kind: 'validators' | 'mutators';
  steps: ChainStep[];
}

/** What runs for one (event, phase), in order. Empty stages are left out. */
export interface ChainPlan {
  event: string;
  phase: Phase;
  stages: ChainStage[];
}

/** Options for {@link planChain}. */
export interface PlanChainOptions {
  /** The negotiated protocol revision; interceptors whose `compat` excludes it are skipped. */
  protocolVersion?: string;
}

function compatible(interceptor: ChainInterceptor, version: string | undefined): boolean {
  const compat = interceptor.compat;
  if (compat === undefined || version === undefined) return true;
  // Revisions are ISO dates, so string order is time order.
  if (version < compat.minProtocol) return false;
  return compat.maxProtocol === undefined || version <= compat.maxProtocol;
}

/**
 * Select the interceptors whose hooks match `event` in `phase` and order them into stages.
 * Pure: compute once per registry change and reuse for every request.
 */
export function planChain(
  interceptors: readonly ChainInterceptor[],
  event: string,
  phase: Phase,
  options: PlanChainOptions = {},
): ChainPlan {
  const validators: ChainStep[] = [];
  const mutators: ChainStep[] = [];
  for (const interceptor of interceptors) {
    const hooked = interceptor.hooks.some(
      (hook) => hook.phase === phase && matchesAnyEvent(hook.events, event),
    );
    if (!hooked || !compatible(interceptor, options.protocolVersion)) continue;
    const step = { interceptor, priority: interceptor.priority[phase] };
    (interceptor.type === 'validation' ? validators : mutators).push(step);
  }
  const order = (a: ChainStep, b: ChainStep) =>
    compareChainOrder(
      { priority: a.priority, name: a.interceptor.name, serviceId: a.interceptor.serviceId },
      { priority: b.priority, name: b.interceptor.name, serviceId: b.interceptor.serviceId },
    );
  validators.sort(order);
  mutators.sort(order);
  const validatorStage: ChainStage = { kind: 'validators', steps: validators };
  const mutatorStage: ChainStage = { kind: 'mutators', steps: mutators };
  const stages =
    phase === 'request' ? [validatorStage, mutatorStage] : [mutatorStage, validatorStage];
  return { event, phase, stages: stages.filter((s) => s.steps.length > 0) };
}

/**
 * How one invocation turned out: what its result decided ({@link ResultOutcome}), or how it
 * failed: `failed` (crash, transport error, malformed result, and a -32602 that is no fault of
 * the params: see {@link InvokeErrorReason}), `timeout`, or `rejected` (the service refused the
 * params with -32602: the caller's input, not the service, is at fault).
 */
export type InvocationOutcomeKind =
  | 'allowed'
  | 'warned'
  | 'denied'
  | 'modified'
  | 'unchanged'
  | 'failed'
  | 'timeout'
  | 'rejected';

/** The {@link InvocationOutcomeKind}s of an invocation that produced no usable result. */
export type FailureOutcome = 'failed' | 'timeout' | 'rejected';

/** What an answered invocation decided (an {@link InvocationOutcomeKind} short of a failure). */
export type ResultOutcome = Exclude<InvocationOutcomeKind, FailureOutcome>;

/**
 * Whether `kind` is a failure of the invocation (`failed`, `timeout`, `rejected`): each blocks
 * the chain unless the interceptor is failOpen.
 */
export function isFailureOutcome(kind: InvocationOutcomeKind): kind is FailureOutcome {
  return kind === 'failed' || kind === 'timeout' || kind === 'rejected';
}

/**
 * What an interceptor's result decided, the one reading every report uses (chain outcomes,
 * metrics, spans, service-side events): a validator that is not valid only denies when its
 * effective severity is `error` (missing counts as `error`), else it warns.
 */
export function resultOutcome(result: InterceptorResult): ResultOutcome {
  if (result.type === 'mutation') return result.modified ? 'modified' : 'unchanged';
  if (result.valid) return 'allowed';
  return (result.severity ?? 'error') === 'error' ? 'denied' : 'warned';
}

/** One invocation's record, active or audit. */
export interface InvocationOutcome {
  interceptor: string;
  serviceId: string;
  type: InterceptorType;
  mode: InterceptorMode;
  phase: Phase;
  outcome: InvocationOutcomeKind;
  durationMs: number;
  /** The canonical result, when the invocation succeeded. */
  result?: InterceptorResult;
  /** Why the invocation failed (`failed`, `timeout`, `rejected`). */
  error?: { reason: string; code?: number; timeoutMs?: number };
  /** True when a failure was tolerated because of failOpen. */
  failedOpen?: boolean;
}

/** Why a chain stopped. `type` says what kind of blocking it was. */
export interface AbortInfo {
  interceptor: string;
  serviceId: string;
  reason: string;
  type: 'validation' | 'mutation' | 'invocation' | 'timeout';
  phase: Phase;
}

/** The overall result of running a chain for one phase. */
export interface ChainResult {
  status: 'success' | 'validation_failed' | 'mutation_failed' | 'timeout';
  event: string;
  phase: Phase;
  /** Active invocations, in the order they were started. */
  results: InvocationOutcome[];
  /** The payload after every applied mutation; present on success only. */
  finalPayload?: unknown;
  validationSummary: { errors: number; warnings: number; infos: number };
  abortedAt: AbortInfo[];
  /** The chain budget, when one applied (reported with a timeout). */
  timeoutMs?: number;
  totalDurationMs: number;
}

/** What the chain runs on. */
export interface ChainInput {
  /** The governed request's `params` (request phase) or `result` (response phase). */
  payload: unknown;
  context?: InvocationContext;
  /** Per-interceptor `config`, keyed by interceptor name. */
  config?: Readonly<Record<string, Record<string, unknown>>>;
}

/** Options for {@link runChain}. */
export interface RunChainOptions {
  /** Budget for the whole phase; each invocation's own timeout is capped by what is left. */
  timeoutMs?: number;
  /** The caller gave up (e.g. the client cancelled): pending invocations are cancelled. */
  signal?: AbortSignal;
  /** Receives every audit-mode outcome once it is known (off the critical path). */
  onAuditOutcome?: (outcome: InvocationOutcome) => void;
  /** Receives every active outcome as soon as it is known (for spans and metrics). */
  onOutcome?: (outcome: InvocationOutcome) => void;
  /**
   * Checks that a mutated payload is still valid for the governed method; a returned
   * string is the reason it is not, and makes that mutation a failure of its mutator.
   */
  validatePayload?: (payload: unknown, step: ChainStep, phase: Phase) => string | undefined;
  /** Budget for audit invocations without their own timeout (default 30 s). */
  auditTimeoutMs?: number;
  /**
   * Bounds the audit-mode invocations in flight per interceptor service (keyed by service
   * id); share one across every run so that the bound holds for the whole process. A slot is
   * taken when the chain reaches the invocation (before {@link deferAudit}: one waiting for
   * its batch holds its payload too) and given back once its request is over: the invoker's
   * promise settled, or the invocation was never sent. An invoker must settle every request
   * (the kit's remote one does by its request timeout); one that never does keeps its slot.
   * Past the bound the invocation is not started and its payload not kept: `onAuditOutcome`
   * gets it at once as `failed` with reason {@link AUDIT_OVERLOADED} and `durationMs` 0.
   */
  auditLimit?: InFlightLimit;
  /**
   * Schedules the start of each audit-mode invocation (default: start at once). A caller
   * may batch them, e.g. to wake an observer service once per batch instead of per call;
   * each audit invocation's time budget starts when it actually starts.
   */
  deferAudit?: (start: () => void) => void;
  /**
   * Wraps the execution of each stage, e.g. in a tracing span. Must call `run` exactly
   * once; what it passes to `run` reaches every invocation of the stage as
   * {@link InvokeOptions.scope} (e.g. the span's context, so that invocations become its
   * children without an ambient context).
   */
  wrapStage?: (stage: ChainStage, run: (scope?: unknown) => Promise<void>) => Promise<void>;
  /**
   * Let invokers coalesce active invocations too: under concurrent load, the invocations
   * of many chains that reach one busy service in the same event-loop turn then travel as one
   * request (far less CPU per invocation on both sides). The price: the answers of one
   * batch return together, so a slow item delays the others of its batch.
   */
  coalesce?: boolean;
  /**
   * Request phase only: start the mutators together with the validators instead of after
   * them, saving one round trip of latency. The outcome is the same as in order: when a
   * validator blocks, the chain answers at once with the denial and whatever the mutators
   * did is discarded (left out of {@link ChainResult.results}; still reported to
   * `onOutcome`). The price: mutator services also see requests that end up denied.
   */
  speculativeMutators?: boolean;
  /** Monotonic clock in milliseconds (default `performance.now`). */
  now?: () => number;
}

const TIMEOUT = Symbol('timeout');
/**
 * The signal of invocations nothing cancels. Every audit-mode invocation in flight may listen
 * to it, so it has no listener limit (Node would warn of a leak past 10).
 */
const NEVER_ABORTED = new AbortController().signal;
setMaxListeners(0, NEVER_ABORTED);
const DEFAULT_AUDIT_TIMEOUT_MS = 30_000;

/**
 * The failure reason of an audit-mode invocation that was not started because its service
 * already had {@link RunChainOptions.auditLimit} of them in flight.
 */
export const AUDIT_OVERLOADED = 'overloaded';

/** What a run (or a speculative stage) has decided so far. */
interface Tally {
  status: ChainResult['status'];
  /** Active outcomes in the order their stage finished them. */
  results: InvocationOutcome[];
  abortedAt: AbortInfo[];
  payload: unknown;
  /** Set on a speculative tally once its run was decided without it: start nothing more. */
  discarded?: boolean;
}

function freshTally(payload: unknown): Tally {
  return { status: 'success', results: [], abortedAt: [], payload };
}

interface StepRun {
  outcome: InvocationOutcome;
  /** The chain budget, not the interceptor's own, ran out. */
  chainTimeout: boolean;
}

/**
 * What an invocation failure says, as chains and services report it: a protocol or peer
 * error's `data.reason` (URL-free for peers), else its message; plus the JSON-RPC code.
 */
export function failureReason(error: unknown): { reason: string; code?: number } {
  if (error instanceof ProtocolError) {
    const data = error.data as { reason?: unknown } | undefined;
    const reason = typeof data?.reason === 'string' ? data.reason : error.message;
    return { reason, code: error.code };
  }
  if (error instanceof FleetError) {
    // A peer's failure says what went wrong in `data.reason` without its address (the
    // message names the URL, which clients must not learn).
    const reason = (error.data as { reason?: unknown } | undefined)?.reason;
    return { reason: typeof reason === 'string' ? reason : error.message };
  }
  if (error instanceof Error) return { reason: error.message || error.name };
  return { reason: String(error) };
}

function safeCall<T>(fn: ((value: T) => void) | undefined, value: T): void {
  if (fn === undefined) return;
  try {
    fn(value);
  } catch {
    // Observers never break a chain.
  }
}

/**
 * Run a planned chain. Never throws: every failure is reported in the result.
 */
export async function runChain(
  plan: ChainPlan,
  input: ChainInput,
  options: RunChainOptions = {},
): Promise<ChainResult> {
  const now = options.now ?? (() => performance.now());
  const started = now();
  const deadline = options.timeoutMs === undefined ? Infinity : started + options.timeoutMs;
  const { event, phase } = plan;
  const main = freshTally(input.payload);

  // Active invocations get the caller's signal (an AbortController per invocation, or
  // even per run, is a measurable cost on a busy gateway): when the caller gives up, their
  // requests are cancelled and whatever still waits fails at once. An invocation's own
  // timeout answers the chain at once whatever its invoker does; its request is left to
  // end by itself (the service got `timeoutMs` and answers by then).
  const activeSignal = options.signal ?? NEVER_ABORTED;
  const waiting = new Set<(error: unknown) => void>();
  const onCallerAbort = () => {
    const reason = options.signal?.reason;
    for (const fail of waiting) fail(reason);
  };
  options.signal?.addEventListener('abort', onCallerAbort, { once: true });

  /**
   * Invoke one step. `requestEnded`, when given, is called once the invoker's request is over
   * (its promise settled, which may be after the step's own verdict) or was never made.
   */
  const invokeStep = async (
    step: ChainStep,
    stepPayload: unknown,
    audit: boolean,
    scope: unknown,
    requestEnded?: () => void,
  ): Promise<StepRun> => {
    const { interceptor } = step;
    const t0 = now();
    const remaining = audit ? Infinity : deadline - t0;
    const own =
      interceptor.timeoutMs ??
      (audit
        ? (options.auditTimeoutMs ?? options.timeoutMs ?? DEFAULT_AUDIT_TIMEOUT_MS)
        : undefined);
    const budget = Math.min(own ?? Infinity, remaining);
    const chainLimited = !audit && remaining <= (own ?? Infinity);
    const outcomeOf = (kind: InvocationOutcomeKind): InvocationOutcome => ({
      interceptor: interceptor.name,
      serviceId: interceptor.serviceId,
      type: interceptor.type,
      mode: interceptor.mode,
      phase,
      outcome: kind,
      durationMs: now() - t0,
    });
    const fail = (
      reason: string,
      extra?: { code?: number; timeoutMs?: number },
      kind: FailureOutcome = 'failed',
    ): InvocationOutcome => {
      const outcome = outcomeOf(kind);
      outcome.error = extra === undefined ? { reason } : { reason, ...extra };
      if (interceptor.failOpen) outcome.failedOpen = true;
      return outcome;
    };
    if (budget <= 0) {
      requestEnded?.();
      return { outcome: fail('timeout', { timeoutMs: 0 }, 'timeout'), chainTimeout: chainLimited };
    }
    if (!audit && options.signal?.aborted) {
      requestEnded?.();
      return { outcome: fail('cancelled'), chainTimeout: false };
    }
    const params: InvokeParams = { name: interceptor.name, event, phase, payload: stepPayload };
    if (Number.isFinite(budget)) params.timeoutMs = Math.max(1, Math.floor(budget));
    const config = input.config?.[interceptor.name];
    if (config) params.config = config;
    if (input.context) params.context = input.context;
    // An audit invocation outlives the run and its caller: nothing cancels it but its budget.
    const invokeOptions: InvokeOptions = { signal: audit ? NEVER_ABORTED : activeSignal };
    if (audit || options.coalesce) invokeOptions.batchable = true;
    if (scope !== undefined) invokeOptions.scope = scope;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let failWaiting: ((error: unknown) => void) | undefined;
    let request: Promise<unknown> | undefined;
    try {
      // The answer, or TIMEOUT when the budget runs out first (an invoker that ignores its
      // signal cannot hold the chain).
      const raw = await new Promise<unknown>((resolve, reject) => {
        if (Number.isFinite(budget)) {
          timer = setTimeout(() => resolve(TIMEOUT), budget);
        }
        if (!audit) {
          failWaiting = reject;
          waiting.add(reject);
        }
        request = interceptor.invoker.invoke(params, invokeOptions);
        request.then(resolve, reject);
      });
      if (raw === TIMEOUT) {
        const timeoutMs = Math.floor(budget);
        return { outcome: fail('timeout', { timeoutMs }, 'timeout'), chainTimeout: chainLimited };
      }
      const result = parseInvokeResult(raw, {
        interceptor: interceptor.name,
        type: interceptor.type,
        phase,
        payload: stepPayload,
      });
      if (result.type === 'mutation' && result.modified && options.validatePayload) {
        const invalid = options.validatePayload(result.payload, step, phase);
        if (invalid !== undefined)
          return { outcome: fail(`invalid mutated payload: ${invalid}`), chainTimeout: false };
      }
      const outcome = outcomeOf(resultOutcome(result));
      outcome.result = result;
      return { outcome, chainTimeout: false };
    } catch (error) {
      if (isRemoteTimeout(error)) {
        const timeoutMs = Math.floor(budget);
        return { outcome: fail('timeout', { timeoutMs }, 'timeout'), chainTimeout: chainLimited };
      }
      const { reason, code } = failureReason(error);
      return {
        outcome: fail(reason, code === undefined ? undefined : { code }, failureKind(error)),
        chainTimeout: false,
      };
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      if (failWaiting) waiting.delete(failWaiting);
      // A request past its budget still holds its payload until the invoker lets it go.
      if (requestEnded !== undefined) {
        if (request === undefined) requestEnded();
        else Promise.resolve(request).then(requestEnded, requestEnded);
      }
    }
  };

  const fireAudit = (step: ChainStep, stepPayload: unknown, scope: unknown) => {
    const { auditLimit } = options;
    const { interceptor } = step;
    let release: (() => void) | undefined;
    if (auditLimit !== undefined) {
      if (!auditLimit.tryAcquire(interceptor.serviceId)) {
        safeCall(options.onAuditOutcome, overloadedOutcome(interceptor, phase));
        return;
      }
      release = () => auditLimit.release(interceptor.serviceId);
    }
    const start = () =>
      void invokeStep(step, stepPayload, true, scope, release).then(({ outcome }) =>
        safeCall(options.onAuditOutcome, outcome),
      );
    if (options.deferAudit) options.deferAudit(start);
    else start();
  };

  const record = (run: StepRun, tally: Tally) => {
    tally.results.push(run.outcome);
    safeCall(options.onOutcome, run.outcome);
  };

  const failureAbort = (o: InvocationOutcome, type: AbortInfo['type']): AbortInfo => ({
    interceptor: o.interceptor,
    serviceId: o.serviceId,
    reason: o.error?.reason ?? 'failed',
    type,
    phase,
  });

  const runValidators = async (stage: ChainStage, scope: unknown, tally: Tally) => {
    const active: ChainStep[] = [];
    for (const step of stage.steps) {
      if (step.interceptor.mode === 'audit') fireAudit(step, tally.payload, scope);
      else active.push(step);
    }
    const runs = await Promise.all(
      active.map((step) => invokeStep(step, tally.payload, false, scope)),
    );
    const denials: AbortInfo[] = [];
    const failures: AbortInfo[] = [];
    const timeouts: AbortInfo[] = [];
    for (const run of runs) {
      record(run, tally);
      const o = run.outcome;
      if (run.chainTimeout) timeouts.push(failureAbort(o, 'timeout'));
      else if (o.outcome === 'denied')
        denials.push({ ...failureAbort(o, 'validation'), reason: denialReason(o) });
      else if (isFailureOutcome(o.outcome) && !o.failedOpen)
        failures.push(failureAbort(o, 'invocation'));
    }
    if (timeouts.length > 0) {
      tally.status = 'timeout';
      tally.abortedAt.push(...timeouts);
    } else if (denials.length > 0 || failures.length > 0) {
      tally.status = 'validation_failed';
      tally.abortedAt.push(...denials, ...failures);
    }
  };

  const runMutators = async (stage: ChainStage, scope: unknown, tally: Tally) => {
    for (const step of stage.steps) {
      if (tally.discarded) return;
      if (step.interceptor.mode === 'audit') {
        fireAudit(step, tally.payload, scope);
        continue;
      }
      const run = await invokeStep(step, tally.payload, false, scope);
      record(run, tally);
      const o = run.outcome;
      if (run.chainTimeout) {
        tally.status = 'timeout';
        tally.abortedAt.push(failureAbort(o, 'timeout'));
        return;
      }
      if (isFailureOutcome(o.outcome)) {
        if (o.failedOpen) continue;
        tally.status = 'mutation_failed';
        tally.abortedAt.push(failureAbort(o, 'mutation'));
        return;
      }
      if (o.result?.type === 'mutation' && o.result.modified) tally.payload = o.result.payload;
    }
  };

  const runStage = async (stage: ChainStage, tally: Tally): Promise<void> => {
    const run = (scope?: unknown) =>
      stage.kind === 'validators'
        ? runValidators(stage, scope, tally)
        : runMutators(stage, scope, tally);
    if (!options.wrapStage) return run();
    let ran = false;
    await options.wrapStage(stage, (scope) => {
      ran = true;
      return run(scope);
    });
    if (!ran) await run();
  };

  try {
    const [first, second] = plan.stages;
    let next = 0;
    if (
      options.speculativeMutators &&
      phase === 'request' &&
      first?.kind === 'validators' &&
      second?.kind === 'mutators'
    ) {
      // The mutators work on their own tally, which counts only if the validators pass.
      const ahead = freshTally(main.payload);
      const validating = runStage(first, main);
      const mutating = runStage(second, ahead);
      mutating.catch(() => undefined); // only awaited when the validators pass
      await validating;
      if (main.status === 'success') {
        await mutating;
        main.status = ahead.status;
        main.results.push(...ahead.results);
        main.abortedAt.push(...ahead.abortedAt);
        main.payload = ahead.payload;
      } else ahead.discarded = true;
      next = 2;
    }
    for (const stage of plan.stages.slice(next)) {
      if (main.status !== 'success') break;
      await runStage(stage, main);
    }
  } finally {
    options.signal?.removeEventListener('abort', onCallerAbort);
  }

  const { status, results, abortedAt, payload } = main;
  const result: ChainResult = {
    status,
    event,
    phase,
    results,
    validationSummary: summarise(results),
    abortedAt,
    totalDurationMs: now() - started,
  };
  if (options.timeoutMs !== undefined) result.timeoutMs = options.timeoutMs;
  if (status === 'success') result.finalPayload = payload;
  return result;
}

/** The outcome of an audit-mode invocation refused by {@link RunChainOptions.auditLimit}. */
function overloadedOutcome(interceptor: ChainInterceptor, phase: Phase): InvocationOutcome {
  const outcome: InvocationOutcome = {
    interceptor: interceptor.name,
    serviceId: interceptor.serviceId,
    type: interceptor.type,
    mode: interceptor.mode,
    phase,
    outcome: 'failed',
    durationMs: 0,
    error: { reason: AUDIT_OVERLOADED },
  };
  if (interceptor.failOpen) outcome.failedOpen = true;
  return outcome;
}

/** The `data.reason`s of a -32602 that put the fault elsewhere than in the caller's params. */
const NOT_THE_PARAMS: ReadonlySet<unknown> = new Set(Object.values(InvokeErrorReason));

/**
 * How an invocation that threw `error` failed, a timeout aside: `rejected` when the service
 * answered -32602, refusing the params it was given; `failed` for anything else, and for a
 * -32602 whose `data.reason` is one of {@link InvokeErrorReason}: a service that no longer has
 * the interceptor (a registry older than the service's deployment) or refused the whole batch
 * the invocation travelled in is no fault of the caller's params, and must count as a failure
 * (alerts leave `rejected` out).
 */
function failureKind(error: unknown): 'failed' | 'rejected' {
  if (!(error instanceof ProtocolError) || error.code !== JsonRpcCode.INVALID_PARAMS)
    return 'failed';
  const reason = (error.data as { reason?: unknown } | null | undefined)?.reason;
  return NOT_THE_PARAMS.has(reason) ? 'failed' : 'rejected';
}

/** The interceptor's own host reported a timeout (-32603 with `data.reason: "timeout"`). */
function isRemoteTimeout(error: unknown): boolean {
  return (
    error instanceof ProtocolError &&
    (error.data as { reason?: unknown } | undefined)?.reason === 'timeout'
  );
}

function denialReason(outcome: InvocationOutcome): string {
  const result = outcome.result;
  if (result?.type !== 'validation') return 'invalid';
  const first = result.messages?.find((m) => m.severity === 'error') ?? result.messages?.[0];
  return first?.message ?? 'invalid';
}

function summarise(results: readonly InvocationOutcome[]): ChainResult['validationSummary'] {
  const summary = { errors: 0, warnings: 0, infos: 0 };
  const count = (severity: string) => {
    if (severity === 'error') summary.errors++;
    else if (severity === 'warn') summary.warnings++;
    else summary.infos++;
  };
  for (const { result } of results) {
    if (result?.type !== 'validation') continue;
    if (result.messages && result.messages.length > 0) {
      for (const message of result.messages) count(message.severity);
    } else if (!result.valid) count(result.severity ?? 'error');
  }
  return summary;
}
