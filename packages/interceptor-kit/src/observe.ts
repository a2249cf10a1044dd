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
  /**
   * `allowed` `warned` `denied` `modified` `unchanged` (the verdict), `failed`, `timeout` or
   * `rejected` (the caller's params refused with -32602: no failure of the service).
   */
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
   * Warned of every failed or timed-out invocation, told (`info`) of every rejected one: name,
   * event (`other` when made up), phase and the reason cut to 256 characters; never the payload.
   */
  logger?: Logger | undefined;
}

/** The metric outcome of an invocation. */
export function invocationOutcome(event: InvokedEvent): string {
  if (event.outcome === 'timeout') return 'timeout';
  if (event.outcome === 'error') return 'failed';
  if (event.outcome === 'rejected') return 'rejected';
  return event.verdict ?? 'allowed';
}

/**
 * An `onInvoked` hook (for `createInterceptorHost`) that records each invocation in
 * `metrics` and warns `logger` of each failure; a rejected one is only `info` (the caller's
 * input at fault, not the service). Never throws into the host.
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
      const fields = {
        interceptor: event.interceptor,
        event: event.event,
        phase: event.phase,
        outcome,
        reason: event.reason === undefined ? undefined : reasonLabel(event.reason),
        durationMs: Math.round(event.durationMs * 1000) / 1000,
      };
      if (event.outcome === 'rejected') logger.info(fields, 'interceptor invocation rejected');
      else logger.warn(fields, 'interceptor invocation failed');
    } catch {
      // Logging never breaks an invocation.
    }
  };
}
