/** `fleet chain`: the interceptors an (event, phase) would run, in run order. */
import { type Command, Option } from 'commander';
import { type CommandContext, stateDirOption } from '../context.ts';
import { eventName } from '../option-values.ts';
import { formatTable } from '../table.ts';

/** Add `chain` to `program`. */
export function addChainCommand(program: Command, context: CommandContext): Command {
  return program
    .command('chain')
    .description('show the interceptor chain for an event and phase, in run order')
    .option('--event <method>', 'the MCP method, e.g. resources/read', eventName, 'tools/call')
    .addOption(
      new Option('--phase <phase>', 'request or response')
        .choices(['request', 'response'])
        .default('request'),
    )
    .addOption(stateDirOption())
    .action(async (options: { event: string; phase: string }, command: Command) => {
      const view = await context.admin(command).chain(options.event, options.phase);
      context.print(command, view, () => {
        const title = `${view.event}, ${view.phase} phase`;
        const rows = view.stages.flatMap((stage, index) =>
          stage.interceptors.map((i) => [
            `${index + 1} ${stage.kind}${stage.speculative ? '*' : ''}`,
            i.name,
            i.type,
            i.mode,
            String(i.priority),
            i.failOpen ? 'yes' : 'no',
            i.timeoutMs === null || i.timeoutMs === undefined ? '-' : `${i.timeoutMs} ms`,
            i.service,
          ]),
        );
        if (rows.length === 0) {
          return `${title}: no interceptor runs${view.note ? ` (${view.note})` : ''}\n`;
        }
        const table = formatTable(
          ['STAGE', 'NAME', 'TYPE', 'MODE', 'PRIORITY', 'FAIL-OPEN', 'TIMEOUT', 'SERVICE'],
          rows,
          { align: ['left', 'left', 'left', 'left', 'right', 'left', 'right', 'left'] },
        );
        const speculative = view.stages.some((s) => s.speculative)
          ? '* started together with the validators (chain.speculativeMutators); applied only if they pass\n'
          : '';
        return `${title}\n${table}validators of a stage run in parallel; mutators run one after another, top to bottom\n${speculative}`;
      });
    });
}
