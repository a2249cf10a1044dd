/**
 * Benchmark peer: one of three interceptor services (argv[2] = 0, 1 or 2): a request
 * validator, a request+response mutator, and an audit-mode observer. Each runs as its own
 * process, so the gateway makes three remote hops. Prints the fleet start-up line.
 */
import {
  allow,
  createInterceptorHost,
  createInterceptorHttpApp,
  defineMutator,
  defineValidator,
  listen,
  modified,
  unchanged,
} from '@fleet/interceptor-kit';

const hosts = [
  createInterceptorHost([
    defineValidator({
      name: 'bench-validator',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: () => allow(),
    }),
  ]),
  createInterceptorHost([
    defineMutator({
      name: 'bench-mutator',
      hooks: [
        { events: ['tools/call'], phase: 'request' },
        { events: ['tools/call'], phase: 'response' },
      ],
      handler: (payload, ctx) => {
        if (ctx.phase === 'request') {
          const p = payload as { arguments?: Record<string, unknown> };
          return modified({
            ...p,
            arguments: { ...p.arguments, text: `${String(p.arguments?.text)}!` },
          });
        }
        return unchanged();
      },
    }),
  ]),
  createInterceptorHost([
    defineValidator({
      name: 'bench-observer',
      mode: 'audit',
      hooks: [
        { events: ['*'], phase: 'request' },
        { events: ['*'], phase: 'response' },
      ],
      handler: () => allow(),
    }),
  ]),
];
const index = Number(process.argv[2] ?? 0);
const host = hosts[index];
if (!host) throw new Error(`no interceptor service #${index}`);
await listen(createInterceptorHttpApp(host, { name: `bench-${index}` }).listener, {
  service: `bench-interceptors-${index}`,
});
process.on('SIGTERM', () => process.exit(0));
