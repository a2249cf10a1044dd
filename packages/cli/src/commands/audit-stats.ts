/** The text of `fleet audit stats`: one window of the audit API's `GET /api/audit/stats`. */
import type { AuditStats, STATS_TOP_EVENTS, STATS_TOP_TOOLS } from '@fleet/audit';
import { formatTable } from '../table.ts';

/** Rows of the tools and events tables; `--json` has the API's whole lists. */
export const STATS_ROWS_SHOWN = 10;

/**
 * The most tools (and events) the audit API lists: its busiest, busiest first. Typed by the
 * store's constants, so the compiler notices when they change; imported as types only, as
 * the CLI does not load the store.
 */
const API_LISTS_AT_MOST: typeof STATS_TOP_TOOLS & typeof STATS_TOP_EVENTS = 50;

const DECISIONS = ['allowed', 'denied', 'error'] as const;

/** An ISO time as the tables show it: `2025-01-31 12:00:00Z`. */
export function formatTime(iso: string): string {
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

function milliseconds(value: number | null): string {
  return value === null ? '-' : value.toFixed(1);
}

/**
 * `tools: 3, all shown`, `tools: top 10 of 23 shown (--json has all)`, or, when the API's
 * list is full, `tools: top 10 of 50 or more shown (--json has the 50 busiest)`.
 */
export function listedNote(noun: string, listed: number): string {
  if (listed === 0) return `${noun}: none`;
  if (listed <= STATS_ROWS_SHOWN) return `${noun}: ${listed}, all shown`;
  return listed >= API_LISTS_AT_MOST
    ? `${noun}: top ${STATS_ROWS_SHOWN} of ${listed} or more shown (--json has the ${listed} busiest)`
    : `${noun}: top ${STATS_ROWS_SHOWN} of ${listed} shown (--json has all)`;
}

/** A stats answer with records in it, for people. */
export function formatStats(stats: AuditStats): string {
  const { total } = stats;
  const share = (count: number) => `${((count / total) * 100).toFixed(1)}%`;
  const counted = (noun: string, rows: ReadonlyArray<readonly [string, number]>) => {
    const note = `${listedNote(`${noun}s`, rows.length)}\n`;
    if (rows.length === 0) return note;
    const shown = rows
      .slice(0, STATS_ROWS_SHOWN)
      .map(([name, count]) => [name, String(count), share(count)]);
    return `${note}${formatTable([noun.toUpperCase(), 'RECORDS', 'SHARE'], shown, {
      align: ['left', 'right', 'right'],
    })}`;
  };
  const interceptors =
    stats.byInterceptor.length === 0
      ? 'interceptors: none\n'
      : `interceptors: ${stats.byInterceptor.length} (durations in ms)\n${formatTable(
          ['INTERCEPTOR', 'INVOCATIONS', 'OUTCOMES', 'P50', 'P95', 'P99'],
          stats.byInterceptor.map((i) => [
            i.interceptor,
            String(i.count),
            Object.entries(i.outcomes)
              .sort(([a, m], [b, n]) => n - m || a.localeCompare(b))
              .map(([outcome, n]) => `${outcome} ${n}`)
              .join(', '),
            milliseconds(i.latencyMs.p50),
            milliseconds(i.latencyMs.p95),
            milliseconds(i.latencyMs.p99),
          ]),
          { align: ['left', 'right', 'left', 'right', 'right', 'right'] },
        )}`;
  const chain = stats.latencyMs;
  const latency =
    chain.count === 0
      ? 'chain latency: no chain records\n'
      : `chain latency over ${chain.count} chain records: p50 ${milliseconds(chain.p50)} ms, p95 ${milliseconds(chain.p95)} ms, p99 ${milliseconds(chain.p99)} ms\n`;
  return [
    `audit records from ${formatTime(stats.since)} to ${formatTime(stats.until)}: ${total} (${stats.byKind.chain} chain, ${stats.byKind.invocation} invocation${stats.byKind.admin ? `, ${stats.byKind.admin} admin` : ''})\n`,
    formatTable(
      ['DECISION', 'RECORDS', 'SHARE'],
      DECISIONS.map((d) => [d, String(stats.byDecision[d]), share(stats.byDecision[d])]),
      { align: ['left', 'right', 'right'] },
    ),
    counted(
      'tool',
      stats.byTool.map((t) => [t.tool, t.count] as const),
    ),
    counted(
      'event',
      stats.byEvent.map((e) => [e.event, e.count] as const),
    ),
    interceptors,
    latency,
  ].join('\n');
}
