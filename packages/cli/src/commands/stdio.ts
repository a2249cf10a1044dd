/**
 * `fleet stdio`: one MCP session on stdin/stdout through the chain of the fleet `fleet up`
 * runs, for desktop clients that spawn their MCP servers (Claude Desktop and the like). It
 * runs the orchestrator's stdio mode (`main.js --stdio`) with the configuration and the
 * interceptor token `fleet up` left in its state directory, so the session shares that
 * fleet's interceptor services, runtime registrations and audit trail (its records go to the
 * fleet's audit queue, which fleet.json names). Several sessions may
 * run at once (a desktop client per user, say): each gets an audit journal of its own.
 *
 * stdout is the MCP channel: nothing but the orchestrator writes to it.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { journalHolder, processAlive } from '@fleet/audit/lock';
import type { Command } from 'commander';
import type { CommandContext } from '../context.ts';
import { CliError } from '../errors.ts';
import { entry, nodeArgs, readFleetState } from '../fleet/local-fleet.ts';

/** Most concurrent stdio sessions that get a journal of their own. */
const MAX_JOURNALS = 16;

/**
 * The audit journal for a new session: one per live session, the first that no live process
 * holds. A journal a gone session left is taken over, and the new session replays what it
 * holds.
 */
function freeJournal(stateDir: string): string {
  const path = (n: number) =>
    join(stateDir, n === 1 ? 'stdio-journal.ndjson' : `stdio-journal-${n}.ndjson`);
  for (let n = 1; n <= MAX_JOURNALS; n++) if (journalHolder(path(n)) === undefined) return path(n);
  // All taken: the orchestrator will say the journal is in use.
  return path(1);
}

/** Add `stdio` to `program`. */
export function addStdioCommand(program: Command, context: CommandContext): Command {
  return program
    .command('stdio')
    .description(
      'serve one MCP session on stdin/stdout through the running fleet (for desktop clients)',
    )
    .option('--state-dir <dir>', 'state directory of `fleet up`', '.fleet')
    .option('--config <file>', 'orchestrator config to use instead of the fleet’s')
    .action(async (options: { stateDir: string; config?: string }) => {
      const { io } = context;
      const stateDir = resolve(io.cwd, options.stateDir);
      const state = readFleetState(stateDir);
      let configPath: string;
      if (options.config) {
        configPath = resolve(io.cwd, options.config);
      } else {
        if (!state)
          throw new CliError(
            'FLEET_UNAVAILABLE',
            `no fleet in ${stateDir}: start one with \`fleet up\` (or pass --config)`,
          );
        if (state.pid !== undefined && !processAlive(state.pid))
          throw new CliError(
            'FLEET_UNAVAILABLE',
            `the fleet in ${stateDir} is not running (its \`fleet up\`, pid ${state.pid}, is gone): start it with \`fleet up\``,
          );
        configPath = join(stateDir, 'fleet.yaml');
      }
      if (!existsSync(configPath))
        throw new CliError('FLEET_UNAVAILABLE', `no orchestrator config at ${configPath}`);
      if (!existsSync(entry('orchestrator')))
        throw new CliError(
          'FLEET_UNAVAILABLE',
          `the orchestrator is not built: ${entry('orchestrator')} is missing (run pnpm build)`,
        );

      const env: Record<string, string> = {};
      for (const [key, value] of Object.entries(io.env)) if (value !== undefined) env[key] = value;
      env.FLEET_CONFIG = configPath;
      if (!env.FLEET_TOKEN && state?.fleetToken) env.FLEET_TOKEN = state.fleetToken;
      // The fleet's own queue, where its audit worker reads (an explicit AUDIT_QUEUE wins).
      if (!env.AUDIT_QUEUE && state?.auditQueue) env.AUDIT_QUEUE = state.auditQueue;
      env.AUDIT_JOURNAL ||= freeJournal(stateDir);
      const child = spawn(process.execPath, [...nodeArgs('orchestrator'), '--stdio'], {
        cwd: io.cwd,
        env,
        stdio: 'inherit',
      });
      // If this process exits first (a second signal), the session must not outlive it.
      const orphanGuard = () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      };
      process.once('exit', orphanGuard);
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
        (done, fail) => {
          child.once('error', fail);
          child.once('exit', (code, signal) => done({ code, signal }));
        },
      );
      // A signal for us (the client stopping its server) ends the session cleanly.
      void io.untilInterrupted?.().then(() => child.kill('SIGTERM'));
      const { code, signal } = await exited.finally(() => process.off('exit', orphanGuard));
      if (code !== 0 && signal !== 'SIGTERM' && signal !== 'SIGINT')
        throw new CliError(
          'FLEET_UNAVAILABLE',
          `the orchestrator's stdio session ended with ${code === null ? `signal ${signal}` : `code ${code}`} (its reasons are above, on stderr)`,
        );
    });
}
