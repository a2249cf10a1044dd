/**
 * One audit record per chain execution, handed to the (never blocking) audit producer.
 * Records carry names, outcomes, timings and reasons — never payloads.
 */
import { type AuditRecord, type AuditRecordInput, createAuditRecord } from '@fleet/audit';
import type { ChainExecution, ChainObserver } from './gateway.ts';
import { chainStatusOf } from './telemetry.ts';

/** Where records go: `AuditProducer.enqueue` returns at once. */
export interface AuditSink {
  enqueue(record: AuditRecord): void;
}

/** Map one chain execution to an audit record. */
export function auditRecordOf(execution: ChainExecution): AuditRecord {
  const { result, context } = execution;
  let status: AuditRecord['status'];
  let decision: AuditRecord['decision'];
  if (execution.backendError) {
    status = 'backend_error';
    decision = 'error';
  } else {
    // The same status as the fleet.chain.status metric label.
    status = chainStatusOf(result);
    decision =
      status === 'success' ? 'allowed' : status === 'validation_failed' ? 'denied' : 'error';
  }
  const input: AuditRecordInput = {
    kind: 'chain',
    event: result.event,
    phase: result.phase,
    method: execution.method,
    decision,
    status,
    durationMs: result.totalDurationMs,
    interceptors: result.results.map((o) => {
      const entry: AuditRecord['interceptors'][number] = {
        name: o.interceptor,
        service: o.serviceId,
        type: o.type,
        mode: o.mode,
        outcome: o.outcome,
        durationMs: o.durationMs,
      };
      if (o.result?.type === 'validation' && o.result.messages?.length) {
        entry.messages = o.result.messages.map((m) =>
          m.path === undefined
            ? { severity: m.severity, message: m.message }
            : { path: m.path, severity: m.severity, message: m.message },
        );
      }
      return entry;
    }),
    abortReasons: result.abortedAt.map(({ interceptor, reason, type, phase }) => ({
      interceptor,
      reason,
      type,
      phase,
    })),
  };
  if (context.traceId) input.traceId = context.traceId;
  if (context.spanId) input.spanId = context.spanId;
  if (context.sessionId) input.sessionId = context.sessionId;
  if (context.principal) {
    input.principal =
      context.principal.id === undefined
        ? { type: context.principal.type }
        : { type: context.principal.type, id: context.principal.id };
  }
  if (execution.target !== undefined) input.target = execution.target;
  if (execution.backend !== undefined) input.backend = execution.backend;
  return createAuditRecord(input);
}

/** A chain observer that enqueues an audit record per execution (never throws). */
export function createAuditObserver(sink: AuditSink): ChainObserver {
  return {
    chainExecuted(execution) {
      try {
        sink.enqueue(auditRecordOf(execution));
      } catch {
        // Auditing never breaks a request; the producer counts what it cannot take.
      }
    },
  };
}
