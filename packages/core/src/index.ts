/**
 * @fleet/core: the interceptor wire contract (schemas and types), priority and event
 * matching, the transport-agnostic chain engine, error mapping and MCP protocol hygiene
 * (revisions, reserved `_meta` keys, header values). Depends on zod only.
 */

export type { DenialToolResult, ValidationErrorEntry } from './abort.ts';
export { chainAbortToError, chainAbortToToolResult } from './abort.ts';
export type {
  AbortInfo,
  ChainInput,
  ChainInterceptor,
  ChainPlan,
  ChainResult,
  ChainStage,
  ChainStep,
  FailureOutcome,
  InvocationOutcome,
  InvocationOutcomeKind,
  InvokeOptions,
  Invoker,
  PlanChainOptions,
  ResultOutcome,
  RunChainOptions,
} from './chain.ts';
export {
  AUDIT_OVERLOADED,
  failureReason,
  isFailureOutcome,
  planChain,
  resultOutcome,
  runChain,
} from './chain.ts';
export {
  BOOLEAN_WORDS_PROBLEM,
  booleanWord,
  DEFAULT_REDIS_URL,
  envBoolean,
  envInteger,
  envKeyPrefix,
  envLogLevel,
  envRedisUrl,
  expandVariables,
  integerProblem,
  LOG_LEVELS,
  type LogLevel,
  redisUrlProblem,
} from './env.ts';
export type {
  FleetErrorCode,
  FleetErrorOptions,
  HttpErrorCode,
  JsonRpcErrorObject,
  WireIssue,
} from './errors.ts';
export {
  FLEET_ERROR_CODES,
  FleetError,
  HTTP_ERROR_CODES,
  httpStatusOf,
  httpStatusOfJsonRpcError,
  isDenial,
  JsonRpcCode,
  jsonRpcCodeOf,
  ProtocolError,
  toProtocolError,
  WireParseError,
} from './errors.ts';
export {
  isNeverIntercepted,
  isValidEventPattern,
  matchesAnyEvent,
  matchesEvent,
  NEVER_INTERCEPTED_METHODS,
  patternCovers,
} from './events.ts';
export type { InFlightLimit } from './in-flight.ts';
export { createInFlightLimit } from './in-flight.ts';
export { allowedKeysAt, editDistance, unknownKeyMessage, withKeyHints } from './keys.ts';
export type { SignalSource } from './lazy-abort.ts';
export { LazyAbortController, signalOf } from './lazy-abort.ts';
export { isReservedMetaKey, MCP_META_PREFIX, McpMetaKey, withoutReservedMeta } from './meta.ts';
export { isKnownMcpMethod, KNOWN_MCP_METHODS } from './methods.ts';
export { merged } from './objects.ts';
export type { InterceptorOverrides, ResolvedInterceptor, ServiceOverrides } from './overrides.ts';
export {
  InterceptorOverridesSchema,
  parseServiceOverrides,
  resolveInterceptor,
  resolveService,
  ServiceOverridesSchema,
  widenedHooks,
} from './overrides.ts';
export type {
  ParamHeader,
  ParamHeadersCheck,
  ParamHeadersOptions,
  ParamHeaderType,
} from './param-headers.ts';
export {
  checkParamHeaders,
  decodeHeaderValue,
  encodeHeaderValue,
  isHttpToken,
  MAX_PARAM_HEADER_BYTES,
  paramHeadersOf,
  paramHeaderValues,
} from './param-headers.ts';
export type { Orderable, ResolvedPriority } from './priority.ts';
export {
  compareChainOrder,
  compareCodePoints,
  resolvePriorities,
  resolvePriority,
  serialisePriority,
} from './priority.ts';
export type {
  ClassifiableMessage,
  HeaderMap,
  LoggingLevel,
  RequestRevision,
  StatelessRequestMeta,
} from './revisions.ts';
export {
  classifyRequest,
  isStatelessVersion,
  LOGGING_LEVELS,
  MCP_NAME_PARAM,
  moreVerbose,
  reachesLogLevel,
  SESSION_PROTOCOL_VERSIONS,
  STATELESS_PROTOCOL_VERSIONS,
  SUPPORTED_PROTOCOL_VERSIONS,
} from './revisions.ts';
export { quoteCut } from './text.ts';
export type {
  Compat,
  Hook,
  InterceptorInfo,
  InterceptorMode,
  InterceptorResult,
  InterceptorType,
  InvocationContext,
  InvokeParams,
  ListInterceptorsResult,
  MutationResult,
  Phase,
  Principal,
  PriorityHint,
  Severity,
  Suggestion,
  ValidationMessage,
  ValidationResult,
} from './types.ts';
export type { ExpectedResult, RejectedDescriptor } from './wire.ts';
export {
  batchItemError,
  CompatSchema,
  EventNameSchema,
  EventPatternSchema,
  formatPath,
  HookSchema,
  INTERCEPTORS_EXTENSION,
  INVOKE_BATCH_CAPABILITY,
  InterceptorInfoSchema,
  InterceptorMethod,
  InterceptorModeSchema,
  InterceptorResultSchema,
  InterceptorTypeSchema,
  InvocationContextSchema,
  InvokeErrorReason,
  InvokeParamsSchema,
  interceptorCapability,
  ListInterceptorsParamsSchema,
  ListInterceptorsResultSchema,
  MAX_INVOKE_BATCH,
  MutationResultSchema,
  PhaseSchema,
  PrincipalSchema,
  PriorityHintSchema,
  parseInterceptorInfo,
  parseInvokeResult,
  parseListResult,
  parseWire,
  SeveritySchema,
  SuggestionSchema,
  ValidationMessageSchema,
  ValidationResultSchema,
} from './wire.ts';
