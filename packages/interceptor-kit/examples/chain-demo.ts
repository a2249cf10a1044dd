/**
 * A tour of the foundation: two interceptor services over real HTTP on loopback, discovered
 * with `interceptors/list`, planned into a chain and run on a `tools/call` request and its
 * response, the way the orchestrator will.
 *
 *   pnpm start        (from the repository root)
 */
import {
  type ChainInterceptor,
  chainAbortToError,
  planChain,
  resolveService,
  runChain,
} from '@fleet/core';
import {
  allow,
  createInterceptorHost,
  createInterceptorHttpApp,
  createRemoteService,
  defineMutator,
  defineValidator,
  deny,
  listen,
  modified,
  unchanged,
} from '../src/index.ts';

const EMAIL = /[\w.+-]+@[\w-]+\.[\w.-]+/g;

const guard = createInterceptorHost([
  defineValidator({
    name: 'no-delete',
    description: 'Refuses tools whose name contains "delete"',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: (payload) => {
      const name = String((payload as { name?: unknown }).name);
      return name.includes('delete')
        ? deny(`tool "${name}" is not allowed`, { path: 'name' })
        : allow();
    },
  }),
]);

const redactor = createInterceptorHost([
  defineMutator({
    name: 'email-redactor',
    description: 'Replaces e-mail addresses in tool results',
    hooks: [{ events: ['tools/call'], phase: 'response' }],
    priorityHint: { response: 1000 },
    handler: (payload) => {
      const text = JSON.stringify(payload);
      const count = text.match(EMAIL)?.length ?? 0;
      if (count === 0) return unchanged();
      return modified(JSON.parse(text.replace(EMAIL, '[EMAIL_ADDRESS]')), { EMAIL_ADDRESS: count });
    },
  }),
]);

const step = (n: number, text: string) => console.log(`\n${n}. ${text}`);

step(1, 'Start two interceptor services (MCP over Streamable HTTP, loopback, free ports)');
const services = await Promise.all(
  [
    ['guard', guard],
    ['redactor', redactor],
  ].map(async ([name, host]) => {
    const listening = await listen(
      createInterceptorHttpApp(host as typeof guard, { name: String(name) }).listener,
      {
        service: String(name),
        announce: false,
      },
    );
    console.log(`   ${name}: ${listening.url}/mcp`);
    return {
      name: String(name),
      listening,
      remote: createRemoteService({ url: `${listening.url}/mcp` }),
    };
  }),
);

step(2, 'Discover them with initialize + interceptors/list');
const chain: ChainInterceptor[] = [];
for (const { name, remote } of services) {
  const handshake = await remote.connect();
  const { interceptors } = await remote.list();
  console.log(
    `   ${name}: capability declared=${handshake.interceptorsCapability}, interceptors=${interceptors.map((i) => `${i.name} (${i.type})`).join(', ')}`,
  );
  chain.push(...resolveService(name, interceptors, remote));
}

const context = {
  principal: { type: 'user' as const, id: 'alice' },
  timestamp: new Date().toISOString(),
};

step(3, 'Request phase of tools/call "lookup_customer": validators, then mutators');
const request = await runChain(
  planChain(chain, 'tools/call', 'request'),
  { payload: { name: 'lookup_customer', arguments: { id: 42 } }, context },
  { timeoutMs: 2000 },
);
console.log(
  `   status=${request.status} in ${request.totalDurationMs.toFixed(2)} ms; ${request.results.map((r) => `${r.interceptor}: ${r.outcome}`).join(', ')}`,
);

step(4, 'Response phase: the backend answered with an e-mail address in the text');
const backendResult = {
  content: [{ type: 'text', text: 'Customer 42: Ada Lovelace <ada@example.com>' }],
};
const response = await runChain(
  planChain(chain, 'tools/call', 'response'),
  { payload: backendResult, context },
  { timeoutMs: 2000 },
);
console.log(
  `   status=${response.status}; the client receives: ${JSON.stringify(response.finalPayload)}`,
);
console.log(`   redactor info: ${JSON.stringify(response.results[0]?.result?.info)}`);

step(5, 'Request phase of tools/call "delete_customer": the guard blocks it');
const denied = await runChain(
  planChain(chain, 'tools/call', 'request'),
  { payload: { name: 'delete_customer', arguments: { id: 42 } }, context },
  { timeoutMs: 2000 },
);
const error = chainAbortToError(denied);
console.log(
  `   status=${denied.status}; the client gets JSON-RPC error ${error?.code}: ${error?.message}`,
);
console.log(`   data: ${JSON.stringify(error?.data)}`);

for (const { remote, listening } of services) {
  await remote.close();
  await listening.close(100);
}
console.log(
  '\nDone. Next: the orchestrator puts this chain in front of real MCP servers (see README).',
);
