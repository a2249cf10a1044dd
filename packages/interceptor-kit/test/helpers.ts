/** Test helpers: real servers on 127.0.0.1:0, always cleaned up. */
import {
  createInterceptorHost,
  createInterceptorHttpApp,
  type Interceptor,
  type InterceptorHostOptions,
  type InterceptorHttpOptions,
  listen,
} from '../src/index.ts';
import { defer } from '../src/testing.ts';

export { defer };

/** Serve `interceptors` over HTTP on a free loopback port; returns the `/mcp` URL. */
export async function serveInterceptors(
  interceptors: Interceptor[],
  options: Partial<InterceptorHttpOptions> & InterceptorHostOptions = {},
): Promise<{ url: string; base: string }> {
  const host = createInterceptorHost(interceptors, options);
  const { listener } = createInterceptorHttpApp(host, { name: 'test-interceptors', ...options });
  const listening = await listen(listener, { service: 'test', announce: false });
  defer(() => listening.close(100));
  return { url: `${listening.url}/mcp`, base: listening.url };
}
