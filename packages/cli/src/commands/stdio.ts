/**
 * `fleet stdio`: one MCP session on stdin/stdout through the chain of the fleet `fleet up`
 * runs, for desktop clients that spawn their MCP servers (Claude Desktop and the like). It
 * runs the orchestrator's stdio mode (`main.js --stdio`) with the configuration and the
 * interceptor token `fleet up` left in its state directory, so the session shares that
 * fleet's interceptor services, runtime registrations and audit trail (its records go to the
 * fleet's audit queue, which fleet.json names). Several sessions may
 * run at once (a desktop client per user, say), also started at the same moment: each gets
 * an audit journal of its own.
 *
 * stdout is the MCP channel: nothing but the orchestrator writes to it.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { makeDirectory } from '@fleet/audit/directory';
import { processAlive } from '@fleet/audit/lock';
import type { Command } from 'commander';
import { type CommandContext, DEFAULT_STATE_DIR, stateDirOption } from '../context.ts';
import { CliError } from '../errors.ts';
import { entry, nodeArgs, REPO_ROOT, readFleetState } from '../fleet/local-fleet.ts';
import { shellWord } from '../hints.ts';
import { claimJournal } from '../journal-claim.ts';
import { nonEmpty } from '../option-values.ts';

/** Add `stdio` to `program`. */
export function addStdioCommand(program: Command, context: CommandContext): Command {
  return program
    .command('stdio')
    .description(
      'serve one MCP session on stdin/stdout through the running fleet (for desktop clients)',
    )
    .addOption(stateDirOption())
    .option(
      '--config <file>',
      'orchestrator config to use instead of the fleet’s',
      nonEmpty('--config', 'an orchestrator config file', 'the fleet’s'),
    )
    .addHelpText(
      'after',
      () =>
        `\nA desktop client starts its servers from a directory of its own: give --state-dir as an\nabsolute path. For the fleet of this directory, with the CLI built (pnpm build):\n  ${[process.execPath, join(REPO_ROOT, 'packages/cli/dist/main.js'), 'stdio', '--state-dir', resolve(context.io.cwd, DEFAULT_STATE_DIR)].map(shellWord).join(' ')}`,
    )
    .action(async (options: { config?: string }, command: Command) => {
      const { io } = context;
      const stateDir = context.stateDir(command);
      const state = readFleetState(stateDir);
      const up = context.hint(command, 'up');
      let configPath: string;
      if (options.config) {
        configPath = resolve(io.cwd, options.config);
      } else {
        if (!state)
          throw new CliError(
            'FLEET_UNAVAILABLE',
            `no fleet in ${stateDir}: start one with \`${up}\` (or pass --config)`,
          );
        if (state.pid !== undefined && !processAlive(state.pid))
          throw new CliError(
            'FLEET_UNAVAILABLE',
            `the fleet in ${stateDir} is not running (its \`fleet up\`, pid ${state.pid}, is gone): start it with \`${up}\``,
          );
        // The config the fleet's orchestrator runs: its `--config`, or the one it generated.
        configPath = state.configPath ?? join(stateDir, 'fleet.yaml');
      }
      if (!existsSync(configPath))
        throw new CliError(
          'FLEET_UNAVAILABLE',
          options.config
            ? `the config ${configPath} does not exist: pass an orchestrator config file as --config`
            : `the fleet in ${stateDir} has no orchestrator config at ${configPath}: restart it with \`${up}\`, or pass --config`,
        );
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
      if (!env.AUDIT_JOURNAL) {
        // Here, before the session's journal is claimed in it, so that a state directory that
        // cannot be created is reported as such (with --state-dir), not as an AUDIT_JOURNAL.
        try {
          makeDirectory(stateDir);
        } catch (error) {
          throw new CliError(
            'FLEET_UNAVAILABLE',
            `the state directory ${stateDir} cannot be created (${(error as Error).message}): the session's audit journal goes there; pass another --state-dir, or set AUDIT_JOURNAL`,
            { cause: error },
          );
        }
      }
      const journal = env.AUDIT_JOURNAL ? undefined : claimJournal(stateDir);
      if (journal) env.AUDIT_JOURNAL = journal.path;
      const child = spawn(process.execPath, [...nodeArgs('orchestrator'), '--stdio'], {
        cwd: io.cwd,
        env,
        stdio: 'inherit',
      });
      // If this process exits first (a second signal), the session must not outlive it.
      const orphanGuard = () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        journal?.release();
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
      const { code, signal } = await exited.finally(() => {
        process.off('exit', orphanGuard);
        journal?.release();
      });
      if (code !== 0 && signal !== 'SIGTERM' && signal !== 'SIGINT')
        throw new CliError(
          'FLEET_UNAVAILABLE',
          `the orchestrator's stdio session ended with ${code === null ? `signal ${signal}` : `code ${code}`} (its reasons are above, on stderr)`,
        );
    });
}
