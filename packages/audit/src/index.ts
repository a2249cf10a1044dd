/**
 * @fleet/audit: the audit record schema, and the `admin` records of admin API changes with
 * their refusal bound; the producer that queues records on BullMQ without ever making a
 * request wait (bounded buffer, spill journal, ordered replay); the worker that
 * validates, scrubs and stores them in batches, idempotently; the store (PostgreSQL, or
 * embedded PGlite) with its migrations, queries and statistics; retention; and the
 * pipeline's metrics (observable instruments on an OpenTelemetry meter).
 */

export type {
  AdminAuditor,
  AdminAuditorOptions,
  AdminChange,
  AdminEvent,
  AdminOperator,
  AdminRecordSink,
} from './admin-record.ts';
export {
  ADMIN_API_NAME,
  ADMIN_EVENTS,
  ADMIN_LOG_INTERVAL_MS,
  ADMIN_REFUSALS_PER_MINUTE,
  createAdminAuditor,
  createAdminRecord,
} from './admin-record.ts';
export { AUDIT_RECORD_LIMITS, cutText, TRUNCATION_MARKER } from './bounds.ts';
export { AuditJournalInUseError, assertJournalFree } from './journal.ts';
export type { AuditLogger, LogFields, ObjectFirstLogger } from './logger.ts';
export { auditLoggerFrom, createStderrLogger } from './logger.ts';
export type { AuditMetricSources, AuditMetricsMeter, AuditMetricsOptions } from './metrics.ts';
export {
  DEFAULT_QUEUE_COUNTS_MAX_AGE_MS,
  DEFAULT_QUEUE_COUNTS_TIMEOUT_MS,
  registerAuditMetrics,
} from './metrics.ts';
export type { Migration } from './migrations.ts';
export { MIGRATIONS } from './migrations.ts';
export type { AuditProducer, AuditProducerMetrics, AuditProducerOptions } from './producer.ts';
export {
  AUDIT_JOB_OPTIONS,
  createAuditProducer,
  DEFAULT_JOURNAL_PATH,
  DEFAULT_MAX_BUFFERED,
  DEFAULT_REDIS_URL,
} from './producer.ts';
export type {
  AuditCursor,
  AuditPage,
  AuditPageRequest,
  AuditQueryIssue,
  AuditRecordFilters,
  QueryParameters,
} from './query.ts';
export {
  AuditQueryError,
  DEFAULT_QUERY_LIMIT,
  DEFAULT_STATS_WINDOW_MS,
  decodeCursor,
  encodeCursor,
  MAX_QUERY_LIMIT,
  normaliseTraceId,
  parseRecordQuery,
  parseStatsQuery,
} from './query.ts';
export type {
  AuditAbortReason,
  AuditDecision,
  AuditInterceptor,
  AuditKind,
  AuditMessage,
  AuditPrincipal,
  AuditRecord,
  AuditRecordBatch,
  AuditRecordInput,
  AuditRecordIssue,
  AuditStatus,
} from './record.ts';
export {
  AUDIT_BATCH_JOB_NAME,
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
  AuditTimestampSchema,
  ClaimValueSchema,
  createAuditRecord,
  PAYLOAD_PREVIEW_MAX_LENGTH,
  PAYLOAD_PREVIEW_SCRUB_MARGIN,
  parseAuditRecord,
  SpanIdSchema,
  TraceIdSchema,
} from './record.ts';
export type { AuditRetention, AuditRetentionOptions, RetentionResult } from './retention.ts';
export {
  DEFAULT_RETENTION_DAYS,
  DEFAULT_RETENTION_EVERY_MS,
  RETENTION_QUEUE,
  RETENTION_SCHEDULER_ID,
  runRetention,
  startAuditRetention,
} from './retention.ts';
export type { PayloadScrubber } from './scrub.ts';
export { defaultScrubber, SCRUB_FAILED, scrubRecord } from './scrub.ts';
export type {
  AuditStats,
  AuditStore,
  AuditStoreOptions,
  AuditTrace,
  InterceptorStats,
  LatencySummary,
} from './store.ts';
export {
  AuditQueryTimeoutError,
  AuditStoreError,
  assertAuditStoreFree,
  DEFAULT_PGLITE_DIR,
  DEFAULT_READ_TIMEOUT_MS,
  MAX_PAGE_CHARS,
  MAX_TRACE_CHARS,
  MAX_TRACE_RECORDS,
  openAuditStore,
  STATS_TOP_EVENTS,
  STATS_TOP_TOOLS,
} from './store.ts';
export {
  EARLIEST_TIME_BOUND,
  isTimeBoundInRange,
  LATEST_TIME_BOUND,
  MAX_UTC_OFFSET_MINUTES,
  parseDuration,
  parseTimeBound,
  timestampIssue,
} from './time.ts';
export type {
  AuditQueueCounts,
  AuditWorker,
  AuditWorkerHooks,
  AuditWorkerMetrics,
  AuditWorkerOptions,
} from './worker.ts';
export { createAuditWorker } from './worker.ts';
