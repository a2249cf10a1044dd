/**
 * Run interceptors in process with the same semantics as over the wire: the same host
 * validates params, enforces timeouts and builds results, and payloads are copied so an
 * interceptor can never alias the caller's objects.
 */
import {
  type ChainInterceptor,
  type Invoker,
  resolveService,
  type ServiceOverrides,
} from '@fleet/core';
import type { Interceptor } from './define.ts';
import {
  createInterceptorHost,
  type InterceptorHost,
  type InterceptorHostOptions,
} from './host.ts';

/** An {@link Invoker} that calls a host in process. */
export function createLocalInvoker(host: InterceptorHost): Invoker {
  return {
    invoke: (params, { signal }) => host.invoke(structuredClone(params), { signal }),
  };
}

/** Options for {@link createLocalChainInterceptors}. */
export interface LocalChainOptions extends InterceptorHostOptions {
  /** The service id used for ordering ties and reporting. Default `local`. */
  serviceId?: string;
  overrides?: ServiceOverrides;
}

/** Resolve in-process interceptors into chain entries, ready for `planChain`. */
export function createLocalChainInterceptors(
  interceptors: readonly Interceptor[],
  options: LocalChainOptions = {},
): ChainInterceptor[] {
  const host = createInterceptorHost(interceptors, options);
  return resolveService(
    options.serviceId ?? 'local',
    interceptors.map((i) => i.info),
    createLocalInvoker(host),
    options.overrides,
  );
}
