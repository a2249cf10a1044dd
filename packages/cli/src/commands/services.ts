/** `fleet services`: the interceptor services the orchestrator knows. */
import type { Command } from 'commander';
import { type CommandContext, stateDirOption } from '../context.ts';
import { formatTable } from '../table.ts';
import { formatOverrides } from './format.ts';

/** Add `services` to `program`. */
export function addServicesCommand(program: Command, context: CommandContext): Command {
  return program
    .command('services')
    .description('list the registered interceptor services')
    .addOption(stateDirOption())
    .action(async (_options: unknown, command: Command) => {
      const answer = await context.admin(command).services();
      context.print(command, answer, () => {
        const { services } = answer;
        if (services.length === 0) {
          return `no interceptor services registered (add one: ${context.hint(command, 'register <url>')})\n`;
        }
        const table = formatTable(
          ['ID', 'SOURCE', 'STATUS', 'INTERCEPTORS', 'URL'],
          services.map((s) => [
            s.id,
            s.source,
            s.status,
            s.interceptors
              .map((i) => {
                // Registry overrides (mode, failOpen, ...) win over what the service declares.
                const overrides = formatOverrides(s.overrides?.[i.name]);
                return `${i.name} (${i.type}${overrides ? `; ${overrides}` : ''})`;
              })
              .join(', ') || '-',
            s.url,
          ]),
        );
        const problems = services
          .filter((s) => s.lastError !== undefined && s.lastError !== '')
          .map((s) => `! ${s.id}: ${s.lastError}\n`);
        return `${table}${problems.join('')}`;
      });
    });
}
