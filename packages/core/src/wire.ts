/**
 * Zod schemas for every wire shape of the MCP interceptors extension (SEP-2624,
 * "generation C"), and liberal parsers that also read the shapes other implementations
 * emit (singular `hook`, `phase: "both"`, `mode: "enforce"`, the Go SDK's nested results)
 * and always return the canonical form.
 */
import { z } from 'zod';
import { JsonRpcCode, ProtocolError, type WireIssue, WireParseError } from './errors.ts';
import { isValidEventPattern } from './events.ts';

/** The extension's identifier, used as the capability key. */
export const INTERCEPTORS_EXTENSION = 'io.modelcontextprotocol/interceptors';

/** The two methods the extension defines. */
export const InterceptorMethod = {
  LIST: 'interceptors/list',
  INVOKE: 'interceptor/invoke',
  /**
   * A fleet extension, offered by services that declare {@link INVOKE_BATCH_CAPABILITY}:
   * `{invocations: InvokeParams[]}` → `{results: Array<{result} | {error}>}` in the same
   * order, each invocation run as if sent alone. The gateway uses it for audit-mode
   * invocations, whose answers nobody waits on, to wake an observer once per batch, and for
   * coalesced active ones (`RunChainOptions.coalesce`).
   */
  INVOKE_BATCH: 'fleet/interceptor/invokeBatch',
} as const;

/** Key under `capabilities.experimental` of a service that takes `fleet/interceptor/invokeBatch`; its value is `{maxItems}`. */
export const INVOKE_BATCH_CAPABILITY = 'io.fleet/invokeBatch';

/** Most invocations in one batch a kit service accepts. */
export const MAX_INVOKE_BATCH = 256;

/**
 * `data.reason` values of `interceptor/invoke` errors that the gateway branches on (any other
 * reason is there for people). Each marks a -32602 that is not the caller's doing: the chain
 * counts such an invocation `failed`, not `rejected`.
 */
export const InvokeErrorReason = {
  /**
   * The service has no interceptor of that name (a kit service answers -32602 `{name,
   * reason}`): whoever invoked it knows the service as it was before a redeployment.
   */
  UNKNOWN_INTERCEPTOR: 'unknown_interceptor',
  /**
   * The service refused, as a whole, the `fleet/interceptor/invokeBatch` request that carried
   * the invocation. No service sends it: the invoker marks each item so ({@link batchItemError}).
   */
  BATCH_REFUSED: 'batch_refused',
} as const;

/**
 * What each of the `items` invocations of one `fleet/interceptor/invokeBatch` request settles
 * with when the service answered that request as a whole with `error` instead of item by item.
 * A -32602 there refused the batch (its size, its shape), not any one invocation's params:
 * each item gets a {@link ProtocolError} with the service's code and message, `data: {reason:
 * "batch_refused", items, error}` (`error` the service's answer as sent, also the `cause`), which
 * the chain counts `failed`. Any other error is returned as it is: it already counts as `failed`
 * (or `timeout`) for every item.
 */
export function batchItemError(error: unknown, items: number): unknown {
  if (!(error instanceof ProtocolError) || error.code !== JsonRpcCode.INVALID_PARAMS) return error;
  return new ProtocolError(
    error.code,
    error.message,
    { reason: InvokeErrorReason.BATCH_REFUSED, items, error: error.toJSON() },
    { cause: error },
  );
}

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** Which side of the governed exchange an invocation sees. */
export const PhaseSchema = z.enum(['request', 'response']);
/** Validators judge a payload; mutators may rewrite it. */
export const InterceptorTypeSchema = z.enum(['validation', 'mutation']);
/** `active` takes effect; `audit` only observes. */
export const InterceptorModeSchema = z.enum(['active', 'audit']);
/** How serious a validation finding is; only `error` blocks. */
export const SeveritySchema = z.enum(['info', 'warn', 'error']);

/** An event name, `"*"`, or a `prefix/*` glob. */
export const EventPatternSchema = z
  .string()
  .refine(isValidEventPattern, { message: 'must be an event name, "*" or a "prefix/*" glob' });

/** A concrete event name (no wildcard). */
export const EventNameSchema = z
  .string()
  .min(1)
  .refine((s) => !s.includes('*') && !/\s/.test(s), {
    message: 'must be a concrete event name (no wildcard)',
  });

/** The events an interceptor is invoked for, in one phase. */
export const HookSchema = z.object({ events: z.array(EventPatternSchema), phase: PhaseSchema });

const Int32Schema = z.number().int().min(INT32_MIN).max(INT32_MAX);

/** A number for both phases, or one per phase (a missing side is 0). */
export const PriorityHintSchema = z.union([
  Int32Schema,
  z.object({ request: Int32Schema.optional(), response: Int32Schema.optional() }),
]);

/** The protocol revisions an interceptor is compatible with. */
export const CompatSchema = z.object({
  minProtocol: z.string().min(1),
  maxProtocol: z.string().min(1).optional(),
});

/** An interceptor's self-description, as `interceptors/list` returns it. */
export const InterceptorInfoSchema = z.object({
  name: z.string().min(1),
  version: z.string().optional(),
  description: z.string().optional(),
  type: InterceptorTypeSchema,
  hooks: z.array(HookSchema),
  priorityHint: PriorityHintSchema.optional(),
  compat: CompatSchema.optional(),
  configSchema: z.record(z.string(), z.unknown()).optional(),
  mode: InterceptorModeSchema.optional(),
  failOpen: z.boolean().optional(),
  /** Fleet extension: the author's default per-invocation budget. */
  timeoutMs: z.number().int().positive().optional(),
});

/** `interceptors/list` params. */
export const ListInterceptorsParamsSchema = z
  .object({
    event: EventNameSchema.optional(),
    _meta: z.record(z.string(), z.unknown()).optional(),
  })
  .optional();

/** `interceptors/list` result. */
export const ListInterceptorsResultSchema = z.object({
  interceptors: z.array(InterceptorInfoSchema),
});

/** Who caused the governed operation. */
export const PrincipalSchema = z.object({
  type: z.enum(['user', 'service', 'anonymous']),
  id: z.string().optional(),
  claims: z.record(z.string(), z.unknown()).optional(),
});

/** What an interceptor may know about the operation besides its payload. */
export const InvocationContextSchema = z.object({
  principal: PrincipalSchema.optional(),
  traceId: z.string().optional(),
  spanId: z.string().optional(),
  timestamp: z.string().optional(),
  sessionId: z.string().optional(),
});

/** `interceptor/invoke` params. */
export const InvokeParamsSchema = z.object({
  name: z.string().min(1),
  event: EventNameSchema,
  phase: PhaseSchema,
  payload: z.unknown(),
  config: z.record(z.string(), z.unknown()).optional(),
  timeoutMs: z.number().int().positive().optional(),
  context: InvocationContextSchema.optional(),
  _meta: z.record(z.string(), z.unknown()).optional(),
});

/** One finding of a validator. */
export const ValidationMessageSchema = z.object({
  path: z.string().optional(),
  message: z.string(),
  severity: SeveritySchema,
});

/** An advisory correction; never applied automatically. */
export const SuggestionSchema = z.object({ path: z.string(), value: z.unknown() });

const ResultBase = {
  interceptor: z.string().min(1),
  phase: PhaseSchema,
  durationMs: z.number().nonnegative().optional(),
  info: z.record(z.string(), z.unknown()).optional(),
};

/** A validator's verdict. */
export const ValidationResultSchema = z.object({
  ...ResultBase,
  type: z.literal('validation'),
  valid: z.boolean(),
  severity: SeveritySchema.optional(),
  messages: z.array(ValidationMessageSchema).optional(),
  suggestions: z.array(SuggestionSchema).optional(),
});

/** A mutator's answer; `payload` is the unchanged input when `modified` is false. */
export const MutationResultSchema = z.object({
  ...ResultBase,
  type: z.literal('mutation'),
  modified: z.boolean(),
  payload: z.unknown(),
});

/** Either result. */
export const InterceptorResultSchema = z.discriminatedUnion('type', [
  ValidationResultSchema,
  MutationResultSchema,
]);

// ---------------------------------------------------------------------------------------
// Liberal parsing

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Format a zod issue path as `hooks[0].phase`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out;
}

function issuesOf(error: z.ZodError, prefix: readonly PropertyKey[] = []): WireIssue[] {
  return error.issues.map((issue) => ({
    path: formatPath([...prefix, ...issue.path]),
    message: issue.message,
  }));
}

/** Parse `value` with `schema` or throw a {@link WireParseError} naming each bad path. */
export function parseWire<S extends z.ZodType>(
  schema: S,
  value: unknown,
  what: string,
): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new WireParseError(what, issuesOf(parsed.error));
  return parsed.data;
}

function normaliseHooks(raw: Json): unknown {
  const source = raw.hooks ?? (raw.hook === undefined ? undefined : [raw.hook]);
  if (!Array.isArray(source)) return source;
  const hooks: unknown[] = [];
  for (const hook of source) {
    if (!isObject(hook)) {
      hooks.push(hook);
      continue;
    }
    const events = hook.events ?? (typeof hook.event === 'string' ? [hook.event] : undefined);
    if (hook.phase === 'both') {
      hooks.push({ events, phase: 'request' }, { events, phase: 'response' });
    } else {
      hooks.push({ events, phase: hook.phase });
    }
  }
  return hooks;
}

function normaliseInfo(raw: unknown): unknown {
  if (!isObject(raw)) return raw;
  const out: Json = { ...raw, hooks: normaliseHooks(raw) };
  delete out.hook;
  // Go emits `"mode": ""` when unset; older drafts call the active mode "enforce".
  if (out.mode === 'enforce') out.mode = 'active';
  for (const key of ['mode', 'failOpen', 'priorityHint', 'version', 'description', 'compat'])
    if (out[key] === null || out[key] === '') delete out[key];
  return out;
}

/**
 * Parse one interceptor descriptor liberally and return it in canonical form.
 * @throws {WireParseError} naming every malformed path.
 */
export function parseInterceptorInfo(raw: unknown): InterceptorInfoParsed {
  return parseWire(InterceptorInfoSchema, normaliseInfo(raw), 'interceptor descriptor');
}

type InterceptorInfoParsed = z.output<typeof InterceptorInfoSchema>;

/** A descriptor in a list that could not be used, and why. */
export interface RejectedDescriptor {
  index: number;
  name?: string;
  issues: WireIssue[];
}

/**
 * Parse an `interceptors/list` result. Descriptors that do not parse (an unknown `type` or
 * `mode`, say) are set aside in `rejected` rather than failing the whole list: a receiver
 * must not select them, but the others stay usable.
 * @throws {WireParseError} when the result itself is not a list result.
 */
export function parseListResult(raw: unknown): {
  interceptors: InterceptorInfoParsed[];
  rejected: RejectedDescriptor[];
} {
  if (!isObject(raw) || !Array.isArray(raw.interceptors)) {
    throw new WireParseError('interceptors/list result', [
      { path: 'interceptors', message: 'expected an array' },
    ]);
  }
  const interceptors: InterceptorInfoParsed[] = [];
  const rejected: RejectedDescriptor[] = [];
  raw.interceptors.forEach((item, index) => {
    const parsed = InterceptorInfoSchema.safeParse(normaliseInfo(item));
    if (parsed.success) interceptors.push(parsed.data);
    else {
      const name = isObject(item) && typeof item.name === 'string' ? item.name : undefined;
      rejected.push({
        index,
        ...(name === undefined ? {} : { name }),
        issues: issuesOf(parsed.error, ['interceptors', index]),
      });
    }
  });
  return { interceptors, rejected };
}

/** What the caller of an invocation expects back; fills echo fields older peers omit. */
export interface ExpectedResult {
  interceptor: string;
  type: 'validation' | 'mutation';
  phase: 'request' | 'response';
  /** The payload that was sent: the result of an unmodified mutation. */
  payload: unknown;
}

function normaliseResult(raw: Json, expected: ExpectedResult): Json {
  const out: Json = { ...raw };
  // Go SDK: {interceptor, type, phase, durationMs, validation: {...}} or
  // {..., mutation: {modified, info, payload}, payload}.
  if (isObject(raw.validation) && raw.valid === undefined) {
    const { valid, severity, messages, suggestions, info } = raw.validation;
    Object.assign(out, { valid, severity, messages, suggestions });
    if (info !== undefined && out.info === undefined) out.info = info;
    delete out.validation;
    out.type ??= 'validation';
  }
  if (isObject(raw.mutation) && raw.modified === undefined) {
    const { modified, info, payload } = raw.mutation;
    out.modified = modified;
    if (payload !== undefined) out.payload = payload;
    if (info !== undefined && out.info === undefined) out.info = info;
    delete out.mutation;
    out.type ??= 'mutation';
  }
  if (out.type === undefined) {
    if (typeof out.valid === 'boolean') out.type = 'validation';
    else if (typeof out.modified === 'boolean') out.type = 'mutation';
  }
  out.interceptor ??= expected.interceptor;
  out.phase ??= expected.phase;
  for (const key of ['severity', 'messages', 'suggestions', 'info', 'durationMs'])
    if (out[key] === null) delete out[key];
  if (Array.isArray(out.messages)) {
    const fallback = typeof out.severity === 'string' ? out.severity : 'error';
    out.messages = out.messages.map((m) =>
      isObject(m) && m.severity === undefined ? { ...m, severity: fallback } : m,
    );
  }
  if (out.type === 'mutation' && out.modified === false && out.payload === undefined) {
    out.payload = expected.payload;
  }
  return out;
}

type InterceptorResultParsed = z.output<typeof InterceptorResultSchema>;

/**
 * Parse an `interceptor/invoke` result liberally (flat or nested, with or without echo
 * fields) and check it answers what was asked: an echo of another interceptor, type or
 * phase, or a modified mutation without a payload, is malformed.
 * @throws {WireParseError}
 */
export function parseInvokeResult(raw: unknown, expected: ExpectedResult): InterceptorResultParsed {
  if (!isObject(raw)) {
    throw new WireParseError('interceptor result', [{ path: '', message: 'expected an object' }]);
  }
  const result = parseWire(
    InterceptorResultSchema,
    normaliseResult(raw, expected),
    'interceptor result',
  );
  const issues: WireIssue[] = [];
  if (result.interceptor !== expected.interceptor)
    issues.push({ path: 'interceptor', message: `expected "${expected.interceptor}"` });
  if (result.type !== expected.type)
    issues.push({ path: 'type', message: `expected "${expected.type}"` });
  if (result.phase !== expected.phase)
    issues.push({ path: 'phase', message: `expected "${expected.phase}"` });
  if (result.type === 'mutation' && result.modified && result.payload === undefined)
    issues.push({ path: 'payload', message: 'required when modified is true' });
  if (issues.length > 0) throw new WireParseError('interceptor result', issues);
  return result;
}

/**
 * The capability an interceptor server declares in its `initialize` result, under both
 * `capabilities.extensions` (current) and `capabilities.experimental` (older peers).
 */
export function interceptorCapability(supportedEvents: Iterable<string>): {
  supportedEvents: string[];
} {
  return { supportedEvents: [...new Set(supportedEvents)].sort() };
}
