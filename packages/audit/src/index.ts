/**
 * @fleet/audit: the audit record schema and the producer that queues records on BullMQ
 * without ever making a request wait (bounded buffer, spill journal, ordered replay).
 * The worker, the PostgreSQL store and the query API are still to come.
 */

export { AuditJournalInUseError } from './journal.ts';
export type { AuditLogger, LogFields } from './logger.ts';
export { createStderrLogger } from './logger.ts';
export type { AuditProducer, AuditProducerMetrics, AuditProducerOptions } from './producer.ts';
export {
  AUDIT_JOB_OPTIONS,
  createAuditProducer,
  DEFAULT_JOURNAL_PATH,
  DEFAULT_REDIS_URL,
} from './producer.ts';
export type {
  AuditAbortReason,
  AuditDecision,
  AuditInterceptor,
  AuditKind,
  AuditMessage,
  AuditPrincipal,
  AuditRecord,
  AuditRecordInput,
  AuditRecordIssue,
  AuditStatus,
} from './record.ts';
export {
  AUDIT_JOB_NAME,
  AUDIT_QUEUE,
  AuditAbortReasonSchema,
  AuditDecisionSchema,
  AuditInterceptorSchema,
  AuditKindSchema,
  AuditMessageSchema,
  AuditPhaseSchema,
  AuditPrincipalSchema,
  AuditRecordError,
  AuditRecordSchema,
  AuditStatusSchema,
  ClaimValueSchema,
  createAuditRecord,
  PAYLOAD_PREVIEW_MAX_LENGTH,
  parseAuditRecord,
  SpanIdSchema,
  TraceIdSchema,
} from './record.ts';
