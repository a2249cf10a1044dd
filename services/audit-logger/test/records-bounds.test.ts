/**
 * GET /api/audit/records answers a bounded page however large the records are: a page stops
 * before MAX_PAGE_CHARS characters of records (500 records of 37 KB made one answer of 19 MB),
 * and its nextCursor carries on from the last record it holds, so walking the cursor sees
 * every record exactly once, in order. Real PostgreSQL, the service over HTTP.
 */
import { type AuditRecord, MAX_PAGE_CHARS } from '@fleet/audit';
import { describe, expect, it } from 'vitest';
import { createAuditLoggerApp } from '../src/app.ts';
import { defer, largeRecordAt, openSchemaStore, serve, traceId } from './helpers.ts';

/** Newest first, ties by id descending: the order of a listing. */
const newestFirst = (records: readonly AuditRecord[]): AuditRecord[] =>
  [...records].sort(
    (a, b) => Date.parse(b.timestamp) - Date.parse(a.timestamp) || (a.id < b.id ? 1 : -1),
  );

describe('records pages', () => {
  it('stop before MAX_PAGE_CHARS characters of records, and the cursor walks every record once', async () => {
    const { store, drop } = await openSchemaStore();
    defer(drop);
    const url = await serve(
      createAuditLoggerApp({ sink: { enqueue: () => undefined }, store }).listener,
    );
    const trace = traceId();
    // 300 records of 37 KB (11 MB), three to an instant: some cuts fall inside a tie.
    const records = Array.from({ length: 300 }, (_, i) =>
      largeRecordAt(Math.floor(i / 3) * 1000, { traceId: trace }),
    );
    await store.insertBatch(records);

    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: string | undefined;
    do {
      const res = await fetch(
        `${url}/api/audit/records?traceId=${trace}&limit=500${cursor ? `&cursor=${cursor}` : ''}`,
      );
      const text = await res.text();
      expect(res.status).toBe(200);
      const page = JSON.parse(text) as { records: AuditRecord[]; nextCursor?: string };
      const chars = page.records.reduce((sum, r) => sum + JSON.stringify(r).length, 0);
      expect(chars).toBeLessThanOrEqual(MAX_PAGE_CHARS);
      expect(text.length).toBeLessThan(MAX_PAGE_CHARS + 10_000);
      sizes.push(page.records.length);
      seen.push(...page.records.map((r) => r.id));
      cursor = page.nextCursor;
    } while (cursor !== undefined && sizes.length < 100);

    // Cut by characters, not by the limit: ~113 records of 37 KB a page.
    expect(sizes.length).toBeGreaterThanOrEqual(3);
    expect(sizes[0]).toBeGreaterThan(50);
    expect(sizes[0]).toBeLessThan(300);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(newestFirst(records).map((r) => r.id));
  }, 60_000);
});
