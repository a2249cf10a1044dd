/**
 * `admin` audit records: one per change an operator makes through an admin API (the
 * orchestrator's interceptor registry, the policy-validator's tool pins), and one per attempt
 * refused for its credentials, so the trail says who changed what, and when, the same way
 * for every service. Refusals are bounded: a client hammering an admin API with bad tokens
 * must not flood the audit store.
 */
import { performance } from 'node:perf_hooks';
import type { AuditLogger } from './logger.ts';
import {
  type AuditPrincipal,
  type AuditRecord,
  type AuditRecordInput,
  createAuditRecord,
} from './record.ts';

/**
 * Every admin event, `admin/<what>/<action>`, and what its record's `target` names. The
 * record schema takes any event text; this list is where a new admin event is added, so
 * producers, queries and docs agree on the names.
 */
export const ADMIN_EVENTS = {
  /** `POST /admin/services` (orchestrator): target the service id. */
  'admin/services/register': 'service',
  /** `DELETE /admin/services/{id}` (orchestrator): target the service id. */
  'admin/services/unregister': 'service',
  /** `POST /admin/services/{id}/refresh` (orchestrator): target the service id. */
  'admin/services/refresh': 'service',
  /** `POST /policy/pins/{tool}/approve` (policy-validator): target the tool name. */
  'admin/pins/approve': 'tool',
  /** `DELETE /policy/pins/{tool}` (policy-validator): target the tool name. */
  'admin/pins/forget': 'tool',
} as const;

/** An admin event name (a key of {@link ADMIN_EVENTS}). */
export type AdminEvent = keyof typeof ADMIN_EVENTS;

/** The pseudo-interceptor an admin refusal's abort reason names. */
export const ADMIN_API_NAME = 'admin-api';

/**
 * Most refused admin attempts recorded a minute by one {@link createAdminAuditor} (one
 * process). Past it they are counted and logged, not recorded; changes made are always
 * recorded.
 */
export const ADMIN_REFUSALS_PER_MINUTE = 60;

/** How often a run of dropped or unrecorded admin records is logged (once, then at most this often). */
export const ADMIN_LOG_INTERVAL_MS = 60_000;

/**
 * Who made an admin change: a principal as records carry it. A principal with `claims` (a
 * JWT's) fits too; the claims are never recorded.
 */
export type AdminOperator = Pick<AuditPrincipal, 'type' | 'id'>;

/** One change made through an admin API, or one attempt at it refused for its credentials. */
export interface AdminChange {
  event: AdminEvent;
  /** The route, e.g. `DELETE /admin/services/{id}`, `POST /policy/pins/{tool}/approve`. */
  method: string;
  /** What was acted on (see {@link ADMIN_EVENTS}); absent when unknown. */
  target?: string | undefined;
  /** Who; absent when refused. */
  operator?: AdminOperator | undefined;
  outcome: 'done' | 'refused';
  /** Why it was refused. */
  reason?: string | undefined;
  durationMs: number;
}

/**
 * The `admin` record of one change (or refused attempt): event and method as given, target
 * the thing acted on, principal the operator (type and id only); a change made is `allowed` /
 * `success`, a refusal `denied` / `validation_failed` with the refusal as its abort reason
 * (interceptor {@link ADMIN_API_NAME}).
 */
export function createAdminRecord(change: AdminChange): AuditRecord {
  const done = change.outcome === 'done';
  const input: AuditRecordInput = {
    kind: 'admin',
    event: change.event,
    phase: 'request',
    method: change.method,
    decision: done ? 'allowed' : 'denied',
    status: done ? 'success' : 'validation_failed',
    durationMs: change.durationMs,
    abortReasons:
      change.reason === undefined
        ? []
        : [
            {
              interceptor: ADMIN_API_NAME,
              reason: change.reason,
              type: 'validation',
              phase: 'request',
            },
          ],
  };
  if (change.target !== undefined) input.target = change.target;
  const { operator } = change;
  if (operator)
    input.principal =
      operator.id === undefined
        ? { type: operator.type }
        : { type: operator.type, id: operator.id };
  return createAuditRecord(input);
}

/** Where an auditor puts records: an `AuditProducer` (its `enqueue` returns at once). */
export interface AdminRecordSink {
  enqueue(record: AuditRecord): void;
}

/** Options for {@link createAdminAuditor}. */
export interface AdminAuditorOptions {
  /** Where unrecorded refusals and dropped records are said (warn). Default: nowhere. */
  logger?: Pick<AuditLogger, 'warn'> | undefined;
  /** Most refusals recorded a minute. Default {@link ADMIN_REFUSALS_PER_MINUTE}. */
  refusalsPerMinute?: number;
  /** The clock, in ms. Default `performance.now`. */
  now?: () => number;
}

/** Records admin changes; `record` never throws and never waits. */
export interface AdminAuditor {
  record(change: AdminChange): void;
}

/**
 * An auditor that enqueues one {@link createAdminRecord} per change made and per refusal, up
 * to `refusalsPerMinute` refusals a minute (a fixed window from the first one). Past the bound
 * a refusal is counted, and said on `logger` the first time in each window with the count
 * since the start. A record that cannot be built or enqueued is dropped and said the same way,
 * at most once per {@link ADMIN_LOG_INTERVAL_MS}: auditing never breaks the request, and a gap
 * in the trail always leaves a trace.
 */
export function createAdminAuditor(
  sink: AdminRecordSink,
  options: AdminAuditorOptions = {},
): AdminAuditor {
  const {
    logger,
    refusalsPerMinute = ADMIN_REFUSALS_PER_MINUTE,
    now = () => performance.now(),
  } = options;
  let windowStart = Number.NEGATIVE_INFINITY;
  let refusals = 0;
  let unrecorded = 0;
  let dropped = 0;
  let droppedLoggedAt = Number.NEGATIVE_INFINITY;
  const warn = (message: string, fields: Record<string, unknown>) => {
    try {
      logger?.warn(message, fields);
    } catch {
      // A broken logger must not turn into a failed admin request.
    }
  };
  return {
    record(change) {
      if (change.outcome === 'refused') {
        const at = now();
        if (at - windowStart >= 60_000) {
          windowStart = at;
          refusals = 0;
        }
        if (++refusals > refusalsPerMinute) {
          unrecorded++;
          if (refusals === refusalsPerMinute + 1)
            warn('refused admin API attempts beyond the bound are not audited', {
              unrecorded,
              perMinute: refusalsPerMinute,
            });
          return;
        }
      }
      try {
        sink.enqueue(createAdminRecord(change));
      } catch (error) {
        dropped++;
        const at = now();
        if (at - droppedLoggedAt < ADMIN_LOG_INTERVAL_MS) return;
        droppedLoggedAt = at;
        // The error's kind and its first words, never the change (a caller-chosen target).
        const reason =
          error instanceof Error ? `${error.name}: ${error.message.slice(0, 200)}` : 'unknown';
        warn('audit record dropped: it could not be built or queued', { dropped, reason });
      }
    },
  };
}
