/**
 * Per-service overrides from the registry: the operator's word wins over the interceptor's
 * own descriptor, except that hooks may only be narrowed.
 */
import { z } from 'zod';
import { FleetError } from './errors.ts';
import { patternCovers } from './events.ts';
import { type ResolvedPriority, resolvePriorities } from './priority.ts';
import type { Hook, InterceptorInfo, InterceptorMode, InterceptorType } from './types.ts';
import {
  EventPatternSchema,
  InterceptorModeSchema,
  PhaseSchema,
  PriorityHintSchema,
  parseWire,
} from './wire.ts';

// Overrides are the operator's own configuration (config file, admin API): strict, so a
// misspelt key is refused rather than ignored. What services declare (wire.ts) stays liberal.
const OverrideHookSchema = z.strictObject({
  events: z.array(EventPatternSchema),
  phase: z.union([PhaseSchema, z.literal('both')]),
});

const OverridePriorityHintSchema = z.union([
  PriorityHintSchema.options[0],
  z.strictObject(PriorityHintSchema.options[1].shape),
]);

/** What an operator may change about one interceptor. */
export const InterceptorOverridesSchema = z
  .object({
    mode: z.preprocess((v) => (v === 'enforce' ? 'active' : v), InterceptorModeSchema).optional(),
    failOpen: z.boolean().optional(),
    priorityHint: OverridePriorityHintSchema.optional(),
    timeoutMs: z.number().int().positive().optional(),
    hooks: z
      .array(OverrideHookSchema)
      .transform((hooks) =>
        hooks.flatMap((h): Hook[] =>
          h.phase === 'both'
            ? [
                { events: h.events, phase: 'request' },
                { events: h.events, phase: 'response' },
              ]
            : [{ events: h.events, phase: h.phase }],
        ),
      )
      .optional(),
  })
  .strict();

/** Overrides for one interceptor. */
export type InterceptorOverrides = z.output<typeof InterceptorOverridesSchema>;

/** Overrides for the interceptors of one service, by interceptor name. */
export const ServiceOverridesSchema = z.record(z.string(), InterceptorOverridesSchema);

/** Overrides keyed by interceptor name. */
export type ServiceOverrides = z.output<typeof ServiceOverridesSchema>;

/** Parse overrides liberally (`mode: "enforce"`, `phase: "both"`); throws a WireParseError. */
export function parseServiceOverrides(raw: unknown): ServiceOverrides {
  return parseWire(ServiceOverridesSchema, raw ?? {}, 'overrides');
}

/** An interceptor with its effective settings, ready to be planned into a chain. */
export interface ResolvedInterceptor<I = unknown> {
  serviceId: string;
  name: string;
  type: InterceptorType;
  mode: InterceptorMode;
  failOpen: boolean;
  hooks: Hook[];
  priority: ResolvedPriority;
  timeoutMs: number | undefined;
  compat: InterceptorInfo['compat'];
  /** The descriptor as the service declared it. */
  descriptor: InterceptorInfo;
  /** Whatever performs `interceptor/invoke` for this interceptor. */
  invoker: I;
}

/** Hooks in `narrower` that are not covered by any hook of the same phase in `declared`. */
export function widenedHooks(declared: readonly Hook[], narrower: readonly Hook[]): Hook[] {
  const widened: Hook[] = [];
  for (const hook of narrower) {
    const events = hook.events.filter(
      (event) =>
        !declared.some(
          (d) => d.phase === hook.phase && d.events.some((outer) => patternCovers(outer, event)),
        ),
    );
    if (events.length > 0) widened.push({ events, phase: hook.phase });
  }
  return widened;
}

/**
 * Apply `overrides` to a descriptor: override > descriptor > spec default
 * (`active`, fail-closed, priority 0, no timeout).
 * @throws {FleetError} `OVERRIDE_WIDENS_HOOKS` when the override hooks reach events or
 * phases the interceptor did not declare.
 */
export function resolveInterceptor<I>(
  serviceId: string,
  descriptor: InterceptorInfo,
  invoker: I,
  overrides: InterceptorOverrides = {},
): ResolvedInterceptor<I> {
  let hooks = descriptor.hooks;
  if (overrides.hooks !== undefined) {
    const widened = widenedHooks(descriptor.hooks, overrides.hooks);
    if (widened.length > 0) {
      throw new FleetError(
        'OVERRIDE_WIDENS_HOOKS',
        `overrides for "${descriptor.name}" would widen its hooks; only narrowing is allowed`,
        { data: { interceptor: descriptor.name, serviceId, widened, declared: descriptor.hooks } },
      );
    }
    hooks = overrides.hooks;
  }
  return {
    serviceId,
    name: descriptor.name,
    type: descriptor.type,
    mode: overrides.mode ?? descriptor.mode ?? 'active',
    failOpen: overrides.failOpen ?? descriptor.failOpen ?? false,
    hooks,
    priority: resolvePriorities(overrides.priorityHint ?? descriptor.priorityHint),
    timeoutMs: overrides.timeoutMs ?? descriptor.timeoutMs,
    compat: descriptor.compat,
    descriptor,
    invoker,
  };
}

/**
 * Resolve every interceptor of one service, applying the service's overrides by name.
 * @throws {FleetError} `OVERRIDE_WIDENS_HOOKS` (see {@link resolveInterceptor}).
 */
export function resolveService<I>(
  serviceId: string,
  descriptors: readonly InterceptorInfo[],
  invoker: I,
  overrides: ServiceOverrides = {},
): ResolvedInterceptor<I>[] {
  return descriptors.map((d) => resolveInterceptor(serviceId, d, invoker, overrides[d.name]));
}
