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
import {
  cutText,
  droppedMarker,
  AUDIT_RECORD_LIMITS as LIMITS,
  truncateList,
  truncateText,
} from './bounds.ts';
import { timestampIssue } from './time.ts';

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

/**
 * Who wrote the record: the orchestrator's chain, the audit interceptor's invocation, or an
 * admin action (a change, or a refused attempt at one; principal the operator; the events are
 * `ADMIN_EVENTS` of admin-record.ts): the orchestrator's admin API changing the interceptor
 * registry, event `admin/services/register` | `admin/services/unregister` |
 * `admin/services/refresh` with target the service id, or the policy-validator's tool pins:
 * approving a drifted tool's new definition, event `admin/pins/approve`, or forgetting a
 * tool's pin, event `admin/pins/forget`, with target the tool name.
 */
export const AuditKindSchema = z.enum(['chain', 'invocation', 'admin']);

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

/** A non-empty text cut to `max` characters with a marker (never refused for its length). */
const boundedText = (max: number) =>
  z
    .string()
    .min(1)
    .transform((text) => truncateText(text, max));

/** A text, possibly empty, cut to `max` characters with a marker. */
const boundedFreeText = (max: number) => z.string().transform((text) => truncateText(text, max));

type ClaimValue = z.infer<typeof ClaimValueSchema>;
type Claims = Record<string, ClaimValue>;

function boundClaimValue(value: ClaimValue): ClaimValue {
  if (typeof value === 'string') return truncateText(value, LIMITS.claimValueLength);
  if (!Array.isArray(value)) return value;
  return truncateList(
    value.map((item) =>
      typeof item === 'string' ? truncateText(item, LIMITS.claimValueLength) : item,
    ),
    LIMITS.claimItems,
    (dropped) => droppedMarker(dropped, 'items'),
  );
}

// Claims past the count are dropped, and one marker claim says how many.
function boundClaims(claims: Claims): Claims {
  const entries = Object.entries(claims);
  const kept = truncateList(entries, LIMITS.claims, (dropped): [string, ClaimValue] => [
    '…',
    droppedMarker(dropped, 'claims'),
  ]);
  const bounded: Claims = {};
  for (const [name, value] of kept)
    bounded[truncateText(name, LIMITS.claimNameLength)] = boundClaimValue(value);
  return bounded;
}

/**
 * The caller, with the claims selected for auditing (never the whole token): at most
 * {@link AUDIT_RECORD_LIMITS} `claims` claims, each list at most `claimItems` items, each text
 * at most `claimValueLength` characters; more is cut with a marker.
 */
export const AuditPrincipalSchema = z.object({
  type: z.enum(['user', 'service', 'anonymous']),
  id: boundedText(LIMITS.idLength).optional(),
  claims: z.record(z.string(), ClaimValueSchema).transform(boundClaims).optional(),
});

/**
 * One finding of a validator. Only where and what: the offending value is never part of
 * an audit record (unknown keys such as `value` are stripped when parsed).
 */
export const AuditMessageSchema = z.object({
  path: boundedFreeText(LIMITS.pathLength).optional(),
  severity: z.enum(['info', 'warn', 'error']),
  message: boundedFreeText(LIMITS.messageLength),
});

/** One interceptor invocation within the audited exchange. */
export const AuditInterceptorSchema = z.object({
  name: boundedText(LIMITS.nameLength),
  /** The registry id of the service that hosts it. */
  service: boundedText(LIMITS.nameLength).optional(),
  type: z.enum(['validation', 'mutation']),
  mode: z.enum(['active', 'audit']),
  /**
   * The chain engine's outcome kind (`@fleet/core`'s `InvocationOutcomeKind`): `allowed`
   * `warned` `denied` `modified` `unchanged`, or a failure: `failed`, `timeout`, `rejected`
   * (the interceptor refused the caller's params with -32602; it blocked the chain as a failure
   * does unless failOpen). Free text rather than an enum: a record written by a newer producer
   * with an outcome this worker does not know must still be stored, never lost as malformed.
   */
  outcome: boundedText(LIMITS.nameLength),
  durationMs: z.number().nonnegative(),
  messages: z.array(AuditMessageSchema).optional(),
});

/** Why the chain stopped: one entry per blocking interceptor. */
export const AuditAbortReasonSchema = z.object({
  interceptor: boundedText(LIMITS.nameLength),
  reason: boundedFreeText(LIMITS.messageLength),
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

/**
 * When a record was made: an ISO 8601 date-time with `Z` or an offset that PostgreSQL's
 * `timestamptz` holds and the audit queries reach: year 0001..9999 (as the query API's
 * `since`/`until`), a UTC offset within ±15:59. PostgreSQL refuses year 0 (SQLSTATE 22008)
 * and larger offsets (22009), which would fail the record at insert instead of at parse.
 */
export const AuditTimestampSchema = z.iso
  .datetime({ offset: true, abort: true })
  .superRefine((text, ctx) => {
    const issue = timestampIssue(text);
    if (issue !== undefined) ctx.addIssue({ code: 'custom', message: issue });
  });

type AuditInterceptorEntry = z.infer<typeof AuditInterceptorSchema>;

// Lists past their bound keep their head and end in one marker entry saying how many went.
function boundLists<
  T extends {
    interceptors: AuditInterceptorEntry[];
    abortReasons: Array<z.infer<typeof AuditAbortReasonSchema>>;
    phase: z.infer<typeof AuditPhaseSchema>;
  },
>(record: T): T {
  const interceptors = truncateList(record.interceptors, LIMITS.interceptors, (dropped) => ({
    name: droppedMarker(dropped, 'interceptors'),
    type: 'validation' as const,
    mode: 'audit' as const,
    outcome: 'truncated',
    durationMs: 0,
  }));
  let budget: number = LIMITS.messages;
  for (const [index, entry] of interceptors.entries()) {
    if (entry.messages === undefined) continue;
    const max = Math.max(1, budget);
    const messages = truncateList(entry.messages, max, (dropped) => ({
      severity: 'info' as const,
      message: droppedMarker(dropped, 'messages'),
    }));
    budget -= messages.length;
    interceptors[index] = { ...entry, messages };
  }
  const abortReasons = truncateList(record.abortReasons, LIMITS.abortReasons, (dropped) => ({
    interceptor: '…',
    reason: droppedMarker(dropped, 'abort reasons'),
    type: 'validation' as const,
    phase: record.phase,
  }));
  return { ...record, interceptors, abortReasons };
}

/**
 * The audit record, as queued, stored and served by the audit API. Free-form fields are
 * bounded ({@link AUDIT_RECORD_LIMITS}): a longer text or list is cut with a marker when parsed,
 * never refused, so no record is lost for its size.
 */
export const AuditRecordSchema = z
  .object({
    /** ULID; the queue's job id and the store's key, so duplicates collapse. */
    id: z.ulid(),
    /** When the record was made (ISO 8601, year 0001..9999, offset within ±15:59). */
    timestamp: AuditTimestampSchema,
    kind: AuditKindSchema,
    traceId: TraceIdSchema.optional(),
    spanId: SpanIdSchema.optional(),
    sessionId: boundedText(LIMITS.idLength).optional(),
    principal: AuditPrincipalSchema.optional(),
    /** The governed event, e.g. `tools/call`. */
    event: boundedText(LIMITS.eventLength),
    phase: AuditPhaseSchema,
    /** The governed JSON-RPC method. */
    method: boundedText(LIMITS.eventLength),
    /** Tool or prompt name, or resource URI. */
    target: boundedText(LIMITS.idLength).optional(),
    /** The backend id the message was routed to. */
    backend: boundedText(LIMITS.idLength).optional(),
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
  })
  .transform(boundLists);

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
 * {@link PAYLOAD_PREVIEW_SCRUB_MARGIN} (the worker scrubs, then cuts the rest; neither cut
 * splits a surrogate pair). Cheap: the worker parses every record; only a `timestamp` the
 * caller gives is checked here, so a time the store cannot hold fails at the call that chose it.
 * @throws AuditRecordError naming `timestamp` when a given one is not an
 * {@link AuditTimestampSchema} date-time (year 0001..9999, offset within ±15:59).
 */
export function createAuditRecord(input: AuditRecordInput): AuditRecord {
  // Object.assign, not `{...input, id}`: on Node 20 a spread followed by more keys takes the
  // slow path (about 1 µs per extra key, measured), assign about 0.1 µs in all.
  const record: AuditRecord = Object.assign(
    { id: '', timestamp: '', interceptors: [], abortReasons: [] },
    input,
  );
  record.id ||= nextId();
  if (!record.timestamp) record.timestamp = isoNow();
  else {
    const checked = AuditTimestampSchema.safeParse(record.timestamp);
    if (!checked.success) throw recordError(checked.error.issues, ['timestamp']);
  }
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
    record.payloadPreview = cutText(record.payloadPreview, previewWindow);
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

/** The error for zod's `issues` of the value found at `at` within a record. */
function recordError(
  issues: readonly z.core.$ZodIssue[],
  at: readonly PropertyKey[] = [],
): AuditRecordError {
  return new AuditRecordError(
    issues.map((issue) => ({ path: formatPath([...at, ...issue.path]), message: issue.message })),
  );
}

/**
 * Parse an audit record (the worker's check of every job). Unknown keys are stripped.
 * @throws AuditRecordError naming every offending field.
 */
export function parseAuditRecord(input: unknown): AuditRecord {
  const result = AuditRecordSchema.safeParse(input);
  if (result.success) return result.data;
  throw recordError(result.error.issues);
}
