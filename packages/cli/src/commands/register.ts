/** `fleet register <url>`: add an interceptor service through the admin API. */
import type { Command } from 'commander';
import type { CommandContext } from '../context.ts';
import { CliError } from '../errors.ts';
import { buildOverrides, type OverrideAssignment, parseOverrideAssignment } from '../overrides.ts';
import { formatTable } from '../table.ts';
import { formatHooks, formatPriority } from './format.ts';

function collectOverride(text: string, previous: OverrideAssignment[]): OverrideAssignment[] {
  return [...previous, parseOverrideAssignment(text)];
}

/** Add `register` to `program`. */
export function addRegisterCommand(program: Command, context: CommandContext): Command {
  return program
    .command('register')
    .description('register an interceptor service with the orchestrator')
    .argument('<url>', "the service's MCP endpoint, e.g. http://127.0.0.1:8090/mcp")
    .option(
      '--token <token>',
      'bearer token the orchestrator sends to the service (its FLEET_TOKEN)',
    )
    .option(
      '--override <name.key=value>',
      'per-interceptor override (mode, failOpen, priorityHint, timeoutMs, hooks as JSON); repeatable',
      collectOverride,
      [] as OverrideAssignment[],
    )
    .action(
      async (
        url: string,
        options: { token?: string; override: OverrideAssignment[] },
        command: Command,
      ) => {
        if (!/^https?:\/\/[^/]/.test(url)) {
          throw new CliError(
            'USAGE',
            `"${url}" is not an http(s) URL (e.g. http://127.0.0.1:8090/mcp)`,
          );
        }
        const overrides =
          options.override.length > 0 ? buildOverrides(options.override) : undefined;
        const { created, service } = await context.admin(command).register({
          url,
          ...(options.token ? { token: options.token } : {}),
          ...(overrides ? { overrides } : {}),
        });
        context.print(command, service, () => {
          const heading = `${created ? 'registered' : 'already registered'} ${service.id} (${service.url})\n`;
          const table = formatTable(
            ['NAME', 'TYPE', 'MODE', 'PRIORITY', 'HOOKS'],
            service.interceptors.map((i) => [
              i.name,
              i.type,
              i.mode ?? 'active',
              formatPriority(i.priorityHint),
              formatHooks(i.hooks),
            ]),
          );
          const hook = service.interceptors[0]?.hooks[0];
          const event = hook?.events.find((e) => !e.includes('*')) ?? 'tools/call';
          const hint = `fleet chain --event ${event} --phase ${hook?.phase ?? 'request'}`;
          return `${heading}${table}see where it runs: ${hint}\n`;
        });
      },
    );
}
