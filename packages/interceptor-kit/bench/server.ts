/**
 * Benchmark peer, run as its own process: a kit interceptor server and, on another port, a
 * plain HTTP JSON echo (the baseline). Prints one JSON line with both URLs.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  allow,
  createInterceptorHost,
  createInterceptorHttpApp,
  defineMutator,
  defineValidator,
  listen,
  modified,
} from '../src/index.ts';

const host = createInterceptorHost([
  defineValidator({
    name: 'bench-validator',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: () => allow(),
  }),
  defineMutator({
    name: 'bench-mutator',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: (payload) => modified({ ...(payload as object), tagged: true }),
  }),
]);
const kit = await listen(createInterceptorHttpApp(host, { name: 'bench' }).listener, {
  service: 'bench',
  announce: false,
});

const plain = createServer({ keepAlive: true }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      id: number;
      params: unknown;
    };
    const out = JSON.stringify({ jsonrpc: '2.0', id: body.id, result: { echo: body.params } });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(out),
    });
    res.end(out);
  });
});
plain.keepAliveTimeout = 65_000;
await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
const port = (plain.address() as AddressInfo).port;
process.stdout.write(
  `${JSON.stringify({ kit: `${kit.url}/mcp`, plain: `http://127.0.0.1:${port}/` })}\n`,
);
process.on('SIGTERM', () => process.exit(0));
