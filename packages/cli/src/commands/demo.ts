/**
 * `fleet demo`: a guided tour with a real MCP client against a running fleet (or one it
 * starts): a PII value going out redacted, a token restored on the way back to the tool, a
 * policy denial with its rule, a secret blocked, and the audit trail of those calls.
 */
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Command } from 'commander';
import type { CommandContext } from '../context.ts';
import { CUSTOMERS } from '../demo/backend.ts';
import { CliError } from '../errors.ts';
import { type LocalFleet, readFleetState, startLocalFleet } from '../fleet/local-fleet.ts';

/** The SDK client prefixes error messages with "MCP error <code>: "; the demo shows the code itself. */
const withoutSdkPrefix = (message: string) => message.replace(/^MCP error -?\d+: /, '');

interface AuditRecord {
  phase: string;
  decision: string;
  status: string;
  kind: string;
  target?: string;
  durationMs: number;
  interceptors: Array<{ name: string; outcome: string; durationMs: number; mode: string }>;
  abortReasons: Array<{ interceptor: string; reason: string }>;
}

function textOf(result: unknown): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? [];
  return content.map((c) => c.text ?? '').join(' ');
}

/** Add `demo` to `program`. */
export function addDemoCommand(program: Command, context: CommandContext): Command {
  return program
    .command('demo')
    .description('a guided tour: redaction, token restore, a policy denial and the audit trail')
    .option('--audit <url>', 'audit-logger base URL (default: from .fleet/fleet.json)')
    .option('--state-dir <dir>', 'state directory of `fleet up`', '.fleet')
    .action(async (options: { audit?: string; stateDir: string }, command: Command) => {
      const { io } = context;
      const out = (text = '') => io.stdout(`${text}\n`);
      const globals = context.globals(command);
      const stateDir = resolve(io.cwd, options.stateDir);
      let fleet: LocalFleet | undefined;
      let mcpUrl = `${globals.orchestrator}/mcp`;
      let auditUrl = options.audit;
      const running = await io
        .fetch(`${globals.orchestrator}/healthz`, { signal: AbortSignal.timeout(1500) })
        .then(
          (r) => r.ok,
          () => false,
        );
      if (!running) {
        out(`No fleet answers at ${globals.orchestrator}; starting one for the demo...`);
        fleet = await startLocalFleet({
          port: 0,
          env: io.env,
          stateDir,
          events: { ready: (s, u) => out(`  ✓ ${s} ${u}`) },
        });
        mcpUrl = fleet.mcpUrl;
        auditUrl = fleet.urls['audit-logger'];
      } else if (auditUrl === undefined) {
        auditUrl = readFleetState(stateDir)?.urls['audit-logger'];
      }
      const client = new Client({ name: 'fleet-demo', version: '0.1.0' });
      const traces: Array<{ step: string; traceId: string }> = [];
      const call = async (step: string, name: string, args: Record<string, unknown>) => {
        const traceId = randomBytes(16).toString('hex');
        traces.push({ step, traceId });
        try {
          return {
            result: await client.callTool({
              name,
              arguments: args,
              _meta: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
            }),
          };
        } catch (error) {
          return { error: error as Error & { code?: number; data?: unknown } };
        }
      };
      try {
        await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl)));
        const ada = CUSTOMERS['42'];
        out(`\nConnected to ${mcpUrl} as a plain MCP client.\n`);

        out('1. A tool returns PII');
        out(
          `   The CRM backend answers: Customer 42: ${ada?.name}, email ${ada?.email}, phone ${ada?.phone}, card ${ada?.card}, IBAN ${ada?.iban}`,
        );
        const lookup = await call('lookup_customer', 'lookup_customer', { id: '42' });
        if (lookup.error)
          throw new CliError(
            'FLEET_UNAVAILABLE',
            `lookup_customer failed: ${lookup.error.message}`,
          );
        const seen = textOf(lookup.result);
        out(`   Your client receives:      ${seen}`);
        const token = /<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/.exec(seen)?.[0];

        out('\n2. The client sends a token back to a tool');
        if (token) {
          out(`   send_email(to: "${token}")`);
          const sent = await call('send_email', 'send_email', {
            to: token,
            subject: 'Your invoice',
          });
          out(
            `   The backend says:          ${sent.error ? `error ${withoutSdkPrefix(sent.error.message)}` : textOf(sent.result)}`,
          );
          out('   (pii-redactor restored the real address on the way in, for this client only)');
        } else out('   (no e-mail token in the answer: is PII_CONFIG tokenizing EMAIL_ADDRESS?)');

        out('\n3. A policy denial');
        const denied = await call('delete_record', 'delete_record', { id: '42' });
        if (denied.error) {
          out(
            `   delete_record(id: "42") → JSON-RPC error ${denied.error.code}: ${withoutSdkPrefix(denied.error.message)}`,
          );
        } else out(`   delete_record was allowed: ${textOf(denied.result)}`);

        out('\n4. A secret in tool arguments');
        const secret = await call('secret', 'get_weather', {
          city: 'Paris',
          apiKey: `AKIA${'IOSFODNN7EXAMPLE'}`,
        });
        out(
          `   get_weather(city, apiKey: AKIA…) → ${secret.error ? `JSON-RPC error ${secret.error.code}: ${withoutSdkPrefix(secret.error.message)}` : textOf(secret.result)}`,
        );

        out('\n5. The audit trail');
        if (!auditUrl) out('   (audit-logger URL unknown: pass --audit <url>)');
        else {
          for (const { step, traceId } of traces) {
            let records: AuditRecord[] = [];
            const deadline = Date.now() + 8000;
            while (Date.now() < deadline) {
              const res = await io.fetch(`${auditUrl}/api/audit/traces/${traceId}`, {
                headers: io.env.AUDIT_READ_TOKEN
                  ? { authorization: `Bearer ${io.env.AUDIT_READ_TOKEN}` }
                  : {},
              });
              if (res.ok) records = ((await res.json()) as { records: AuditRecord[] }).records;
              if (
                records.some(
                  (r) => r.kind === 'chain' && (r.phase === 'response' || r.decision !== 'allowed'),
                )
              )
                break;
              await new Promise((r) => setTimeout(r, 250));
            }
            out(`   ${step}  trace ${traceId}`);
            for (const r of records.filter((x) => x.kind === 'chain')) {
              const parts = r.interceptors
                .map((i) => `${i.name}:${i.outcome} ${i.durationMs.toFixed(1)}ms`)
                .join(', ');
              const why = r.abortReasons.map((a) => ` — ${a.interceptor}: ${a.reason}`).join('');
              out(
                `     ${r.phase.padEnd(8)} ${r.decision.padEnd(7)} ${parts || 'no interceptors'}${why}`,
              );
            }
            out(`     ${auditUrl}/?traceId=${traceId}`);
          }
        }
        out('');
      } finally {
        await client.close().catch(() => undefined);
        await fleet?.stop();
      }
    });
}
