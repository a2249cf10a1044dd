/** Test helpers: real servers on 127.0.0.1:0, always cleaned up; spans kept in memory. */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll } from 'vitest';
import {
  createInterceptorHost,
  createInterceptorHttpApp,
  type Interceptor,
  type InterceptorHostOptions,
  type InterceptorHttpOptions,
  type InvocationMetricAttributes,
  type Logger,
  listen,
  observeInvocations,
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

/** A logger that keeps every line (level, facts, message) for assertions. */
export function capturingLogger() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const at =
    (level: string) =>
    (obj: Record<string, unknown>, msg: string): void => {
      lines.push({ level, obj, msg });
    };
  const logger: Logger = {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
  };
  return { logger, lines };
}

/**
 * Serve `interceptors` wired with `observeInvocations`, as every kit service is: each recorded
 * invocation's attributes (and duration, in the same order) and each log line are kept.
 */
export async function serveObserved(interceptors: Interceptor[]) {
  const recorded: InvocationMetricAttributes[] = [];
  const durations: number[] = [];
  const { logger, lines } = capturingLogger();
  const { url } = await serveInterceptors(interceptors, {
    onInvoked: observeInvocations({
      metrics: {
        recordInterceptor: (ms, attributes) => {
          durations.push(ms);
          recorded.push(attributes);
        },
      },
      logger,
    }),
  });
  return { url, recorded, durations, lines };
}

/**
 * Register, for the tests of the calling file, a global tracer provider that keeps finished
 * spans in memory (with the async-hooks context manager and the W3C propagator), unregistered
 * after them.
 */
export function inMemoryTracing(): { exporter: InMemorySpanExporter; provider: TracerProvider } {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  beforeAll(() => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(provider);
  });
  afterAll(async () => {
    await provider.shutdown();
    trace.disable();
    propagation.disable();
    context.disable();
  });
  return { exporter, provider };
}
