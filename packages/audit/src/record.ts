/**
 * The audit record: one schema for every producer (the orchestrator writes one `chain` record
 * per chain execution, the audit interceptor one `invocation` record per invocation), the
 * queue it travels on, and a cheap constructor that stamps id and time.
 *
 * Producers do not parse records on the request path; the worker parses every job with
 * {@link parseAuditRecord} and treats a failure as unrecoverable.
 */
import { randomFillSync } from 'node:crypto';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import { monotonicFactory } from 'ulid';
import { z } from 'zod';

/** The BullMQ queue every audit producer writes to and the worker reads from. */
export const AUDIT_QUEUE = 'fleet-audit';

/** The BullMQ job name of an audit record. */
export const AUDIT_JOB_NAME = 'audit';

/**
 * The BullMQ job name of a batch of audit records (`{records: AuditRecord[]}`), sent by a
 * producer with `batchJobs: true`. The worker reads both shapes.
 */
export const AUDIT_BATCH_JOB_NAME = 'audit-batch';

/** The data of an {@link AUDIT_BATCH_JOB_NAME} job. */
export interface AuditRecordBatch {
  records: AuditRecord[];
}

/** Longest `payloadPreview` stored: the worker cuts a scrubbed preview to this. */
export const PAYLOAD_PREVIEW_MAX_LENGTH = 4096;

/**
 * How far past {@link PAYLOAD_PREVIEW_MAX_LENGTH} a queued preview may run. Cutting before
 * scrubbing would leave a value cut at the boundary (`... bob@exam`) unrecognisable, so
 * {@link createAuditRecord} keeps this much more and the worker cuts after scrubbing: a value
 * up to this long that straddles the stored length is scrubbed whole (an email address is at
 * most 254 characters; cards, phones, IBANs far fewer).
 */
export const PAYLOAD_PREVIEW_SCRUB_MARGIN = 256;

/** Who wrote the record: the orchestrator's chain, or the audit interceptor's invocation. */
export const AuditKindSchema = z.enum(['chain', 'invocation']);

/** What happened to the governed message. */
export const AuditDecisionSchema = z.enum(['allowed', 'denied', 'error']);

/**
 * How the chain ended. The first four are the chain engine's own results;
 * `invocation_failed` is an interceptor that crashed or answered garbage without `failOpen`,
 * `backend_error` a backend that failed or could not be reached, `internal_error` the
 * gateway's own fault.
 */
export const AuditStatusSchema = z.enum([
  'success',
  'validation_failed',
  'mutation_failed',
  'invocation_failed',
  'timeout',
  'backend_error',
  'internal_error',
]);

/** Which side of the governed exchange the record describes. */
export const AuditPhaseSchema = z.enum(['request', 'response']);

/** Value of one selected principal claim: a scalar or a list of scalars (e.g. `roles`). */
export const ClaimValueSchema = z.union([
  z.string(),
  z.number(),
  z.boolean(),
  z.null(),
  z.array(z.union([z.string(), z.number(), z.boolean()])),
]);

/** The caller, with the claims selected for auditing (never the whole token). */
export const AuditPrincipalSchema = z.object({
  type: z.enum(['user', 'service', 'anonymous']),
  id: z.string().min(1).optional(),
  claims: z.record(z.string(), ClaimValueSchema).optional(),
});

/**
 * One finding of a validator. Only where and what: the offending value is never part of
 * an audit record (unknown keys such as `value` are stripped when parsed).
 */
export const AuditMessageSchema = z.object({
  path: z.string().optional(),
  severity: z.enum(['info', 'warn', 'error']),
  message: z.string(),
});

/** One interceptor invocation within the audited exchange. */
export const AuditInterceptorSchema = z.object({
  name: z.string().min(1),
  /** The registry id of the service that hosts it. */
  service: z.string().min(1).optional(),
  type: z.enum(['validation', 'mutation']),
  mode: z.enum(['active', 'audit']),
  /** The chain engine's outcome kind, e.g. `allowed`, `denied`, `modified`, `failed`, `timeout`. */
  outcome: z.string().min(1),
  durationMs: z.number().nonnegative(),
  messages: z.array(AuditMessageSchema).optional(),
});

/** Why the chain stopped: one entry per blocking interceptor. */
export const AuditAbortReasonSchema = z.object({
  interceptor: z.string().min(1),
  reason: z.string(),
  type: z.enum(['validation', 'mutation', 'invocation', 'timeout']),
  phase: AuditPhaseSchema,
});

/** A W3C trace id: 32 lowercase hex digits, not all zero. */
export const TraceIdSchema = z
  .string()
  .regex(/^[0-9a-f]{32}$/, { message: 'must be 32 lowercase hex digits' })
  .refine((id) => !/^0+$/.test(id), { message: 'must not be all zeros' });

/** A W3C span id: 16 lowercase hex digits, not all zero. */
export const SpanIdSchema = z
  .string()
  .regex(/^[0-9a-f]{16}$/, { message: 'must be 16 lowercase hex digits' })
  .refine((id) => !/^0+$/.test(id), { message: 'must not be all zeros' });

/** The audit record, as queued, stored and served by the audit API. */
export const AuditRecordSchema = z.object({
  /** ULID; the queue's job id and the store's key, so duplicates collapse. */
  id: z.ulid(),
  /** When the record was made (ISO 8601). */
  timestamp: z.iso.datetime({ offset: true }),
  kind: AuditKindSchema,
  traceId: TraceIdSchema.optional(),
  spanId: SpanIdSchema.optional(),
  sessionId: z.string().min(1).optional(),
  principal: AuditPrincipalSchema.optional(),
  /** The governed event, e.g. `tools/call`. */
  event: z.string().min(1),
  phase: AuditPhaseSchema,
  /** The governed JSON-RPC method. */
  method: z.string().min(1),
  /** Tool or prompt name, or resource URI. */
  target: z.string().min(1).optional(),
  /** The backend id the message was routed to. */
  backend: z.string().min(1).optional(),
  decision: AuditDecisionSchema,
  status: AuditStatusSchema,
  interceptors: z.array(AuditInterceptorSchema),
  abortReasons: z.array(AuditAbortReasonSchema),
  durationMs: z.number().nonnegative(),
  /**
   * A short rendering of the payload; the worker scrubs PII, then cuts it to
   * {@link PAYLOAD_PREVIEW_MAX_LENGTH} before storing it.
   */
  payloadPreview: z
    .string()
    .max(PAYLOAD_PREVIEW_MAX_LENGTH + PAYLOAD_PREVIEW_SCRUB_MARGIN)
    .optional(),
});

/** An audit record. */
export type AuditRecord = z.infer<typeof AuditRecordSchema>;
/** Who wrote a record. */
export type AuditKind = z.infer<typeof AuditKindSchema>;
/** What happened to the governed message. */
export type AuditDecision = z.infer<typeof AuditDecisionSchema>;
/** How the chain ended. */
export type AuditStatus = z.infer<typeof AuditStatusSchema>;
/** The audited caller. */
export type AuditPrincipal = z.infer<typeof AuditPrincipalSchema>;
/** One interceptor invocation within a record. */
export type AuditInterceptor = z.infer<typeof AuditInterceptorSchema>;
/** One validator finding, without the offending value. */
export type AuditMessage = z.infer<typeof AuditMessageSchema>;
/** One reason a chain stopped. */
export type AuditAbortReason = z.infer<typeof AuditAbortReasonSchema>;

/**
 * What {@link createAuditRecord} needs: a record without `id` and `timestamp` (given ones are
 * kept) and with `interceptors` and `abortReasons` defaulting to empty lists.
 */
export type AuditRecordInput = Omit<
  AuditRecord,
  'id' | 'timestamp' | 'interceptors' | 'abortReasons'
> &
  Partial<Pick<AuditRecord, 'id' | 'timestamp' | 'interceptors' | 'abortReasons'>>;

// ulid's default PRNG asks crypto for one byte per character: about 28 µs for every id made
// in a new millisecond (measured), which is every id at request rates below 1/ms. The same
// source drawn from a pooled buffer costs nanoseconds.
const randomPool = new Uint8Array(4096);
let randomIndex = randomPool.length;
function pooledRandom(): number {
  if (randomIndex >= randomPool.length) {
    randomFillSync(randomPool);
    randomIndex = 0;
  }
  return (randomPool[randomIndex++] ?? 0) / 256;
}

const nextId = monotonicFactory(pooledRandom);

let lastMs = -1;
let lastIso = '';
function isoNow(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastIso = new Date(now).toISOString();
  }
  return lastIso;
}

/**
 * Make a record: a monotonic ULID (ids made in one process sort in creation order), the
 * current time, empty lists where none were given, the active span's trace and span ids
 * when the input names none, and `payloadPreview` cut to {@link PAYLOAD_PREVIEW_MAX_LENGTH} +
 * {@link PAYLOAD_PREVIEW_SCRUB_MARGIN} (the worker scrubs, then cuts the rest). Cheap and
 * unvalidated: the worker parses.
 */
export function createAuditRecord(input: AuditRecordInput): AuditRecord {
  // Object.assign, not `{...input, id}`: on Node 20 a spread followed by more keys takes the
  // slow path (about 1 µs per extra key, measured), assign about 0.1 µs in all.
  const record: AuditRecord = Object.assign(
    { id: '', timestamp: '', interceptors: [], abortReasons: [] },
    input,
  );
  record.id ||= nextId();
  record.timestamp ||= isoNow();
  record.interceptors ??= [];
  record.abortReasons ??= [];
  if (record.traceId === undefined) {
    const context = trace.getActiveSpan()?.spanContext();
    if (context && isSpanContextValid(context)) {
      record.traceId = context.traceId;
      record.spanId ??= context.spanId;
    }
  }
  const previewWindow = PAYLOAD_PREVIEW_MAX_LENGTH + PAYLOAD_PREVIEW_SCRUB_MARGIN;
  if (record.payloadPreview !== undefined && record.payloadPreview.length > previewWindow)
    record.payloadPreview = record.payloadPreview.slice(0, previewWindow);
  return record;
}

/** One problem in a record: the dotted path of the field, and what is wrong with it. */
export interface AuditRecordIssue {
  path: string;
  message: string;
}

/** A value is not a valid {@link AuditRecord}; `issues` name every offending field. */
export class AuditRecordError extends Error {
  override readonly name = 'AuditRecordError';
  readonly issues: readonly AuditRecordIssue[];

  constructor(issues: readonly AuditRecordIssue[]) {
    super(
      `invalid audit record: ${issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ')}`,
    );
    this.issues = issues;
  }
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out;
}

/**
 * Parse an audit record (the worker's check of every job). Unknown keys are stripped.
 * @throws AuditRecordError naming every offending field.
 */
export function parseAuditRecord(input: unknown): AuditRecord {
  const result = AuditRecordSchema.safeParse(input);
  if (result.success) return result.data;
  throw new AuditRecordError(
    result.error.issues.map((issue) => ({ path: formatPath(issue.path), message: issue.message })),
  );
}
