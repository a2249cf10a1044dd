/**
 * The `fleet …` command lines the CLI prints as hints, written so that they work as printed:
 * with the command the user actually ran (`pnpm fleet` in the workspace, where no `fleet` is
 * on PATH) and the `--state-dir` they gave, through which the command finds the same fleet.
 */
import { basename, isAbsolute, relative, sep } from 'node:path';

/** The command line of an installed `fleet` bin, and of a CLI whose launch is unknown. */
export const FLEET_BIN = 'fleet';

/** What {@link launchCommand} looks at: how this process was started. */
export interface LaunchFacts {
  /** The environment (`npm_lifecycle_script` and `npm_config_user_agent` of a package script). */
  env: Readonly<Record<string, string | undefined>>;
  /** The script node runs (`process.argv[1]`): a bin's path, or `.../cli/dist/main.js`. */
  script: string | undefined;
  /** The working directory, against which a script path is shown. */
  cwd: string;
}

/** `text` as one POSIX shell word: as it is when it needs no quoting, else in single quotes. */
export function shellWord(text: string): string {
  return /^[\w./:@%+=,-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}

/**
 * How to run `fleet` again the way this process was started, for hints: `pnpm fleet` (or
 * `npm run fleet --`, `yarn fleet`) when a package script of the workspace ran the CLI from
 * source (`pnpm fleet`, `pnpm start`), `node <path>` when node ran the CLI's script by its
 * path, else `fleet` (an installed bin: a link named `fleet`, or a package manager's shim
 * into `node_modules`).
 */
export function launchCommand({ env, script, cwd }: LaunchFacts): string {
  if (env.npm_lifecycle_script?.includes('packages/cli/src/main.ts')) {
    const manager = env.npm_config_user_agent?.split('/')[0];
    if (manager === 'npm') return 'npm run fleet --';
    return `${manager === 'yarn' ? 'yarn' : 'pnpm'} fleet`;
  }
  if (script === undefined || script.split(sep).includes('node_modules')) return FLEET_BIN;
  const name = basename(script);
  // Source needs the workspace's loader and export conditions: its `fleet` script has them.
  if (name === 'main.ts') return 'pnpm fleet';
  if (name !== 'main.js') return FLEET_BIN;
  const shown = relative(cwd, script);
  return `node ${shellWord(shown.startsWith('..') || isAbsolute(shown) ? script : shown)}`;
}

/** `<launcher> <words>`, followed by `--state-dir <dir>` when `stateDir` is given. */
export function fleetCommandLine(launcher: string, words: string, stateDir?: string): string {
  return `${launcher} ${words}${stateDir === undefined ? '' : ` --state-dir ${shellWord(stateDir)}`}`;
}
