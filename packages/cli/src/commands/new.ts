/** `fleet new interceptor <name>`: scaffold an interceptor service in the workspace. */
import { relative, resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { type CommandContext, stateDirOption } from '../context.ts';
import { nonEmpty } from '../option-values.ts';
import { scaffoldInterceptor } from '../scaffold.ts';
import type { InterceptorKind } from '../types.ts';

/** Add `new` (with its `interceptor` subcommand) to `program`. */
export function addNewCommand(program: Command, context: CommandContext): Command {
  const create = program.command('new').description('create something new in the workspace');
  create
    .command('interceptor')
    .description('scaffold an interceptor service under services/<name>, built with the kit')
    .argument('<name>', 'service, package (@fleet/<name>) and interceptor name, e.g. word-guard')
    .addOption(
      new Option('--type <type>', 'what the interceptor does')
        .choices(['validation', 'mutation'])
        .default('validation'),
    )
    .option(
      '--dir <dir>',
      'the services directory of the workspace',
      nonEmpty('--dir', 'the services directory', 'services'),
      'services',
    )
    .addOption(
      stateDirOption('state directory of the running fleet the printed next steps register with'),
    )
    .action(
      async (name: string, options: { type: InterceptorKind; dir: string }, command: Command) => {
        const { io } = context;
        const result = await scaffoldInterceptor({
          name,
          type: options.type,
          servicesDir: resolve(io.cwd, options.dir),
        });
        const root = resolve(result.dir, '../..');
        const fromRoot = relative(root, result.dir);
        const rootShown = relative(io.cwd, root) || '.';
        context.print(command, result, () =>
          [
            `created ${relative(io.cwd, result.dir) || '.'}: package ${result.packageName}, ${result.type} interceptor "${result.interceptor}"`,
            ...result.files.map((file) => `  ${file}`),
            '',
            `next steps, from the repository root${rootShown === '.' ? '' : ` (${rootShown})`}:`,
            '  pnpm install',
            `  pnpm --filter ${result.packageName} test`,
            `  pnpm --filter ${result.packageName}... build`,
            `  PORT=8090 node ${fromRoot}/dist/main.js`,
            `  ${context.hint(command, 'register http://127.0.0.1:8090/mcp')}`,
            `  ${context.hint(command, 'chain')}`,
            `the whole path is in ${fromRoot}/README.md`,
            '',
          ].join('\n'),
        );
      },
    );
  return create;
}
