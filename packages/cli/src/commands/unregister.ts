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
      if (id.trim() === '')
        throw new CliError('USAGE', 'the service id is empty (fleet services lists the ids)');
      await context.admin(command).unregister(id);
      context.print(command, { id, unregistered: true }, () => `unregistered ${id}\n`);
    });
}
