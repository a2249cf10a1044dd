/** `fleet register <url>`: add (or replace) an interceptor service through the admin API. */
import type { Command } from 'commander';
import type { AdminInterceptorInfo } from '../admin-client.ts';
import { type CommandContext, stateDirOption } from '../context.ts';
import { parseHttpUrl } from '../http-url.ts';
import { nonEmpty } from '../option-values.ts';
import { buildOverrides, type OverrideAssignment, parseOverrideAssignment } from '../overrides.ts';
import { formatTable } from '../table.ts';
import { formatHooks, formatOverrides, formatPriority } from './format.ts';

function collectOverride(text: string, previous: OverrideAssignment[]): OverrideAssignment[] {
  return [...previous, parseOverrideAssignment(text)];
}

/** The register table's columns: one per overridable setting, so every override has a cell. */
const HEADERS = ['NAME', 'TYPE', 'MODE', 'PRIORITY', 'FAIL-OPEN', 'TIMEOUT', 'HOOKS'];

/**
 * One table row: the interceptor as it runs with `overrides` applied (an overridden cell ends
 * in `*`), since a registration's overrides win over what the service declares. A timeout
 * no override sets is the chain's (`-`, as `fleet chain` shows it).
 */
function effectiveRow(info: AdminInterceptorInfo, overrides: Record<string, unknown>): string[] {
  const mark = (key: string, shown: string) => (key in overrides ? `${shown}*` : shown);
  const timeoutMs = overrides.timeoutMs;
  return [
    info.name,
    info.type,
    mark('mode', String(overrides.mode ?? info.mode ?? 'active')),
    mark(
      'priorityHint',
      formatPriority(
        (overrides.priorityHint as AdminInterceptorInfo['priorityHint']) ?? info.priorityHint,
      ),
    ),
    mark('failOpen', (overrides.failOpen ?? info.failOpen) === true ? 'yes' : 'no'),
    mark('timeoutMs', timeoutMs === undefined ? '-' : `${String(timeoutMs)} ms`),
    mark(
      'hooks',
      formatHooks((overrides.hooks as AdminInterceptorInfo['hooks'] | undefined) ?? info.hooks),
    ),
  ];
}

/** Add `register` to `program`. */
export function addRegisterCommand(program: Command, context: CommandContext): Command {
  return program
    .command('register')
    .description(
      'register an interceptor service with the orchestrator (again: replace its token and overrides)',
    )
    .argument('<url>', "the service's MCP endpoint, e.g. http://127.0.0.1:8090/mcp")
    .option(
      '--token <token>',
      'bearer token the orchestrator sends to the service (its FLEET_TOKEN)',
      nonEmpty('--token', "the service's token", 'none'),
    )
    .option(
      '--override <name.key=value>',
      'per-interceptor override (mode, failOpen, priorityHint, timeoutMs, hooks as JSON); repeatable',
      collectOverride,
      [] as OverrideAssignment[],
    )
    .addOption(stateDirOption())
    .action(
      async (
        url: string,
        options: { token?: string; override: OverrideAssignment[] },
        command: Command,
      ) => {
        parseHttpUrl(url, 'the service URL', 'http://127.0.0.1:8090/mcp');
        const overrides =
          options.override.length > 0 ? buildOverrides(options.override) : undefined;
        const { created, service } = await context.admin(command).register({
          url,
          ...(options.token ? { token: options.token } : {}),
          ...(overrides ? { overrides } : {}),
        });
        context.print(command, service, () => {
          const fromConfig = !created && service.source === 'config';
          const named = `${service.id} (${service.url})`;
          // What the orchestrator says is in force when it answers with it, else what was sent.
          const sent = service.overrides ?? overrides ?? {};
          const tokenSet = service.hasToken ?? Boolean(options.token);
          const overridden = Object.entries(sent)
            .map(([name, values]) => `${name}: ${formatOverrides(values)}`)
            .join('; ');
          const heading = created
            ? `registered ${named}\n`
            : fromConfig
              ? `${named} comes from the orchestrator's config file: the config entry was left unchanged (--token and --override are not applied; edit the config instead)\n`
              : `updated ${named}: its registration was replaced (token ${tokenSet ? 'set' : 'none'}, overrides ${overridden || 'none'})\n`;
          const applied = fromConfig ? {} : sent;
          const table = formatTable(
            HEADERS,
            service.interceptors.map((i) => effectiveRow(i, applied[i.name] ?? {})),
          );
          // Every overridable setting has a column; the legend stands under a marked cell only.
          const marked = service.interceptors.some(
            (i) => Object.keys(applied[i.name] ?? {}).length > 0,
          );
          const notes = [
            ...(marked ? ['* set by --override'] : []),
            ...(fromConfig
              ? [
                  `as the service declares them; the config's overrides apply on top (${context.hint(command, 'chain')} shows what runs)`,
                ]
              : []),
          ].map((line) => `${line}\n`);
          const hook = service.interceptors[0]?.hooks[0];
          const event = hook?.events.find((e) => !e.includes('*')) ?? 'tools/call';
          const hint = context.hint(
            command,
            `chain --event ${event} --phase ${hook?.phase ?? 'request'}`,
          );
          return `${heading}${table}${notes.join('')}see where it runs: ${hint}\n`;
        });
      },
    );
}
