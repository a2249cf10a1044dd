/**
 * `fleet demo`: a guided tour with a real MCP client against a running fleet (or one it
 * starts): a PII value going out redacted, a token restored on the way back to the tool, a
 * policy denial with its rule, a secret blocked, and the audit trail of those calls.
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Command } from 'commander';
import type { AuditClient, AuditRecordView } from '../audit-client.ts';
import { type CommandContext, stateDirOption } from '../context.ts';
import { CUSTOMERS } from '../demo/backend.ts';
import { CliError } from '../errors.ts';
import { checkFleetCanStart, type LocalFleet, startLocalFleet } from '../fleet/local-fleet.ts';

/** The SDK client prefixes error messages with "MCP error <code>: "; the demo shows the code itself. */
const withoutSdkPrefix = (message: string) => message.replace(/^MCP error -?\d+: /, '');

/** How long step 5 waits, for all calls together, for their audit records to arrive. */
const AUDIT_WAIT_MS = 10_000;

/** Whether `records` hold the chain record that ends a call (its response, or its denial). */
const callRecorded = (records: readonly AuditRecordView[]) =>
  records.some((r) => r.kind === 'chain' && (r.phase === 'response' || r.decision !== 'allowed'));

function textOf(result: unknown): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? [];
  return content.map((c) => c.text ?? '').join(' ');
}

/** Add `demo` to `program`. */
export function addDemoCommand(program: Command, context: CommandContext): Command {
  return program
    .command('demo')
    .description('a guided tour: redaction, token restore, a policy denial and the audit trail')
    .option(
      '--audit <url>',
      'audit-logger base URL (default: $FLEET_AUDIT_URL, else the running fleet of --state-dir)',
    )
    .addOption(stateDirOption())
    .action(async (_options: unknown, command: Command) => {
      const { io } = context;
      const out = (text = '') => io.stdout(`${text}\n`);
      // The orchestrator: --orchestrator, $FLEET_ORCHESTRATOR_URL, the fleet.json of a running
      // `fleet up` in --state-dir, else the default port.
      const globals = context.globals(command);
      let fleet: LocalFleet | undefined;
      let mcpUrl = `${globals.orchestrator}/mcp`;
      const audit = (baseUrl: string) => context.audit(command, baseUrl);
      // An audit API the user named (--audit, $FLEET_AUDIT_URL, fleet.json) must answer:
      // checked before the tour, not after four steps of it.
      const named = context.auditUrl(command, false);
      if (named !== undefined) {
        const problem = await audit(named).check();
        if (problem) throw problem;
      }
      let auditApi: AuditClient | undefined;
      const running = await io
        .fetch(`${globals.orchestrator}/healthz`, { signal: AbortSignal.timeout(1500) })
        .then(
          (r) => r.ok,
          () => false,
        );
      if (!running) {
        const stateDir = context.stateDir(command);
        // Before the word of starting one, as `fleet up` does: a live `fleet up` in the state
        // directory (named with its pid), Redis, the builds (startLocalFleet checks again).
        await checkFleetCanStart({ env: io.env, stateDir, port: 0 });
        out(`No fleet answers at ${globals.orchestrator}; starting one for the demo...`);
        fleet = await startLocalFleet({
          port: 0,
          env: io.env,
          stateDir,
          events: { ready: (s, u) => out(`  ✓ ${s} ${u}`) },
        });
        mcpUrl = fleet.mcpUrl;
        auditApi = audit(named ?? fleet.urls['audit-logger']);
      } else if (named !== undefined) {
        auditApi = audit(named);
      } else {
        // Only the default port: a fleet elsewhere (Helm, Docker) may have none there.
        auditApi = context.audit(command);
        if (await auditApi.check()) auditApi = undefined;
      }
      const client = new Client({ name: 'fleet-demo', version: '0.1.0' });
      // Each call by its tool's name, the label step 5 shows its audit trail under.
      const traces: Array<{ tool: string; traceId: string }> = [];
      const call = async (name: string, args: Record<string, unknown>) => {
        const traceId = randomBytes(16).toString('hex');
        traces.push({ tool: name, traceId });
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
        await client
          .connect(new StreamableHTTPClientTransport(new URL(mcpUrl)))
          .catch((error: unknown) => {
            if (fleet) throw error;
            // Something answered /healthz, but no MCP session opens there.
            throw new CliError(
              'UNEXPECTED_RESPONSE',
              `no MCP session opens at ${mcpUrl}: is ${globals.orchestrator} the orchestrator? (pass its base URL as --orchestrator, or leave it out to start a fleet for the demo)`,
              { details: { reason: (error as Error).message }, cause: error },
            );
          });
        const ada = CUSTOMERS['42'];
        out(`\nConnected to ${mcpUrl} as a plain MCP client.\n`);

        out('1. A tool returns PII');
        out(
          `   The CRM backend answers: Customer 42: ${ada?.name}, email ${ada?.email}, phone ${ada?.phone}, card ${ada?.card}, IBAN ${ada?.iban}`,
        );
        const lookup = await call('lookup_customer', { id: '42' });
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
          const sent = await call('send_email', {
            to: token,
            subject: 'Your invoice',
          });
          out(
            `   The backend says:          ${sent.error ? `error ${withoutSdkPrefix(sent.error.message)}` : textOf(sent.result)}`,
          );
          out('   (pii-redactor restored the real address on the way in, for this client only)');
        } else out('   (no e-mail token in the answer: is PII_CONFIG tokenizing EMAIL_ADDRESS?)');

        out('\n3. A policy denial');
        const denied = await call('delete_record', { id: '42' });
        if (denied.error) {
          out(
            `   delete_record(id: "42") → JSON-RPC error ${denied.error.code}: ${withoutSdkPrefix(denied.error.message)}`,
          );
        } else out(`   delete_record was allowed: ${textOf(denied.result)}`);

        out('\n4. A secret in tool arguments');
        const secret = await call('get_weather', {
          city: 'Paris',
          apiKey: `AKIA${'IOSFODNN7EXAMPLE'}`,
        });
        out(
          `   get_weather(city, apiKey: AKIA…) → ${secret.error ? `JSON-RPC error ${secret.error.code}: ${withoutSdkPrefix(secret.error.message)}` : textOf(secret.result)}`,
        );

        out('\n5. The audit trail');
        if (!auditApi)
          out(`   (no audit API answers at ${context.auditUrl(command)}: pass --audit <url>)`);
        else {
          // Records arrive asynchronously (queue, then worker): one wait for all the calls.
          const deadline = Date.now() + AUDIT_WAIT_MS;
          let missing = 0;
          for (const { tool, traceId } of traces) {
            let records = (await auditApi.trace(traceId)).records;
            while (!callRecorded(records) && Date.now() < deadline) {
              await new Promise((r) => setTimeout(r, 250));
              records = (await auditApi.trace(traceId)).records;
            }
            const chain = records.filter((x) => x.kind === 'chain');
            out(`   ${tool}  trace ${traceId}`);
            if (chain.length === 0) {
              missing++;
              out(`     no audit records (none arrived within ${AUDIT_WAIT_MS / 1000} s)`);
            }
            for (const r of chain) {
              const parts = r.interceptors
                .map((i) => `${i.name}:${i.outcome} ${i.durationMs.toFixed(1)}ms`)
                .join(', ');
              const why = r.abortReasons.map((a) => ` — ${a.interceptor}: ${a.reason}`).join('');
              out(
                `     ${r.phase.padEnd(8)} ${r.decision.padEnd(7)} ${parts || 'no interceptors'}${why}`,
              );
            }
            out(`     ${auditApi.baseUrl}/?traceId=${traceId}`);
          }
          if (missing > 0) {
            const which =
              missing === traces.length ? 'any of these calls' : `${missing} of these calls`;
            const queue = fleet ? ` (${fleet.auditQueue})` : '';
            out(`\n   No audit records of ${which} reached ${auditApi.baseUrl}.`);
            out(
              `   They travel through the fleet's audit queue${queue} to its audit worker: is the worker running? Does another fleet on the same Redis read that queue (AUDIT_QUEUE)? Is this audit API the one of the fleet at ${mcpUrl}?`,
            );
          }
        }
        out('');
      } finally {
        await client.close().catch(() => undefined);
        await fleet?.stop();
      }
    });
}
