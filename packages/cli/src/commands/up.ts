/**
 * `fleet up`: the whole fleet locally, on embedded defaults, with a progress display; prints
 * the endpoints and how to point a client at them; Ctrl-C stops everything cleanly (also
 * while starting; a second Ctrl-C exits without waiting, the services still told to stop); a
 * child that dies is reported and restarted.
 */
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { type CommandContext, stateDirOption } from '../context.ts';
import { CliError } from '../errors.ts';
import { checkFleetCanStart, type FleetService, startLocalFleet } from '../fleet/local-fleet.ts';
import { fetchRefusesPort } from '../http-url.ts';
import { nonEmpty } from '../option-values.ts';

/**
 * The endpoint summary `fleet up` prints once the fleet is ready. `hint` writes a `fleet …`
 * command line that works as printed (the CLI as launched; `--state-dir` when it is not the
 * default, since the other commands find this fleet, whatever its ports, through it).
 */
export function describeFleet(
  fleet: { mcpUrl: string; adminUrl: string; viewerUrl: string; stateDir: string },
  hint: (words: string) => string,
): string {
  const tries: Array<[string, string]> = [
    [hint('demo'), 'a guided tour against this fleet'],
    [hint('chain --event tools/call'), 'what runs on a tool call'],
    [hint('audit query --since 10m'), 'what happened'],
  ];
  // Comments line up, however long the state directory makes the command lines.
  const width = Math.max(40, ...tries.map(([line]) => line.length));
  const [demo = '', chain = '', audit = ''] = tries.map(
    ([line, comment]) => `  ${line.padEnd(width)}  # ${comment}`,
  );
  return [
    '',
    'The fleet is up.',
    '',
    `  MCP endpoint (give this to your client)  ${fleet.mcpUrl}`,
    `  Audit trail viewer                       ${fleet.viewerUrl}`,
    `  Admin API                                ${fleet.adminUrl}`,
    '',
    'Try it:',
    demo,
    `  npx @modelcontextprotocol/inspector --cli ${fleet.mcpUrl} --method tools/list`,
    chain,
    audit,
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
    .option(
      '--config <file>',
      'orchestrator config to use instead of the generated one',
      nonEmpty('--config', 'an orchestrator config file', 'the generated one'),
    )
    .option('--port <port>', 'orchestrator port (0: a free one)', '8080')
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
        const refused = fetchRefusesPort(port);
        if (refused)
          throw new CliError(
            'USAGE',
            `--port ${port}: ${refused}, so the other fleet commands and web clients could not reach the gateway; use another port`,
          );
        const json = context.globals(command).json;
        const say = (text: string) => {
          if (!json) io.stdout(text);
        };
        const stateDir = resolve(io.cwd, options.stateDir);
        const configPath = options.config ? resolve(io.cwd, options.config) : undefined;
        // Before the first line of progress (startLocalFleet checks again).
        await checkFleetCanStart({ env: io.env, stateDir, configPath, port });
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
          ...(configPath ? { configPath } : {}),
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
            `${JSON.stringify({ mcpUrl: fleet.mcpUrl, adminUrl: fleet.adminUrl, viewerUrl: fleet.viewerUrl, urls: fleet.urls, auditQueue: fleet.auditQueue })}\n`,
          );
        else io.stdout(describeFleet(fleet, (words) => context.hint(command, words)));
        const signal = interrupted ? await interrupted : 'no interrupt handler';
        say(`\n${signal}: stopping the fleet...\n`);
        await fleet.stop();
        say('Stopped.\n');
      },
    );
}
