/**
 * Define interceptors with typed handlers. A handler gets the payload and a context and
 * returns a verdict; the host adds the echo fields (`interceptor`, `type`, `phase`,
 * `durationMs`) and turns failures into the right JSON-RPC errors.
 */
import {
  type Compat,
  type Hook,
  type InterceptorInfo,
  type InvocationContext,
  type Phase,
  type PriorityHint,
  parseInterceptorInfo,
  type Suggestion,
  type ValidationMessage,
} from '@fleet/core';

/** What a handler knows about the invocation besides the payload. */
export interface HandlerContext {
  /** The governed event, e.g. `tools/call`. */
  event: string;
  phase: Phase;
  /** The invocation's `config`, or `{}`. */
  config: Record<string, unknown>;
  /** The invocation context the caller sent (principal, trace ids, timestamp, session). */
  context: InvocationContext;
  /** Aborted when the invocation times out or the caller goes away. */
  signal: AbortSignal;
}

/** A validator's verdict. */
export interface ValidationVerdict {
  valid: boolean;
  /** Missing with `valid: false` counts as `error` (blocking). */
  severity?: 'info' | 'warn' | 'error';
  messages?: ValidationMessage[];
  suggestions?: Suggestion[];
  info?: Record<string, unknown>;
}

/** A mutator's verdict; `payload` is required when `modified` is true. */
export interface MutationVerdict {
  modified: boolean;
  payload?: unknown;
  info?: Record<string, unknown>;
}

type MaybePromise<T> = T | Promise<T>;

/** Descriptor fields shared by both kinds. */
export interface InterceptorOptions {
  name: string;
  version?: string;
  description?: string;
  /** The events and phases the interceptor is invoked for. */
  hooks: Hook[];
  priorityHint?: PriorityHint;
  compat?: Compat;
  configSchema?: Record<string, unknown>;
  /** Default `active`. */
  mode?: 'active' | 'audit';
  /** Default false (fail-closed). */
  failOpen?: boolean;
  /** Server-side budget when the caller sends none (default: the host's). */
  timeoutMs?: number;
}

/** A validator definition. */
export interface ValidatorOptions extends InterceptorOptions {
  handler: (payload: unknown, ctx: HandlerContext) => MaybePromise<ValidationVerdict>;
}

/** A mutator definition. */
export interface MutatorOptions extends InterceptorOptions {
  handler: (payload: unknown, ctx: HandlerContext) => MaybePromise<MutationVerdict>;
}

/** An interceptor ready to be served or run in process. */
export type Interceptor =
  | { info: InterceptorInfo & { type: 'validation' }; handler: ValidatorOptions['handler'] }
  | { info: InterceptorInfo & { type: 'mutation' }; handler: MutatorOptions['handler'] };

function describe(options: InterceptorOptions, type: 'validation' | 'mutation'): InterceptorInfo {
  const {
    name,
    version,
    description,
    hooks,
    priorityHint,
    compat,
    configSchema,
    mode,
    failOpen,
    timeoutMs,
  } = options;
  // Parse through the wire schema so a definition can never advertise a malformed shape.
  return parseInterceptorInfo({
    name,
    version,
    description,
    type,
    hooks,
    priorityHint,
    compat,
    configSchema,
    mode,
    failOpen,
    timeoutMs,
  });
}

/** Define a validator. Throws a WireParseError for a malformed descriptor. */
export function defineValidator(options: ValidatorOptions): Interceptor {
  return {
    info: describe(options, 'validation') as InterceptorInfo & { type: 'validation' },
    handler: options.handler,
  };
}

/** Define a mutator. Throws a WireParseError for a malformed descriptor. */
export function defineMutator(options: MutatorOptions): Interceptor {
  return {
    info: describe(options, 'mutation') as InterceptorInfo & { type: 'mutation' },
    handler: options.handler,
  };
}

/** `valid: true`. */
export function allow(info?: Record<string, unknown>): ValidationVerdict {
  return info === undefined ? { valid: true } : { valid: true, info };
}

/** `valid: false` with one message (severity `error` unless given). */
export function deny(
  message: string,
  options: {
    path?: string;
    severity?: 'info' | 'warn' | 'error';
    info?: Record<string, unknown>;
  } = {},
): ValidationVerdict {
  const severity = options.severity ?? 'error';
  const entry: ValidationMessage = { message, severity };
  if (options.path !== undefined) entry.path = options.path;
  const verdict: ValidationVerdict = { valid: false, severity, messages: [entry] };
  if (options.info !== undefined) verdict.info = options.info;
  return verdict;
}

/** `modified: false`. */
export function unchanged(info?: Record<string, unknown>): MutationVerdict {
  return info === undefined ? { modified: false } : { modified: false, info };
}

/** `modified: true` with the new payload. */
export function modified(payload: unknown, info?: Record<string, unknown>): MutationVerdict {
  return info === undefined ? { modified: true, payload } : { modified: true, payload, info };
}
