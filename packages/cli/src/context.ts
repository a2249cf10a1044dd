/**
 * What every command module gets: the IO, the resolved global options, an admin client and
 * one way to print (tables for people, raw JSON with `--json`).
 *
 * Where a service is found, first match wins: the command-line option, the environment
 * (`FLEET_ORCHESTRATOR_URL`, `FLEET_AUDIT_URL`, `FLEET_POLICY_URL`), the `fleet.json` of a running `fleet up` in
 * `--state-dir` (default `.fleet`), the default port on 127.0.0.1.
 */
import { resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { type AdminClient, createAdminClient } from './admin-client.ts';
import { type AuditClient, createAuditClient } from './audit-client.ts';
import { type FleetState, liveFleetState } from './fleet/local-fleet.ts';
import { FLEET_BIN, fleetCommandLine } from './hints.ts';
import { parseBaseUrl } from './http-url.ts';
import { nonEmpty } from './option-values.ts';
import { createPolicyClient, type PolicyClient } from './policy-client.ts';
import type { CliIO, GlobalOptions } from './types.ts';

/** The orchestrator URL when no option, environment or running fleet names one. */
export const DEFAULT_ORCHESTRATOR_URL = 'http://127.0.0.1:8080';
/** The audit API's URL when no option, environment or running fleet names one. */
export const DEFAULT_AUDIT_URL = 'http://127.0.0.1:8083';
/** The policy-validator's URL when no option, environment or running fleet names one. */
export const DEFAULT_POLICY_URL = 'http://127.0.0.1:8082';
/** Where `fleet up` keeps its state (`fleet.json`, logs, config, PGlite data) by default. */
export const DEFAULT_STATE_DIR = '.fleet';

/** The `--state-dir` option of every command that finds the fleet through `fleet.json`. */
export function stateDirOption(
  description = 'state directory of a running `fleet up` (its fleet.json names the services)',
): Option {
  return new Option('--state-dir <dir>', description)
    .default(DEFAULT_STATE_DIR)
    .argParser(nonEmpty('--state-dir', 'a directory', `the default, ${DEFAULT_STATE_DIR}`));
}

/** Shared by the command modules; see {@link createCommandContext}. */
export interface CommandContext {
  readonly io: CliIO;
  /** The global options as seen from `command` (flags win over the environment). */
  globals(command: Command): GlobalOptions;
  /** `command`'s `--state-dir`, resolved against the working directory. */
  stateDir(command: Command): string;
  /** The audit API's base URL for `command` (`--audit`, `FLEET_AUDIT_URL`, fleet.json, default). */
  auditUrl(command: Command): string;
  /** The same, but undefined where the default would be used. */
  auditUrl(command: Command, orDefault: false): string | undefined;
  /** An admin API client for `command`'s `--orchestrator` and `--admin-token`. */
  admin(command: Command): AdminClient;
  /**
   * An audit API client for `baseUrl` (default: {@link CommandContext.auditUrl}), with
   * `AUDIT_READ_TOKEN` when it is set.
   */
  audit(command: Command, baseUrl?: string): AuditClient;
  /**
   * A client for the policy-validator of `command` (`--policy`, `FLEET_POLICY_URL`, fleet.json,
   * default), with `FLEET_TOKEN`, else the running fleet's token when the URL came from its
   * fleet.json.
   */
  policy(command: Command): PolicyClient;
  /** Print `value` as indented JSON with `--json`, else the text `human()` returns. */
  print(command: Command, value: unknown, human: () => string): void;
  /**
   * `fleet <words>` as a hint that works as printed: the CLI as the user launched it
   * (`pnpm fleet`, ...), and the `--state-dir` they gave `command` unless it is the default.
   */
  hint(command: Command, words: string): string;
}

/** The orchestrator URL the environment asks for (`FLEET_ORCHESTRATOR_URL`), if any. */
export function orchestratorUrlFromEnv(env: CliIO['env']): string | undefined {
  const fromEnv = env.FLEET_ORCHESTRATOR_URL?.trim();
  return fromEnv ? fromEnv : undefined;
}

/**
 * What a URL error names: the option when it was given, else the environment variable when
 * it was set (the user never typed the option), else the option (fleet.json, the default).
 */
function urlSource(
  option: string | undefined,
  fromEnv: string | undefined,
  flag: string,
  variable: string,
): string {
  return option === undefined && fromEnv !== undefined ? variable : flag;
}

/** Build the context the command modules share. */
export function createCommandContext(io: CliIO): CommandContext {
  const stateDir = (command: Command): string =>
    resolve(io.cwd, command.optsWithGlobals<{ stateDir?: string }>().stateDir ?? DEFAULT_STATE_DIR);
  const runningFleet = (command: Command): FleetState | undefined =>
    liveFleetState(stateDir(command));

  const globals = (command: Command): GlobalOptions => {
    const opts = command.optsWithGlobals<{
      orchestrator?: string;
      adminToken?: string;
      json?: boolean;
    }>();
    const fromEnv = orchestratorUrlFromEnv(io.env);
    let raw = opts.orchestrator ?? fromEnv;
    let token = opts.adminToken ?? io.env.FLEET_ADMIN_TOKEN;
    if (raw === undefined) {
      const fleet = runningFleet(command);
      raw = fleet?.urls.orchestrator;
      if (raw !== undefined && !token) token = fleet?.adminToken;
    }
    return {
      orchestrator: parseBaseUrl(
        raw ?? DEFAULT_ORCHESTRATOR_URL,
        urlSource(opts.orchestrator, fromEnv, '--orchestrator', 'FLEET_ORCHESTRATOR_URL'),
        DEFAULT_ORCHESTRATOR_URL,
      ),
      adminToken: token === undefined || token === '' ? undefined : token,
      json: opts.json === true,
    };
  };
  const context: CommandContext = {
    io,
    globals,
    stateDir,
    auditUrl: ((command: Command, orDefault = true) => {
      const option = command.optsWithGlobals<{ audit?: string }>().audit;
      const fromEnv = io.env.FLEET_AUDIT_URL?.trim() || undefined;
      const raw =
        option ??
        (fromEnv ||
          runningFleet(command)?.urls['audit-logger'] ||
          (orDefault ? DEFAULT_AUDIT_URL : undefined));
      return raw === undefined
        ? undefined
        : parseBaseUrl(
            raw,
            urlSource(option, fromEnv, '--audit', 'FLEET_AUDIT_URL'),
            DEFAULT_AUDIT_URL,
          );
    }) as CommandContext['auditUrl'],
    admin(command) {
      const { orchestrator, adminToken } = globals(command);
      return createAdminClient({
        baseUrl: orchestrator,
        token: adminToken,
        fetch: io.fetch,
        startHint: context.hint(command, 'up'),
      });
    },
    audit(command, baseUrl = context.auditUrl(command)) {
      return createAuditClient({
        baseUrl,
        token: io.env.AUDIT_READ_TOKEN || undefined,
        fetch: io.fetch,
        startHint: context.hint(command, 'up'),
      });
    },
    policy(command) {
      const option = command.optsWithGlobals<{ policy?: string }>().policy;
      const fromEnv = io.env.FLEET_POLICY_URL?.trim() || undefined;
      let raw = option ?? fromEnv;
      let token = io.env.FLEET_TOKEN || undefined;
      if (raw === undefined) {
        const fleet = runningFleet(command);
        raw = fleet?.urls['policy-validator'];
        // `fleet up` gives every interceptor service the fleet's token.
        if (raw !== undefined && !token) token = fleet?.fleetToken || undefined;
      }
      return createPolicyClient({
        baseUrl: parseBaseUrl(
          raw ?? DEFAULT_POLICY_URL,
          urlSource(option, fromEnv, '--policy', 'FLEET_POLICY_URL'),
          DEFAULT_POLICY_URL,
        ),
        token,
        fetch: io.fetch,
        hint: (words) => context.hint(command, words),
      });
    },
    print(command, value, human) {
      const json = command.optsWithGlobals<{ json?: boolean }>().json === true;
      io.stdout(json ? `${JSON.stringify(value, null, 2)}\n` : human());
    },
    hint(command, words) {
      const given =
        command.getOptionValueSource('stateDir') === 'cli'
          ? command.opts<{ stateDir?: string }>().stateDir
          : undefined;
      const named =
        given !== undefined && resolve(io.cwd, given) !== resolve(io.cwd, DEFAULT_STATE_DIR);
      return fleetCommandLine(io.launcher ?? FLEET_BIN, words, named ? given : undefined);
    },
  };
  return context;
}
