/** Benchmark peer: the fixture MCP backend (has an `echo` tool) over Streamable HTTP. */
import { startHttpBackend } from '@fleet/test-fixtures';

const backend = await startHttpBackend({ name: 'bench' });
process.stdout.write(`${JSON.stringify({ service: 'bench-backend', url: backend.url })}\n`);
process.on('SIGTERM', () => {
  void backend.close().then(() => process.exit(0));
});
