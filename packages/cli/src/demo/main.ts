#!/usr/bin/env node
/** The demo backend as a process. Env: HOST (127.0.0.1), PORT (0 = free port). */
import { startDemoBackend } from './backend.ts';

const backend = await startDemoBackend({
  host: process.env.HOST || '127.0.0.1',
  port: Number(process.env.PORT ?? 0),
});
process.stdout.write(
  `${JSON.stringify({ service: 'demo-backend', url: backend.url.replace(/\/mcp$/, '') })}\n`,
);
const stop = () => void backend.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
