/**
 * Helpers for tests of the audit pipeline and of services that use it
 * (`@fleet/audit/testing`): valid records at fixed instants, random W3C ids, polling.
 */
import { randomBytes } from 'node:crypto';
import { type AuditRecord, createAuditRecord, parseAuditRecord } from './record.ts';

/** Base instant of {@link recordAt}: 2025-06-01T12:00:00Z. */
export const T0 = Date.parse('2025-06-01T12:00:00Z');

/** A valid `chain` record stamped `offsetMs` after {@link T0}, with `overrides` applied. */
export function recordAt(offsetMs: number, overrides: Partial<AuditRecord> = {}): AuditRecord {
  return createAuditRecord({
    kind: 'chain',
    event: 'tools/call',
    phase: 'request',
    method: 'tools/call',
    target: 'echo',
    decision: 'allowed',
    status: 'success',
    durationMs: 1,
    timestamp: new Date(T0 + offsetMs).toISOString(),
    ...overrides,
  });
}

// 16 claims of 16 values of 121-122 characters: within every claim bound.
const LARGE_CLAIMS = Object.fromEntries(
  Array.from({ length: 16 }, (_, i) => [
    `c${i}`,
    Array.from({ length: 16 }, (_, j) => `${'v'.repeat(120)}${j}`),
  ]),
);

/**
 * A record as {@link recordAt} makes it whose principal (id and claims), session id and
 * payload preview are at their bounds: about 37,000 characters as JSON, where real records
 * take 1 to 2 KB. The trace id is the caller's, so anyone can gather such records in one
 * trace: for tests of the bounds of the audit API's answers.
 */
export function largeRecordAt(offsetMs: number, overrides: Partial<AuditRecord> = {}): AuditRecord {
  return parseAuditRecord({
    ...recordAt(offsetMs, { sessionId: 's'.repeat(512), ...overrides }),
    principal: { type: 'user', id: 'u'.repeat(512), claims: LARGE_CLAIMS },
    payloadPreview: 'p'.repeat(4000),
  });
}

/** A random W3C trace id. */
export function traceId(): string {
  return randomBytes(16).toString('hex');
}

/** A random W3C span id. */
export function spanId(): string {
  return randomBytes(8).toString('hex');
}

/** Poll until `predicate` holds, or fail after `timeoutMs` naming `what`. */
export async function waitFor(
  predicate: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((tick) => setTimeout(tick, 20));
  }
}

/**
 * The value of one series in Prometheus text (a service's `/metrics`): the first sample of
 * `metric` whose labels include `labels`, or `undefined` when there is none.
 */
export function metricSample(
  text: string,
  metric: string,
  labels: Readonly<Record<string, string>> = {},
): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== metric) continue;
    const found = new Map(
      [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([key, value]) => found.get(key) === value))
      return Number(match[3]);
  }
  return undefined;
}
