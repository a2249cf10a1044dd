#!/usr/bin/env node
/**
 * The `fleet` executable: the only place that touches the real process (arguments,
 * environment, standard streams, exit code).
 */
import { launchCommand } from './hints.ts';
import { runProgram } from './program.ts';

/** A second signal sooner than this after the first is the same interrupt delivered twice. */
const SAME_INTERRUPT_MS = 500;

/**
 * Resolves once what was written to `stream` before has left the process (or cannot: the
 * reader is gone). Writes to a pipe are asynchronous: what the pipe's buffer (64 KiB) does
 * not take at once waits in the process, and `process.exit()` would drop it.
 */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => {
    stream.once('error', () => resolve());
    // Callbacks run in write order: this one after every earlier write has been handed over.
    stream.write('', () => resolve());
  });
}

process.exitCode = await runProgram(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stdoutDrained: () =>
    process.stdout.writableNeedDrain
      ? new Promise<void>((resolve) => {
          const done = () => {
            process.stdout.off('drain', done);
            process.stdout.off('error', done);
            resolve();
          };
          process.stdout.once('drain', done);
          process.stdout.once('error', done);
        })
      : Promise.resolve(),
  stderr: (text) => process.stderr.write(text),
  stderrIsTTY: process.stderr.isTTY === true,
  env: process.env,
  cwd: process.cwd(),
  fetch: globalThis.fetch,
  launcher: launchCommand({ env: process.env, script: process.argv[1], cwd: process.cwd() }),
  untilInterrupted: () =>
    new Promise((resolve) => {
      let firstAt: number | undefined;
      const onSignal = (signal: NodeJS.Signals) => {
        if (firstAt === undefined) {
          firstAt = performance.now();
          resolve(signal);
          return;
        }
        // The same interrupt often arrives twice within milliseconds: from the terminal to
        // the whole process group, and again from a wrapper passing it on (tsx, which
        // `pnpm start` runs, does so ~40 ms later). That is not the user asking again.
        if (performance.now() - firstAt < SAME_INTERRUPT_MS) return;
        // Asked again while stopping: stop waiting. The exit handlers still run (the local
        // fleet sends SIGTERM to every service still running from one), so nothing is left.
        process.stderr.write(`\n${signal} again: exiting without waiting for the services\n`);
        process.exit(signal === 'SIGINT' ? 130 : 143);
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    }),
});
// Children and sockets may linger after a command such as `fleet demo`; the exit code is final,
// but the output must reach a pipe (`fleet audit query --json | jq`) in full first.
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
process.exit(process.exitCode);
