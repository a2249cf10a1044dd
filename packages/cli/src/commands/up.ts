/**
 * `fleet up`: the whole fleet locally, on embedded defaults, with a progress display; prints
 * the endpoints and how to point a client at them; Ctrl-C stops everything cleanly (also
 * while starting; a second Ctrl-C exits without waiting, the services still told to stop); a
 * child that dies is reported and restarted.
 */
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { type CommandContext, DEFAULT_STATE_DIR, stateDirOption } from '../context.ts';
import { CliError } from '../errors.ts';
import { assertNoLiveFleet, type FleetService, startLocalFleet } from '../fleet/local-fleet.ts';

/**
 * The endpoint summary `fleet up` prints once the fleet is ready. `stateDirArg` is the
 * `--state-dir` as given when it is not the default: the hints must name it, since the other
 * commands find this fleet (whatever its ports) through that directory's fleet.json.
 */
export function describeFleet(
  fleet: { mcpUrl: string; adminUrl: string; viewerUrl: string; stateDir: string },
  stateDirArg?: string,
): string {
  const state =
    stateDirArg === undefined
      ? ''
      : ` --state-dir ${/[\s"'$]/.test(stateDirArg) ? JSON.stringify(stateDirArg) : stateDirArg}`;
  const hint = (command: string, comment: string) =>
    `  ${`${command}${state}`.padEnd(40)}  # ${comment}`;
  return [
    '',
    'The fleet is up.',
    '',
    `  MCP endpoint (give this to your client)  ${fleet.mcpUrl}`,
    `  Audit trail viewer                       ${fleet.viewerUrl}`,
    `  Admin API                                ${fleet.adminUrl}`,
    '',
    'Try it:',
    hint('fleet demo', 'a guided tour against this fleet'),
    `  npx @modelcontextprotocol/inspector --cli ${fleet.mcpUrl} --method tools/list`,
    hint('fleet chain --event tools/call', 'what runs on a tool call'),
    hint('fleet audit query --since 10m', 'what happened'),
    '',
    `Logs: ${fleet.stateDir}/logs/<service>.log   Stop: Ctrl-C`,
    '',
  ].join('\n');
}

/** Add `up` to `program`. */
export function addUpCommand(program: Command, context: CommandContext): Command {
  return program
    .command('up')
    .description('run the whole fleet locally (orchestrator, interceptors, audit, demo backend)')
    .option('--config <file>', 'orchestrator config to use instead of the generated one')
    .option('--port <port>', 'orchestrator port', '8080')
    .addOption(
      stateDirOption(
        'where fleet.json (read by the other commands), logs, the generated config and PGlite data go',
      ),
    )
    .action(
      async (options: { config?: string; port: string; stateDir: string }, command: Command) => {
        const { io } = context;
        const port = /^\d{1,5}$/.test(options.port.trim()) ? Number(options.port) : Number.NaN;
        if (!(port >= 0 && port <= 65535))
          throw new CliError('USAGE', `--port must be 0..65535, got "${options.port}"`);
        const json = context.globals(command).json;
        const say = (text: string) => {
          if (!json) io.stdout(text);
        };
        const stateDir = resolve(io.cwd, options.stateDir);
        // Before the first line of progress (startLocalFleet checks again).
        assertNoLiveFleet(stateDir);
        say('Starting the fleet...\n');
        // Listen from now on: Ctrl-C while the fleet starts stops what has started.
        const interrupted = io.untilInterrupted?.();
        const startup = new AbortController();
        void interrupted?.then((signal) => startup.abort(signal));
        const fleet = await startLocalFleet({
          port,
          signal: startup.signal,
          env: io.env,
          stateDir,
          ...(options.config ? { configPath: resolve(io.cwd, options.config) } : {}),
          events: {
            starting: (service: FleetService) => say(`  … ${service}\n`),
            ready: (service, url, ms) =>
              say(`  ✓ ${service.padEnd(17)} ${url}  (${(ms / 1000).toFixed(1)} s)\n`),
            exited: (service, code, signal, restarting) =>
              io.stderr(
                `  ✗ ${service} exited (code ${code ?? '-'}, signal ${signal ?? '-'})${restarting ? '; restarting' : ''}\n`,
              ),
          },
        });
        if (json)
          io.stdout(
            `${JSON.stringify({ mcpUrl: fleet.mcpUrl, adminUrl: fleet.adminUrl, viewerUrl: fleet.viewerUrl, urls: fleet.urls })}\n`,
          );
        else
          io.stdout(
            describeFleet(
              fleet,
              resolve(io.cwd, options.stateDir) === resolve(io.cwd, DEFAULT_STATE_DIR)
                ? undefined
                : options.stateDir,
            ),
          );
        const signal = interrupted ? await interrupted : 'no interrupt handler';
        say(`\n${signal}: stopping the fleet...\n`);
        await fleet.stop();
        say('Stopped.\n');
      },
    );
}
