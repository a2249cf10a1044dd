/**
 * A lean MCP client for load generation: one keep-alive connection, a session opened with
 * `initialize`, then `tools/call` as plain JSON POSTs. It costs a small fraction of the SDK
 * client's CPU per call, so on a 2-core machine the load generator does not steal the CPU
 * the system under test needs. Every answer is checked (a JSON-RPC result, not an error).
 */
import { Pool } from 'undici';

export interface LeanClient {
  call(): Promise<void>;
  close(): Promise<void>;
}

const ACCEPT = 'application/json, text/event-stream';

export async function leanClient(url: string): Promise<LeanClient> {
  const target = new URL(url);
  const pool = new Pool(target.origin, { connections: 1, pipelining: 1 });
  let id = 0;
  let session: string | undefined;
  let protocolVersion = '2025-11-25';
  const post = async (message: Record<string, unknown>) => {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: ACCEPT,
      'mcp-protocol-version': protocolVersion,
    };
    if (session) headers['mcp-session-id'] = session;
    const res = await pool.request({
      path: target.pathname,
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', ...message }),
    });
    const text = await res.body.text();
    if (res.statusCode >= 300) throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
    const sid = res.headers['mcp-session-id'];
    if (typeof sid === 'string') session = sid;
    if (!('id' in message)) return undefined;
    const json = text.startsWith('{')
      ? text
      : (text
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5))
          .at(-1) ?? '');
    const answer = JSON.parse(json) as { result?: Record<string, unknown>; error?: unknown };
    if (!answer.result) throw new Error(`not a result: ${json.slice(0, 200)}`);
    return answer.result;
  };
  const init = await post({
    id: ++id,
    method: 'initialize',
    params: {
      protocolVersion,
      capabilities: {},
      clientInfo: { name: 'lean-bench', version: '1.0.0' },
    },
  });
  protocolVersion = String(init?.protocolVersion ?? protocolVersion);
  await post({ method: 'notifications/initialized' });
  return {
    async call() {
      const result = await post({
        id: ++id,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: 'hello' } },
      });
      if (!Array.isArray(result?.content)) throw new Error('tools/call: no content');
    },
    close: () => pool.close(),
  };
}
