/**
 * GET /api/audit/traces/{id} answers a bounded body however many records the trace has: the
 * trace id is the caller's (a client's traceparent, an invoker's context.traceId), so one
 * trace can gather thousands of records each as large as the record bounds allow. Real
 * PostgreSQL, the service over HTTP.
 */
import { MAX_TRACE_CHARS } from '@fleet/audit';
import { describe, expect, it } from 'vitest';
import { createAuditLoggerApp } from '../src/app.ts';
import { defer, largeRecordAt, openSchemaStore, recordAt, serve, traceId } from './helpers.ts';

async function serveStore() {
  const { store, drop } = await openSchemaStore();
  defer(drop);
  const url = await serve(
    createAuditLoggerApp({ sink: { enqueue: () => undefined }, store }).listener,
  );
  const get = async (trace: string) => {
    const res = await fetch(`${url}/api/audit/traces/${trace}`);
    const text = await res.text();
    return {
      status: res.status,
      chars: text.length,
      body: JSON.parse(text) as Record<string, unknown> & { records: Array<{ id: string }> },
    };
  };
  return { store, get };
}

describe('trace answers', () => {
  it('stop at 16 Mi characters of records and say they were cut (5,000 x 37 KB was 187 MB)', async () => {
    const { store, get } = await serveStore();
    const trace = traceId();
    // Claims, ids and a preview each within its bound: about 37,000 characters as JSON.
    for (let b = 0; b < 2; b++)
      await store.insertBatch(
        Array.from({ length: 500 }, (_, i) => largeRecordAt(b * 500 + i, { traceId: trace })),
      );
    const { status, chars, body } = await get(trace);
    expect(status).toBe(200);
    expect(body.truncated).toBe(true);
    expect(chars).toBeLessThan(MAX_TRACE_CHARS + 100_000);
    expect(body.records.length).toBeGreaterThan(300);
    expect(body.records.length).toBeLessThan(1000);
  }, 60_000);

  it('hold every record of a trace of small ones across pages, in order, uncut', async () => {
    const { store, get } = await serveStore();
    const trace = traceId();
    const records = Array.from({ length: 600 }, (_, i) => recordAt(i, { traceId: trace }));
    await store.insertBatch(records);
    const { body } = await get(trace);
    expect(body.truncated).toBeUndefined();
    expect(body.records.map((r) => r.id)).toEqual(records.map((r) => r.id));
  }, 60_000);
});
