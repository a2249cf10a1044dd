/**
 * @fleet/interceptor-kit: define interceptors, serve them as MCP servers (Streamable HTTP
 * with a lean path for invoke, and stdio), and call them (remote or in process).
 */

export type { ConnectingClient } from './connected.ts';
export { whenConnected } from './connected.ts';
export type {
  HandlerContext,
  Interceptor,
  InterceptorOptions,
  MutationVerdict,
  MutatorOptions,
  ValidationVerdict,
  ValidatorOptions,
} from './define.ts';
export { allow, defineMutator, defineValidator, deny, modified, unchanged } from './define.ts';
export type { InterceptorHost, InterceptorHostOptions, InvokedEvent } from './host.ts';
export { createInterceptorHost } from './host.ts';
export type { InterceptorHttpApp, InterceptorHttpOptions } from './http.ts';
export {
  BodyTooLarge,
  bearerMatches,
  createInterceptorHttpApp,
  errorEnvelope,
  readBody,
  requireBearer,
} from './http.ts';
export type { InvokeLimits } from './limits.ts';
export { checkInvokeDepth, DEFAULT_MAX_DEPTH, nestedBeyond } from './limits.ts';
export type { LocalChainOptions } from './local.ts';
export { createLocalChainInterceptors, createLocalInvoker } from './local.ts';
export type { Logger } from './logger.ts';
export { createLogger, silentLogger } from './logger.ts';
export type { ServerIdentity } from './mcp-server.ts';
export { createInterceptorMcpServer, interceptorServerCapabilities } from './mcp-server.ts';
export type {
  InvocationMetricAttributes,
  InvocationMetrics,
  InvocationObserverOptions,
} from './observe.ts';
export { invocationOutcome, observeInvocations } from './observe.ts';
export type { BufferedPost, BufferedResponse } from './post.ts';
export { ExchangeTimeout, postBuffered, ResponseTooLarge } from './post.ts';
export type { RebindingGuardOptions } from './rebinding.ts';
export { isLoopbackName, rebindingGuard } from './rebinding.ts';
export type { ReloadingFile, ReloadingFileOptions } from './reloading-file.ts';
export { createReloadingFile } from './reloading-file.ts';
export type { Handshake, RemoteService, RemoteServiceOptions } from './remote.ts';
export { createRemoteService } from './remote.ts';
export type {
  Listening,
  ListenOptions,
  ListenSetting,
  ShutdownOptions,
  Stop,
  StopOptions,
} from './serve.ts';
export {
  DEFAULT_SHUTDOWN_DEADLINE_MS,
  ListenError,
  listen,
  listenErrorLine,
  onShutdown,
  stopOnListenError,
} from './serve.ts';
export type { SseEvent } from './sse.ts';
export { parseSseEvents, SseParser } from './sse.ts';
export {
  BoundedStdioServerTransport,
  LineReader,
  type RequestId,
  serveStdio,
  writeLine,
} from './stdio.ts';
export type { TraceParent } from './trace.ts';
export {
  activeTraceIds,
  formatTraceparent,
  outgoingTraceHeaders,
  parseTraceparent,
  withServerSpan,
} from './trace.ts';
