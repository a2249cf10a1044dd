/** `fleet unregister <id>`: remove a registration made through the admin API. */
import type { Command } from 'commander';
import { type CommandContext, stateDirOption } from '../context.ts';
import { CliError } from '../errors.ts';

/** Add `unregister` to `program`. */
export function addUnregisterCommand(program: Command, context: CommandContext): Command {
  return program
    .command('unregister')
    .description('remove an interceptor service registered at runtime')
    .argument('<id>', 'the service id, as `fleet services` shows it')
    .addOption(stateDirOption())
    .action(async (id: string, _options: unknown, command: Command) => {
      const listIds = `${context.hint(command, 'services')} lists the ids`;
      if (id.trim() === '') throw new CliError('USAGE', `the service id is empty (${listIds})`);
      try {
        await context.admin(command).unregister(id);
      } catch (error) {
        if (!(error instanceof CliError) || error.code !== 'ADMIN_API_ERROR') throw error;
        // What to do next depends on the status: an unknown id, or one from the config file.
        const next =
          error.status === 404
            ? listIds
            : error.status === 409
              ? "edit the orchestrator's config file to remove it"
              : undefined;
        if (next === undefined) throw error;
        throw new CliError(error.code, `${error.message} (${next})`, {
          status: error.status,
          details: error.details,
          cause: error,
        });
      }
      context.print(command, { id, unregistered: true }, () => `unregistered ${id}\n`);
    });
}
