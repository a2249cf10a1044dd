// A stdio peer for stdio-transport.test.ts that writes what each request asks for, so a
// test controls the exact bytes, their order and how they are split into writes.
//   {method: "answer", params: {size, order: "head"|"tail", chunk}}  a result whose text is
//     `size` bytes, its `id` first (head) or last (tail, the SDK's order), written `chunk`
//     bytes at a time;
//   {method: "raw", params: {text}}  `text` exactly as given, then the answer {ok: true};
//   {method: "pid"}  the answer {pid};
//   {method: "env"}  the answer {env}: its whole environment.
// With IGNORE_TERM=1 it outlives the end of its stdin and SIGTERM.
import { createInterface } from 'node:readline';

if (process.env.IGNORE_TERM === '1') {
  process.on('SIGTERM', () => undefined);
  setInterval(() => undefined, 60_000);
}
const out = (text) => new Promise((resolve) => process.stdout.write(text, resolve));
const line = (message) => out(`${JSON.stringify(message)}\n`);

const input = createInterface({ input: process.stdin });
input.on('line', async (text) => {
  const { id, method, params = {} } = JSON.parse(text);
  if (id === undefined) return;
  if (method === 'answer') {
    const result = { text: 'x'.repeat(params.size) };
    const message =
      params.order === 'head' ? { jsonrpc: '2.0', id, result } : { result, jsonrpc: '2.0', id };
    const bytes = `${JSON.stringify(message)}\n`;
    for (let at = 0; at < bytes.length; at += params.chunk) {
      await out(bytes.slice(at, at + params.chunk));
      await new Promise((resolve) => setImmediate(resolve));
    }
  } else if (method === 'raw') {
    await out(params.text);
    await line({ jsonrpc: '2.0', id, result: { ok: true } });
  } else if (method === 'pid') {
    await line({ jsonrpc: '2.0', id, result: { pid: process.pid } });
  } else if (method === 'env') {
    await line({ jsonrpc: '2.0', id, result: { env: process.env } });
  }
});
if (process.env.IGNORE_TERM !== '1') input.on('close', () => process.exit(0));
