/** `fleet unregister <id>`: remove a registration made through the admin API. */
import type { Command } from 'commander';
import type { CommandContext } from '../context.ts';

/** Add `unregister` to `program`. */
export function addUnregisterCommand(program: Command, context: CommandContext): Command {
  return program
    .command('unregister')
    .description('remove an interceptor service registered at runtime')
    .argument('<id>', 'the service id, as `fleet services` shows it')
    .action(async (id: string, _options: unknown, command: Command) => {
      await context.admin(command).unregister(id);
      context.print(command, { id, unregistered: true }, () => `unregistered ${id}\n`);
    });
}
