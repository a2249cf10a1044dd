/**
 * What every command module gets: the IO, the resolved global options, an admin client and
 * one way to print (tables for people, raw JSON with `--json`).
 */
import type { Command } from 'commander';
import { type AdminClient, createAdminClient } from './admin-client.ts';
import { CliError } from './errors.ts';
import type { CliIO, GlobalOptions } from './types.ts';

/** The orchestrator URL when neither `--orchestrator` nor `FLEET_ORCHESTRATOR_URL` is set. */
export const DEFAULT_ORCHESTRATOR_URL = 'http://127.0.0.1:8080';

/** Shared by the command modules; see {@link createCommandContext}. */
export interface CommandContext {
  readonly io: CliIO;
  /** The global options as seen from `command` (flags win over the environment). */
  globals(command: Command): GlobalOptions;
  /** An admin API client for `command`'s `--orchestrator` and `--admin-token`. */
  admin(command: Command): AdminClient;
  /** Print `value` as indented JSON with `--json`, else the text `human()` returns. */
  print(command: Command, value: unknown, human: () => string): void;
}

/** The orchestrator URL the environment asks for (`FLEET_ORCHESTRATOR_URL`), or the default. */
export function defaultOrchestratorUrl(env: CliIO['env']): string {
  const fromEnv = env.FLEET_ORCHESTRATOR_URL?.trim();
  return fromEnv ? fromEnv : DEFAULT_ORCHESTRATOR_URL;
}

function checkOrchestratorUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(
      'USAGE',
      `--orchestrator "${raw}" is not a URL (e.g. ${DEFAULT_ORCHESTRATOR_URL})`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError('USAGE', `--orchestrator "${raw}" must be an http(s) URL`);
  }
  return raw.replace(/\/+$/, '');
}

/** Build the context the command modules share. */
export function createCommandContext(io: CliIO): CommandContext {
  const globals = (command: Command): GlobalOptions => {
    const opts = command.optsWithGlobals<{
      orchestrator?: string;
      adminToken?: string;
      json?: boolean;
    }>();
    const token = opts.adminToken ?? io.env.FLEET_ADMIN_TOKEN;
    return {
      orchestrator: checkOrchestratorUrl(opts.orchestrator ?? defaultOrchestratorUrl(io.env)),
      adminToken: token === undefined || token === '' ? undefined : token,
      json: opts.json === true,
    };
  };
  return {
    io,
    globals,
    admin(command) {
      const { orchestrator, adminToken } = globals(command);
      return createAdminClient({ baseUrl: orchestrator, token: adminToken, fetch: io.fetch });
    },
    print(command, value, human) {
      io.stdout(globals(command).json ? `${JSON.stringify(value, null, 2)}\n` : human());
    },
  };
}
