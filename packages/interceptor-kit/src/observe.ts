/**
 * Invocation metrics and failure logs for a kit service, from the host's `onInvoked` hook: one
 * helper every interceptor service wires the same way. The kit depends on no telemetry SDK:
 * `metrics` is anything shaped like `@fleet/telemetry`'s `FleetMetrics`.
 */
import type { InvokedEvent } from './host.ts';
import { reasonLabel } from './labels.ts';
import type { Logger } from './logger.ts';

/** Attributes of one recorded invocation (those of `FleetMetrics.recordInterceptor`). */
export interface InvocationMetricAttributes {
  interceptor: string;
  /** `allowed` `warned` `denied` `modified` `unchanged` (the verdict), `failed` or `timeout`. */
  outcome: string;
  type?: string;
  mode?: string;
  phase?: string;
}

/** Where invocations are recorded: `fleet.interceptor.duration` (ms) by outcome. */
export interface InvocationMetrics {
  recordInterceptor(durationMs: number, attributes: InvocationMetricAttributes): void;
}

/** Options for {@link observeInvocations}. */
export interface InvocationObserverOptions {
  /** Records every invocation's duration with its outcome. */
  metrics?: InvocationMetrics | undefined;
  /**
   * Warned of every failed or timed-out invocation: name, event (`other` when made up), phase
   * and the handler's reason cut to 256 characters; never the payload.
   */
  logger?: Logger | undefined;
}

/** The metric outcome of an invocation. */
export function invocationOutcome(event: InvokedEvent): string {
  if (event.outcome === 'timeout') return 'timeout';
  if (event.outcome === 'error') return 'failed';
  return event.verdict ?? 'allowed';
}

/**
 * An `onInvoked` hook (for `createInterceptorHost`) that records each invocation in
 * `metrics` and warns `logger` of each failure. Never throws into the host.
 */
export function observeInvocations(
  options: InvocationObserverOptions,
): (event: InvokedEvent) => void {
  const { metrics, logger } = options;
  return (event) => {
    const outcome = invocationOutcome(event);
    try {
      metrics?.recordInterceptor(event.durationMs, {
        interceptor: event.interceptor,
        outcome,
        type: event.type,
        mode: event.mode,
        phase: event.phase,
      });
    } catch {
      // Metrics never break an invocation.
    }
    if (event.outcome === 'ok' || logger === undefined) return;
    try {
      logger.warn(
        {
          interceptor: event.interceptor,
          event: event.event,
          phase: event.phase,
          outcome,
          reason: event.reason === undefined ? undefined : reasonLabel(event.reason),
          durationMs: Math.round(event.durationMs * 1000) / 1000,
        },
        'interceptor invocation failed',
      );
    } catch {
      // Logging never breaks an invocation.
    }
  };
}
