/**
 * `fleet audit query`, `fleet audit export`, `fleet audit trace <traceId>` and `fleet audit stats`: the audit trail
 * from the audit-logger's API (`--audit`, else `FLEET_AUDIT_URL`, else the URL a running
 * `fleet up` wrote to `<state dir>/fleet.json`, else http://127.0.0.1:8083), with
 * `AUDIT_READ_TOKEN` when set.
 */
import { resolve } from 'node:path';
import { parseTimeBound } from '@fleet/audit/time';
import { type Command, Option } from 'commander';
import type { AuditRecordView } from '../audit-client.ts';
import { type CommandContext, DEFAULT_AUDIT_URL, stateDirOption } from '../context.ts';
import { CliError } from '../errors.ts';
import { nonEmpty } from '../option-values.ts';
import { formatTable } from '../table.ts';
import { EXPORT_DEFAULT_SINCE, EXPORT_PAGE_SIZE, exportAuditRecords } from './audit-export.ts';
import { formatStats, formatTime } from './audit-stats.ts';

/** The help of `--audit`: where the audit API is found (see `CommandContext.auditUrl`). */
const AUDIT_URL_HELP = `audit-logger base URL (default: $FLEET_AUDIT_URL, else the running fleet of --state-dir, else ${DEFAULT_AUDIT_URL})`;

/** The query flags and the audit API parameters they set. */
const QUERY_FLAGS = [
  ['trace', 'traceId'],
  ['tool', 'tool'],
  ['event', 'event'],
  ['kind', 'kind'],
  ['principal', 'principal'],
  ['decision', 'decision'],
  ['interceptor', 'interceptor'],
  ['since', 'since'],
  ['until', 'until'],
  ['limit', 'limit'],
] as const;

type QueryOptions = Partial<Record<(typeof QUERY_FLAGS)[number][0], string>>;

/** Refuse a `--since`/`--until` the audit API would refuse (exit 2 before any request). */
function checkTimeBound(flag: '--since' | '--until', value: string | undefined): void {
  if (value !== undefined && parseTimeBound(value) === undefined)
    throw new CliError(
      'USAGE',
      `${flag} must be a duration back from now (30m, 1h, 7d) or an ISO 8601 time (2025-01-31T12:00:00Z), got "${value}"`,
    );
}

/** The PRINCIPAL cell: `type:id`, or `type (no id)` for a principal without an id. */
export function formatPrincipal(principal: AuditRecordView['principal']): string {
  if (!principal) return '-';
  return principal.id ? `${principal.type}:${principal.id}` : `${principal.type} (no id)`;
}

/**
 * The audit API's parameters for `options`, checked where it is cheap (exit 2 before any
 *  request). `--principal` takes an id, `type:id` as the PRINCIPAL column shows it, or the
 * type of a principal without an id.
 */
export function recordQuery(options: QueryOptions): URLSearchParams {
  const { limit, since, until } = options;
  if (limit !== undefined && !/^[1-9]\d*$/.test(limit))
    throw new CliError('USAGE', `--limit must be a positive integer, got "${limit}"`);
  checkTimeBound('--since', since);
  checkTimeBound('--until', until);
  const query = new URLSearchParams();
  for (const [flag, param] of QUERY_FLAGS) {
    let value = options[flag];
    if (value === undefined) continue;
    if (flag === 'principal') {
      const typed = /^(user|service|anonymous):(.+)$/.exec(value);
      if (typed?.[2]) value = typed[2];
    }
    query.set(param, value);
  }
  return query;
}

/** The stats API's parameters for `--since`/`--until`, checked as {@link recordQuery} does. */
export function statsQuery(options: { since?: string; until?: string }): URLSearchParams {
  const query = new URLSearchParams();
  for (const flag of ['since', 'until'] as const) {
    const value = options[flag];
    checkTimeBound(`--${flag}`, value);
    if (value !== undefined) query.set(flag, value);
  }
  return query;
}

function bar(ms: number, scale: number): string {
  return '█'.repeat(Math.max(1, Math.round(ms * scale)));
}

/**
 * Add the record filters of `audit query` and `audit export` to `command`: `--trace`, `--tool`,
 * `--event`, `--kind`, `--principal`, `--decision`, `--interceptor`, `--since` (default
 * `defaultSince`) and `--until`, read by {@link recordQuery}.
 */
export function addRecordFilterOptions(command: Command, defaultSince: string): Command {
  return command
    .option(
      '--trace <traceId>',
      'records of one trace',
      nonEmpty('--trace', 'a trace id', 'every trace'),
    )
    .option(
      '--tool <name>',
      'tool, prompt or resource',
      nonEmpty('--tool', 'a tool, prompt or resource name', 'every one'),
    )
    .option(
      '--event <method>',
      'the governed event, e.g. resources/read (admin records: admin/services/register, admin/services/unregister, admin/services/refresh, admin/pins/approve, admin/pins/forget)',
      nonEmpty('--event', 'an event such as tools/call', 'every event'),
    )
    .addOption(
      new Option(
        '--kind <kind>',
        "who wrote the record: chain (the gateway's chain), invocation (the audit interceptor), admin (changes through the orchestrator's admin API, tool pins approved or forgotten, and refused attempts)",
      ).choices(['chain', 'invocation', 'admin']),
    )
    .option(
      '--principal <id>',
      'principal id, or type:id as the PRINCIPAL column shows it; for a principal without an id, its type (anonymous)',
      nonEmpty('--principal', 'a principal id, type:id or type', 'every principal'),
    )
    .addOption(
      new Option('--decision <decision>', 'the chain decision').choices([
        'allowed',
        'denied',
        'error',
      ]),
    )
    .option(
      '--interceptor <name>',
      'records an interceptor took part in',
      nonEmpty('--interceptor', 'an interceptor name', 'every interceptor'),
    )
    .option('--since <when>', 'e.g. 1h, 30m, 7d or an ISO time', defaultSince)
    .option('--until <when>', 'e.g. 10m or an ISO time (default: now)');
}

/** Add `audit query`, `audit export`, `audit trace` and `audit stats` to `program`. */
export function addAuditCommand(program: Command, context: CommandContext): Command {
  const audit = program.command('audit').description('query the audit trail');
  addRecordFilterOptions(
    audit.command('query').description('search audit records, newest first'),
    '1h',
  )
    .option('--limit <n>', 'at most this many records (1..500)', '50')
    .option('--audit <url>', AUDIT_URL_HELP)
    .addOption(stateDirOption())
    .action(async (options: QueryOptions, command: Command) => {
      const answer = await context.audit(command).records(recordQuery(options));
      context.print(command, answer, () => {
        if (answer.records.length === 0) {
          return 'no audit records match\n';
        }
        const rows = answer.records.map((r) => [
          formatTime(r.timestamp),
          r.kind,
          r.decision,
          r.phase,
          `${r.method}${r.target ? ` ${r.target}` : ''}`,
          formatPrincipal(r.principal),
          r.interceptors.map((i) => `${i.name}:${i.outcome}`).join(' ') || '-',
          r.traceId ?? '-',
        ]);
        // A page the audit API cut at its size bound (4 Mi characters of records) holds fewer
        // records than asked for: a larger --limit would not show more.
        const more = !answer.nextCursor
          ? ''
          : answer.records.length < Number(options.limit ?? '50')
            ? '(more: the audit API cut this answer at its size bound; narrow the filters, or fleet audit export for every record)\n'
            : '(more: add --limit or narrow --since)\n';
        return `${formatTable(['TIME', 'KIND', 'DECISION', 'PHASE', 'CALL', 'PRINCIPAL', 'INTERCEPTORS', 'TRACE'], rows)}${more}`;
      });
    });
  addRecordFilterOptions(
    audit
      .command('export')
      .description(
        `every matching record (not one page: all of them, ${EXPORT_PAGE_SIZE} a request) as NDJSON, one record a line as the audit API returns it, newest first, to stdout or --out; progress on stderr when it is a terminal or with --out`,
      ),
    EXPORT_DEFAULT_SINCE,
  )
    .option(
      '--out <file>',
      'write to this file instead of stdout: a temporary file beside it, moved into place once the export is complete (nothing is left there when it fails)',
      nonEmpty('--out', 'a file', 'stdout'),
    )
    .option('--force', 'replace an existing --out file')
    .option('--audit <url>', AUDIT_URL_HELP)
    .addOption(stateDirOption())
    .action(async (options: QueryOptions & { out?: string; force?: boolean }, command: Command) => {
      const { io } = context;
      const out = options.out === undefined ? undefined : resolve(io.cwd, options.out);
      // With --out, a signal must not end the process before the temporary file is removed;
      // on stdout there is nothing to clean up.
      const stop = new AbortController();
      if (out !== undefined) void io.untilInterrupted?.().then((signal) => stop.abort(signal));
      await exportAuditRecords({
        client: context.audit(command),
        io,
        query: recordQuery(options),
        since: options.since,
        until: options.until,
        out,
        force: options.force === true,
        signal: stop.signal,
      });
    });
  audit
    .command('trace <traceId>')
    .description('every record of one trace as a text waterfall (exit 1 when there is none)')
    .option('--audit <url>', AUDIT_URL_HELP)
    .addOption(stateDirOption())
    .action(async (traceId: string, _options: unknown, command: Command) => {
      if (!/^[0-9a-fA-F]{32}$/.test(traceId))
        throw new CliError('USAGE', `"${traceId}" is not a trace id (32 hex digits)`);
      const api = context.audit(command);
      const answer = await api.trace(traceId.toLowerCase());
      // Records arrive asynchronously (queue, worker): none may also mean "not yet".
      if (answer.records.length === 0)
        throw new CliError(
          'NO_RECORDS',
          `no audit records for trace ${answer.traceId} at ${api.baseUrl} (none stored yet, or the trace did not pass this fleet)`,
        );
      context.print(command, answer, () => {
        const longest = Math.max(
          1,
          ...answer.records.flatMap((r) => [
            r.durationMs,
            ...r.interceptors.map((i) => i.durationMs),
          ]),
        );
        const scale = 40 / longest;
        const lines = [`trace ${answer.traceId}  (${api.baseUrl}/?traceId=${answer.traceId})`];
        for (const r of answer.records) {
          lines.push(
            `${r.timestamp}  ${r.kind.padEnd(10)} ${r.phase.padEnd(8)} ${r.method}${r.target ? ` ${r.target}` : ''}  ${r.decision} (${r.status}) ${r.durationMs.toFixed(1)} ms`,
          );
          for (const i of r.interceptors) {
            lines.push(
              `    ${i.name.padEnd(20)} ${bar(i.durationMs, scale).padEnd(41)} ${i.durationMs.toFixed(1).padStart(7)} ms  ${i.outcome}${i.mode === 'audit' ? ' (audit)' : ''}`,
            );
          }
          for (const a of r.abortReasons) lines.push(`    ✗ ${a.interceptor}: ${a.reason}`);
        }
        if (answer.truncated)
          lines.push(
            `(the first ${answer.records.length} records: the trace has more than one answer holds; all of them: fleet audit export --trace ${answer.traceId} --since ${answer.records[0]?.timestamp ?? '7d'})`,
          );
        return `${lines.join('\n')}\n`;
      });
    });
  audit
    .command('stats')
    .description(
      'counts of a time window: by decision, the busiest tools and events, per interceptor, chain latency',
    )
    .option('--since <when>', 'e.g. 1h, 30m, 7d or an ISO time', '24h')
    .option('--until <when>', 'e.g. 10m or an ISO time (default: now)')
    .option('--audit <url>', AUDIT_URL_HELP)
    .addOption(stateDirOption())
    .action(async (options: { since?: string; until?: string }, command: Command) => {
      const stats = await context.audit(command).stats(statsQuery(options));
      context.print(command, stats, () => {
        if (stats.total > 0) return formatStats(stats);
        const window =
          options.until === undefined
            ? `since ${formatTime(stats.since)}`
            : `between ${formatTime(stats.since)} and ${formatTime(stats.until)}`;
        return `no audit records ${window}\n`;
      });
    });
  return audit;
}
