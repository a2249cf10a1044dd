/**
 * One audit record per chain execution, handed to the (never blocking) audit producer.
 * Records carry names, outcomes, timings and reasons — never payloads.
 */
import {
  type AdminChange,
  type AuditRecord,
  type AuditRecordInput,
  createAdminAuditor,
  createAdminRecord,
  createAuditRecord,
} from '@fleet/audit';
import type { Principal } from '@fleet/core';
import type { AdminAction } from './admin.ts';
import type { ChainExecution, ChainObserver } from './gateway.ts';
import { type Logger, logThrottle } from './logger.ts';
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
  if (context.principal) input.principal = auditPrincipalOf(context.principal);
  if (execution.target !== undefined) input.target = execution.target;
  if (execution.backend !== undefined) input.backend = execution.backend;
  return createAuditRecord(input);
}

/** The principal as records carry it: type and id, never the claims. */
function auditPrincipalOf(principal: Principal): NonNullable<AuditRecord['principal']> {
  return principal.id === undefined
    ? { type: principal.type }
    : { type: principal.type, id: principal.id };
}

export { ADMIN_API_NAME, ADMIN_REFUSALS_PER_MINUTE } from '@fleet/audit';

/** The shared admin change (`@fleet/audit`) of one admin API action: event `admin/services/<action>`. */
function adminChangeOf(action: AdminAction): AdminChange {
  const change: AdminChange = {
    event: `admin/services/${action.action}`,
    method: action.method,
    outcome: action.outcome,
    durationMs: action.durationMs,
  };
  if (action.service !== undefined) change.target = action.service;
  if (action.operator) change.operator = action.operator;
  if (action.reason !== undefined) change.reason = action.reason;
  return change;
}

/**
 * Map one admin API change (or refused attempt) to an `admin` audit record: event
 * `admin/services/<action>`, target the service id, principal the operator; a refusal is
 * `denied` with the refusal as its abort reason (see `createAdminRecord`).
 */
export function adminRecordOf(action: AdminAction): AuditRecord {
  return createAdminRecord(adminChangeOf(action));
}

/** How often a run of dropped records is logged (once, then at most this often). */
export const DROPPED_RECORD_LOG_INTERVAL_MS = 60_000;

/**
 * A chain observer that enqueues an audit record per execution. It never throws: auditing
 * never breaks a request. A record that cannot be built or taken is dropped, and said so on
 * `log` (the first time, then at most once a minute with the count since the start), so a
 * gap in the audit trail always leaves a trace.
 */
export function createAuditObserver(
  sink: AuditSink,
  log?: Pick<Logger, 'warn'>,
  now: () => number = () => performance.now(),
): ChainObserver & { adminAction(action: AdminAction): void } {
  const dropped = logThrottle(DROPPED_RECORD_LOG_INTERVAL_MS, now);
  const enqueue = (build: () => AuditRecord) => {
    try {
      sink.enqueue(build());
    } catch (error) {
      if (dropped.due() && log) {
        // The error's kind and its first words, never the execution (client text).
        const reason =
          error instanceof Error ? `${error.name}: ${error.message.slice(0, 200)}` : 'unknown';
        log.warn(
          { dropped: dropped.count, reason },
          'audit record dropped: it could not be built or queued',
        );
      }
    }
  };
  // Admin records go through the same enqueue: one count of dropped records for both kinds.
  const admin = createAdminAuditor(
    { enqueue: (record) => enqueue(() => record) },
    { logger: log && { warn: (message, fields) => log.warn(fields ?? {}, message) }, now },
  );
  return {
    chainExecuted(execution) {
      enqueue(() => auditRecordOf(execution));
    },
    adminAction(action) {
      admin.record(adminChangeOf(action));
    },
  };
}
