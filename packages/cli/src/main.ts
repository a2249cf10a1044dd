#!/usr/bin/env node
/**
 * The `fleet` executable: the only place that touches the real process (arguments,
 * environment, standard streams, exit code).
 */
import { runProgram } from './program.ts';

process.exitCode = await runProgram(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  cwd: process.cwd(),
  fetch: globalThis.fetch,
  untilInterrupted: () =>
    new Promise((resolve) => {
      process.once('SIGINT', () => resolve('SIGINT'));
      process.once('SIGTERM', () => resolve('SIGTERM'));
    }),
});
// Children and sockets may linger after a command such as `fleet demo`; the exit code is final.
process.exit(process.exitCode);
