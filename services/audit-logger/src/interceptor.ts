/**
 * The `audit-logger` interceptor: a validator in audit mode with `failOpen`, hooked on every
 * event in both phases. Each invocation becomes one `invocation` audit record (the context
 * the orchestrator sent: principal, trace and span ids, session, event, phase, target) handed
 * to the audit producer, which never waits on Redis; the answer is `valid: true` at once.
 *
 * No payload values are recorded. A short `payloadPreview` is written only when
 * `previewChars` is set; it is scrubbed here, before it is cut (and again by the worker).
 * Every cut here (event, ids, target, claims, preview) is `cutText`'s: it never splits a
 * surrogate pair, whose lone half PostgreSQL's `jsonb` refuses.
 */
import {
  AUDIT_RECORD_LIMITS,
  type AuditPrincipal,
  type AuditRecord,
  type AuditRecordInput,
  ClaimValueSchema,
  createAuditRecord,
  cutText,
  PAYLOAD_PREVIEW_MAX_LENGTH,
  PAYLOAD_PREVIEW_SCRUB_MARGIN,
  type PayloadScrubber,
  SCRUB_FAILED,
  SpanIdSchema,
  TraceIdSchema,
} from '@fleet/audit';
import type { InvocationContext } from '@fleet/core';
import {
  allow,
  defineValidator,
  type HandlerContext,
  type Interceptor,
} from '@fleet/interceptor-kit';
import { createPiiScrubber } from './scrubber.ts';

/** The interceptor's name (stable: configs and tests refer to it). */
export const AUDIT_LOGGER_INTERCEPTOR = 'audit-logger';

/** Principal claims kept in a record unless configured otherwise (never the whole token). */
export const DEFAULT_AUDITED_CLAIMS: readonly string[] = [
  'sub',
  'iss',
  'client_id',
  'azp',
  'scope',
  'roles',
  'groups',
  'tenant',
];

/** Where records go: `AuditProducer.enqueue` returns at once and never throws. */
export interface AuditSink {
  enqueue(record: AuditRecord): void;
}

/** Options for {@link createAuditLoggerInterceptor}. */
export interface AuditLoggerInterceptorOptions {
  sink: AuditSink;
  /**
   * Characters of the JSON payload kept as `payloadPreview` (at most 4096), scrubbed before it
   * is cut. Default 0: none.
   */
  previewChars?: number;
  /** Scrubs the preview before it is cut. Default: the PII engine ({@link createPiiScrubber}). */
  scrub?: PayloadScrubber;
  /** Principal claims to keep. Default {@link DEFAULT_AUDITED_CLAIMS}. */
  claims?: readonly string[];
  /** Told about a record that could not be made or queued; the invocation still answers. */
  onError?: (error: unknown) => void;
}

const MAX_CLAIM_LENGTH = 256;
/** Ids and targets are cut where the record schema bounds them (its marker never needed). */
const MAX_ID_LENGTH = AUDIT_RECORD_LIMITS.idLength;
/**
 * So is the event: hooked on `*`, the interceptor is invoked for any event a caller makes up,
 * and a 1 MiB one would otherwise be queued twice (event and method) in every record.
 */
const MAX_EVENT_LENGTH = AUDIT_RECORD_LIMITS.eventLength;

function selectClaims(
  claims: Record<string, unknown> | undefined,
  keep: readonly string[],
): AuditPrincipal['claims'] {
  if (claims === undefined) return undefined;
  const selected: NonNullable<AuditPrincipal['claims']> = {};
  for (const key of keep) {
    let value = claims[key];
    if (typeof value === 'string') value = cutText(value, MAX_CLAIM_LENGTH);
    const parsed = ClaimValueSchema.safeParse(value);
    if (value !== undefined && parsed.success) selected[key] = parsed.data;
  }
  return Object.keys(selected).length > 0 ? selected : undefined;
}

function shortText(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? cutText(value, MAX_ID_LENGTH) : undefined;
}

/**
 * The governed operation's target: `name` (tools/call, prompts/get) or `uri`
 * (resources/read, resources/subscribe) of a request payload; none for a response.
 */
export function targetOf(payload: unknown): string | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  const { name, uri } = payload as { name?: unknown; uri?: unknown };
  return shortText(name) ?? shortText(uri);
}

let piiScrubber: PayloadScrubber | undefined;
function defaultScrub(text: string): string {
  piiScrubber ??= createPiiScrubber();
  return piiScrubber(text);
}

/**
 * The first `chars` characters of the payload's JSON, scrubbed BEFORE the cut: a value cut
 * at the boundary (`... bob@exam`) is no longer recognisable, so cutting first and scrubbing
 * later (in the worker) would store it. Scrubbing here rather than having the worker cut is
 * possible because the PII engine does no I/O, and the per-service length stays here. Only a
 * window of `chars` + {@link PAYLOAD_PREVIEW_SCRUB_MARGIN} is scrubbed (≈ 1 ms for 4 KB,
 * where a 4 MB payload would take ~1 s): a value that straddles the cut is whole inside the
 * window unless it is longer than the margin, and one cut at the window's end lies entirely
 * past the cut. A replacement such as `[EMAIL_ADDRESS]` may itself be cut, which leaks
 * nothing. A scrubber that throws leaves {@link SCRUB_FAILED}, never the raw text.
 */
function preview(payload: unknown, chars: number, scrub: PayloadScrubber): string | undefined {
  if (chars <= 0 || payload === undefined) return undefined;
  let text: string | undefined;
  try {
    text = JSON.stringify(payload);
  } catch {
    return undefined;
  }
  if (text === undefined) return undefined;
  const length = Math.min(chars, PAYLOAD_PREVIEW_MAX_LENGTH);
  try {
    const scrubbed = scrub(cutText(text, length + PAYLOAD_PREVIEW_SCRUB_MARGIN));
    return typeof scrubbed === 'string' ? cutText(scrubbed, length) : SCRUB_FAILED;
  } catch {
    return SCRUB_FAILED;
  }
}

/**
 * The record of one invocation. Ids the caller sent that are not valid W3C ids are left
 * out (the active span's are used instead), so a record is never refused by the worker for
 * a caller's mistake.
 */
export function invocationRecord(
  payload: unknown,
  ctx: Pick<HandlerContext, 'event' | 'phase' | 'context'>,
  options: Pick<AuditLoggerInterceptorOptions, 'previewChars' | 'claims' | 'scrub'> = {},
): AuditRecord {
  const context: InvocationContext = ctx.context;
  const event = cutText(ctx.event, MAX_EVENT_LENGTH);
  const input: AuditRecordInput = {
    kind: 'invocation',
    event,
    phase: ctx.phase,
    method: event,
    decision: 'allowed',
    status: 'success',
    durationMs: 0,
    interceptors: [
      {
        name: AUDIT_LOGGER_INTERCEPTOR,
        type: 'validation',
        mode: 'audit',
        outcome: 'allowed',
        durationMs: 0,
      },
    ],
  };
  const traceId = TraceIdSchema.safeParse(context.traceId);
  if (traceId.success) {
    input.traceId = traceId.data;
    const spanId = SpanIdSchema.safeParse(context.spanId);
    if (spanId.success) input.spanId = spanId.data;
  }
  const sessionId = shortText(context.sessionId);
  if (sessionId) input.sessionId = sessionId;
  if (context.principal) {
    const principal: AuditPrincipal = { type: context.principal.type };
    const id = shortText(context.principal.id);
    if (id) principal.id = id;
    const claims = selectClaims(context.principal.claims, options.claims ?? DEFAULT_AUDITED_CLAIMS);
    if (claims) principal.claims = claims;
    input.principal = principal;
  }
  const target = ctx.phase === 'request' ? targetOf(payload) : undefined;
  if (target) input.target = target;
  const text = preview(payload, options.previewChars ?? 0, options.scrub ?? defaultScrub);
  if (text !== undefined) input.payloadPreview = text;
  return createAuditRecord(input);
}

/** The `audit-logger` interceptor. */
export function createAuditLoggerInterceptor(options: AuditLoggerInterceptorOptions): Interceptor {
  const { sink, onError } = options;
  return defineValidator({
    name: AUDIT_LOGGER_INTERCEPTOR,
    version: '0.1.0',
    description:
      'Records every invocation (who, what, which trace) in the durable audit trail; never blocks.',
    hooks: [
      { events: ['*'], phase: 'request' },
      { events: ['*'], phase: 'response' },
    ],
    mode: 'audit',
    failOpen: true,
    handler(payload, ctx) {
      try {
        sink.enqueue(invocationRecord(payload, ctx, options));
      } catch (error) {
        // Auditing never fails the invocation; the producer itself never throws.
        try {
          onError?.(error);
        } catch {
          // ignore
        }
      }
      return allow();
    },
  });
}
