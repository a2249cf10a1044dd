/**
 * `fleet audit query` and `fleet audit trace <traceId>`: the audit trail from the
 * audit-logger's API (`--audit`, else the URL `fleet up` wrote to `.fleet/fleet.json`,
 * else http://127.0.0.1:8083), with `AUDIT_READ_TOKEN` when set.
 */
import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { CommandContext } from '../context.ts';
import { CliError } from '../errors.ts';
import { readFleetState } from '../fleet/local-fleet.ts';
import { formatTable } from '../table.ts';

interface AuditRecordView {
  id: string;
  timestamp: string;
  kind: string;
  traceId?: string;
  phase: string;
  method: string;
  target?: string;
  decision: string;
  status: string;
  durationMs: number;
  principal?: { type: string; id?: string };
  interceptors: Array<{ name: string; outcome: string; durationMs: number; mode: string }>;
  abortReasons: Array<{ interceptor: string; reason: string }>;
}

function auditBase(context: CommandContext, options: { audit?: string; stateDir: string }): string {
  if (options.audit) return options.audit.replace(/\/+$/, '');
  const url = readFleetState(resolve(context.io.cwd, options.stateDir))?.urls['audit-logger'];
  if (url) return url;
  return context.io.env.FLEET_AUDIT_URL ?? 'http://127.0.0.1:8083';
}

async function get<T>(context: CommandContext, base: string, path: string): Promise<T> {
  const token = context.io.env.AUDIT_READ_TOKEN;
  let res: Response;
  try {
    res = await context.io.fetch(`${base}${path}`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(10_000),
    });
  } catch (error) {
    throw new CliError(
      'ORCHESTRATOR_UNREACHABLE',
      `cannot reach the audit API at ${base}: is the fleet running? (fleet up) [${(error as Error).message}]`,
    );
  }
  const body = (await res.json().catch(() => ({}))) as T & { error?: string; issues?: unknown };
  if (res.status === 401)
    throw new CliError(
      'ADMIN_UNAUTHORIZED',
      'the audit API refused the token (set AUDIT_READ_TOKEN)',
      { status: 401 },
    );
  if (!res.ok)
    throw new CliError(
      'ADMIN_API_ERROR',
      `the audit API answered ${res.status}: ${body.error ?? 'error'}`,
      { status: res.status, details: body.issues },
    );
  return body;
}

function bar(ms: number, scale: number): string {
  return '█'.repeat(Math.max(1, Math.round(ms * scale)));
}

/** Add `audit query` and `audit trace` to `program`. */
export function addAuditCommand(program: Command, context: CommandContext): Command {
  const audit = program.command('audit').description('query the audit trail');
  audit
    .command('query')
    .description('search audit records')
    .option('--trace <traceId>', 'records of one trace')
    .option('--tool <name>', 'tool, prompt or resource')
    .option('--principal <id>', 'principal id')
    .option('--decision <decision>', 'allowed | denied | error')
    .option('--interceptor <name>', 'records an interceptor took part in')
    .option('--since <when>', 'e.g. 1h, 30m, 7d or an ISO time', '1h')
    .option('--limit <n>', 'at most this many records', '50')
    .option('--audit <url>', 'audit-logger base URL')
    .option('--state-dir <dir>', 'state directory of `fleet up`', '.fleet')
    .action(
      async (
        options: Record<string, string | undefined> & { stateDir: string },
        command: Command,
      ) => {
        const base = auditBase(context, options);
        const query = new URLSearchParams();
        for (const [flag, param] of [
          ['trace', 'traceId'],
          ['tool', 'tool'],
          ['principal', 'principal'],
          ['decision', 'decision'],
          ['interceptor', 'interceptor'],
          ['since', 'since'],
          ['limit', 'limit'],
        ] as const) {
          const value = options[flag];
          if (value !== undefined && value !== '') query.set(param, value);
        }
        const answer = await get<{ records: AuditRecordView[]; nextCursor?: string }>(
          context,
          base,
          `/api/audit/records?${query}`,
        );
        context.print(command, answer, () => {
          if (answer.records.length === 0) return 'no audit records match\n';
          const rows = answer.records.map((r) => [
            r.timestamp.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
            r.kind,
            r.decision,
            r.phase,
            `${r.method}${r.target ? ` ${r.target}` : ''}`,
            r.principal ? `${r.principal.type}${r.principal.id ? `:${r.principal.id}` : ''}` : '-',
            r.interceptors.map((i) => `${i.name}:${i.outcome}`).join(' ') || '-',
            r.traceId ?? '-',
          ]);
          const more = answer.nextCursor ? `(more: add --limit or narrow --since)\n` : '';
          return `${formatTable(['TIME', 'KIND', 'DECISION', 'PHASE', 'CALL', 'PRINCIPAL', 'INTERCEPTORS', 'TRACE'], rows)}${more}`;
        });
      },
    );
  audit
    .command('trace <traceId>')
    .description('every record of one trace as a text waterfall')
    .option('--audit <url>', 'audit-logger base URL')
    .option('--state-dir <dir>', 'state directory of `fleet up`', '.fleet')
    .action(
      async (traceId: string, options: { audit?: string; stateDir: string }, command: Command) => {
        if (!/^[0-9a-fA-F]{32}$/.test(traceId))
          throw new CliError('USAGE', `"${traceId}" is not a trace id (32 hex digits)`);
        const base = auditBase(context, options);
        const answer = await get<{ traceId: string; records: AuditRecordView[] }>(
          context,
          base,
          `/api/audit/traces/${traceId.toLowerCase()}`,
        );
        context.print(command, answer, () => {
          if (answer.records.length === 0) return `no audit records for trace ${traceId}\n`;
          const longest = Math.max(
            1,
            ...answer.records.flatMap((r) => [
              r.durationMs,
              ...r.interceptors.map((i) => i.durationMs),
            ]),
          );
          const scale = 40 / longest;
          const lines = [`trace ${answer.traceId}  (${base}/?traceId=${answer.traceId})`];
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
          return `${lines.join('\n')}\n`;
        });
      },
    );
  return audit;
}
