/**
 * Benchmark peer: one of three interceptor services (argv[2] = 0, 1 or 2): a request
 * validator, a request+response mutator, and an audit-mode observer, each its own process so
 * that the gateway makes three remote hops; or (argv[2] = all) the three in one service.
 * Prints the fleet start-up line.
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

const validator = defineValidator({
  name: 'bench-validator',
  hooks: [{ events: ['tools/call'], phase: 'request' }],
  handler: () => allow(),
});
const mutator = defineMutator({
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
});
const observer = defineValidator({
  name: 'bench-observer',
  mode: 'audit',
  hooks: [
    { events: ['*'], phase: 'request' },
    { events: ['*'], phase: 'response' },
  ],
  handler: () => allow(),
});
const definitions = { '0': [validator], '1': [mutator], '2': [observer] } as const;
// "all": the three in one service (one process, one hop for what shares a phase).
const which = process.argv[2] ?? '0';
const chosen =
  which === 'all' ? [validator, mutator, observer] : definitions[which as keyof typeof definitions];
if (!chosen) throw new Error(`no interceptor service ${which}`);
await listen(
  createInterceptorHttpApp(createInterceptorHost([...chosen]), { name: `bench-${which}` }).listener,
  {
    service: `bench-interceptors-${which}`,
  },
);
process.on('SIGTERM', () => process.exit(0));
