/**
 * The `fleet` program: global options, one module per command (`src/commands/<name>.ts`,
 * each exporting `add<Name>Command(program, context)`), and {@link runProgram}, which turns
 * every outcome into an exit code: 0 success, 1 an API or runtime failure, 2 a usage error.
 */
import { Command, CommanderError } from 'commander';
import { addAuditCommand } from './commands/audit.ts';
import { addChainCommand } from './commands/chain.ts';
import { addDemoCommand } from './commands/demo.ts';
import { addNewCommand } from './commands/new.ts';
import { addPinsCommand } from './commands/pins.ts';
import { addRegisterCommand } from './commands/register.ts';
import { addServicesCommand } from './commands/services.ts';
import { addStdioCommand } from './commands/stdio.ts';
import { addUnregisterCommand } from './commands/unregister.ts';
import { addUpCommand } from './commands/up.ts';
import { type CommandContext, createCommandContext } from './context.ts';
import { CliError, formatDetails } from './errors.ts';
import { FLEET_BIN } from './hints.ts';
import { nonEmpty } from './option-values.ts';
import type { CliIO } from './types.ts';

/** A command module: adds its command (and subcommands) to the program. */
export type CommandModule = (program: Command, context: CommandContext) => Command;

/** The commands, in help order; each gets the same IO, global options and error handling. */
export const COMMAND_MODULES: readonly CommandModule[] = [
  addUpCommand,
  addDemoCommand,
  addStdioCommand,
  addRegisterCommand,
  addUnregisterCommand,
  addServicesCommand,
  addChainCommand,
  addNewCommand,
  addAuditCommand,
  addPinsCommand,
];

/** The version `fleet --version` prints. */
export const CLI_VERSION = '0.1.0';

/** Exit code of a usage error (commander's own errors included). */
export const USAGE_EXIT_CODE = 2;

/** Options for {@link createProgram}. */
export interface ProgramOptions {
  /**
   * Usage errors as one JSON line on stderr (`{"error", "code": "USAGE"}`), as `--json` asks
   * for every error, with no help text around them. Default false.
   */
  jsonErrors?: boolean;
}

/** A usage error as `--json` prints it. */
function jsonUsageError(message: string): string {
  return `${JSON.stringify({ error: message, code: 'USAGE' })}\n`;
}

/** What commander prints as an error (`error: ...`, maybe a suggestion below) as one line. */
function commanderMessage(text: string): string {
  return text
    .replace(/^error: /, '')
    .trim()
    .replace(/\s*\n\s*/g, ' ');
}

/**
 * Build the `fleet` program around `io`. Commander never exits the process or writes to the
 * real streams: errors are thrown (`exitOverride`) and output goes to `io`.
 */
export function createProgram(io: CliIO, options: ProgramOptions = {}): Command {
  const { jsonErrors = false } = options;
  const program = new Command('fleet');
  // Settings first: subcommands copy them when they are created.
  program
    .description(
      'Interceptor Fleet: run the fleet locally, tour it, serve desktop clients over stdio, register interceptors, inspect the chain, query the audit trail, review tool pins',
    )
    .version(CLI_VERSION, '-V, --version')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout(text),
      // Commander writes help shown for an error here too; --json keeps only the error.
      writeErr: (text) => {
        if (!jsonErrors) io.stderr(text);
      },
      outputError: (text, write) =>
        jsonErrors ? io.stderr(jsonUsageError(commanderMessage(text))) : write(text),
    })
    .showHelpAfterError('(run with --help for usage)')
    .option(
      '--orchestrator <url>',
      'orchestrator base URL (default: $FLEET_ORCHESTRATOR_URL, else the running fleet of --state-dir, else http://127.0.0.1:8080)',
    )
    .option(
      '--admin-token <token>',
      "bearer token for the admin API (default: $FLEET_ADMIN_TOKEN, else the running fleet's when its fleet.json gave the orchestrator URL)",
      nonEmpty('--admin-token', 'the bearer token', "$FLEET_ADMIN_TOKEN or the running fleet's"),
    )
    .option('--json', 'print raw JSON instead of tables (errors as one JSON line on stderr)');
  // A command with subcommands given none (`fleet`, `fleet audit`): commander shows its help
  // as an error; say what is missing under it.
  program.addHelpText('afterAll', ({ error, command }) => {
    if (!error) return '';
    const names = command.commands.map((c) => c.name()).filter((name) => name !== 'help');
    const path = [io.launcher ?? FLEET_BIN, ...commandPath(command)].join(' ');
    const message = `${path} needs a command: ${names.join(', ')}`;
    if (!jsonErrors) return `\nerror: ${message}`;
    io.stderr(jsonUsageError(message));
    return '';
  });

  const context = createCommandContext(io);
  for (const addCommand of COMMAND_MODULES) addCommand(program, context);
  return program;
}

/** The words after `fleet` that name `command` (`['audit', 'query']`; none for the program). */
function commandPath(command: Command): string[] {
  const words: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) words.unshift(c.name());
  return words;
}

function report(io: CliIO, error: CliError, json: boolean): void {
  if (json) {
    const body: Record<string, unknown> = { error: error.message, code: error.code };
    if (error.status !== undefined) body.status = error.status;
    if (error.details !== undefined) body.details = error.details;
    io.stderr(`${JSON.stringify(body)}\n`);
    return;
  }
  const details = formatDetails(error.details).map((line) => `  ${line}\n`);
  io.stderr(`error: ${error.message}\n${details.join('')}`);
}

/** Global options that take a value (their value is not a command name). */
const GLOBAL_VALUE_OPTIONS = new Set(['--orchestrator', '--admin-token']);

/**
 * What `argv` holds before commander parses it: its words (neither options nor the values of
 * the global options, up to `--`) and whether `--json` is among its options.
 */
function scanArguments(argv: readonly string[]): { words: string[]; json: boolean } {
  const words: string[] = [];
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--') break;
    if (arg.startsWith('-')) {
      if (GLOBAL_VALUE_OPTIONS.has(arg)) i++;
      if (arg === '--json') json = true;
      continue;
    }
    words.push(arg);
  }
  return { words, json };
}

/**
 * The command path `fleet help <path...>` asks about that does not exist (`nosuch`, or
 * `audit nosuch`), or undefined. Commander would print the main help for it, with no word
 * about the unknown name.
 */
function unknownHelpTopic(program: Command, words: readonly string[]): string | undefined {
  if (words[0] !== 'help') return undefined;
  let command: Command | undefined = program;
  for (const [index, word] of words.slice(1).entries()) {
    if (word === 'help') return undefined;
    command = command?.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (!command) return words.slice(1, index + 2).join(' ');
  }
  return undefined;
}

/**
 * Run `fleet` with `argv` (the arguments after the program name) and resolve to the exit
 * code; never rejects.
 */
export async function runProgram(argv: readonly string[], io: CliIO): Promise<number> {
  const scanned = scanArguments(argv);
  const program = createProgram(io, { jsonErrors: scanned.json });
  const unknownTopic = unknownHelpTopic(program, scanned.words);
  if (unknownTopic !== undefined) {
    const message = `unknown command '${unknownTopic}'`;
    io.stderr(
      scanned.json ? jsonUsageError(message) : `error: ${message}\n(run with --help for usage)\n`,
    );
    return USAGE_EXIT_CODE;
  }
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (error) {
    // Commander has already printed its message (through io.stderr).
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : USAGE_EXIT_CODE;
    const json = program.opts<{ json?: boolean }>().json === true;
    if (error instanceof CliError) {
      report(io, error, json);
      return error.exitCode;
    }
    const message = error instanceof Error ? error.message : String(error);
    io.stderr(
      json ? `${JSON.stringify({ error: message, code: 'UNEXPECTED' })}\n` : `error: ${message}\n`,
    );
    return 1;
  }
}
