#!/usr/bin/env node
/**
 * The conformance fixture as a process: `PORT` (default 0 = a free port) on 127.0.0.1.
 * Prints one start-up line `{"service":"conformance-fixture","url":"http://127.0.0.1:<port>/mcp"}`
 * and stops on SIGTERM/SIGINT.
 */
import { startConformanceFixture } from './fixture-server.ts';

const port =
  process.env.PORT === undefined || process.env.PORT === '' ? 0 : Number(process.env.PORT);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(`PORT must be an integer 0..65535, got "${process.env.PORT}"\n`);
  process.exit(1);
}

const fixture = await startConformanceFixture({ port });
process.stdout.write(`${JSON.stringify({ service: 'conformance-fixture', url: fixture.url })}\n`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  fixture.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
