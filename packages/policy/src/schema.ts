/**
 * The policy document (YAML, `version: 1`) as zod schemas. Every object is strict: an
 * unknown key is an error, never silently ignored. The engine/cedar cross-field rules are
 * checked here; unique ids, CEL and Cedar are checked by `compilePolicy`.
 */
import { EventPatternSchema } from '@fleet/core';
import { z } from 'zod';
import { isValidPrincipalPattern } from './match.ts';

/** Events a policy governs when it does not say (`events:` at the top level). */
export const DEFAULT_POLICY_EVENTS: readonly string[] = Object.freeze([
  'tools/call',
  'prompts/get',
  'resources/read',
]);

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * Parses a window such as `500ms`, `60s`, `5m`, `1h` or `1d` into milliseconds; `undefined`
 * for anything else (including zero, which is not a window).
 */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text);
  if (!match) return undefined;
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  return ms > 0 && Number.isSafeInteger(ms) ? ms : undefined;
}

/** A window: a positive integer followed by `ms`, `s`, `m`, `h` or `d`. */
export const DurationSchema = z.string().refine((text) => parseDuration(text) !== undefined, {
  message: 'must be a positive duration such as "500ms", "60s", "5m", "1h" or "1d"',
});

/** What a rule, rate-limit or Cedar policy id looks like. */
export const RULE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:/@-]*$/;
const RULE_ID_MESSAGE =
  'must start with a letter or digit and contain only letters, digits and _ . : / @ -';

/** Rule ids: start with a letter or digit; then letters, digits and `_ . : / @ -`. */
export const RuleIdSchema = z
  .string()
  .regex(RULE_ID_PATTERN, { message: RULE_ID_MESSAGE })
  .refine((id) => id !== 'default', { message: '"default" is reserved for the policy default' });

/** A glob on a tool or prompt name or a resource URI (`*` matches any run of characters). */
export const NameGlobSchema = z.string().min(1, { message: 'must not be empty' });

/** `user`, `service`, `anonymous` or `*`, optionally followed by `:<id glob>`. */
export const PrincipalPatternSchema = z.string().refine(isValidPrincipalPattern, {
  message: 'must be user, service, anonymous or *, optionally followed by :<id glob>',
});

const EffectSchema = z.enum(['allow', 'deny']);
const Events = z.array(EventPatternSchema).min(1, { message: 'must list at least one event' });
const Names = z.array(NameGlobSchema).min(1, { message: 'must list at least one glob' });
const Principals = z
  .array(PrincipalPatternSchema)
  .min(1, { message: 'must list at least one pattern' });
const Expression = z.string().trim().min(1, { message: 'must not be empty' });

/** One access rule. */
export const RuleSchema = z.strictObject({
  id: RuleIdSchema,
  effect: EffectSchema,
  description: z.string().optional(),
  events: Events.optional(),
  tools: Names.optional(),
  principals: Principals.optional(),
  when: Expression.optional(),
  message: z.string().optional(),
});

/** One rate limit. */
export const RateLimitSchema = z.strictObject({
  id: RuleIdSchema,
  description: z.string().optional(),
  events: Events.optional(),
  tools: Names.optional(),
  principals: Principals.optional(),
  when: Expression.optional(),
  key: Expression,
  limit: z.number().int().positive(),
  window: DurationSchema,
  failOpen: z.boolean().default(true),
  message: z.string().optional(),
});

/** The `cedar:` block of an `engine: cedar` document. */
export const CedarBlockSchema = z.strictObject({
  policies: z.string().trim().min(1, { message: 'must contain at least one Cedar policy' }),
  schema: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
  namespace: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$/, {
      message: 'must be a Cedar namespace such as "Fleet" or "Acme::Mcp"',
    })
    .optional(),
});

/**
 * The `pinning:` block: tool pinning against "rug pulls" (off unless `enabled: true`). The
 * policy-validator service pins the first definition seen of each tool and hides and refuses a
 * tool whose definition changes until an operator approves it.
 */
export const PinningSchema = z.strictObject({
  enabled: z.boolean().default(false),
  failOpen: z.boolean().default(true),
});

/** The whole policy document. */
export const PolicyDocumentSchema = z
  .strictObject({
    version: z.literal(1, { message: 'must be 1' }),
    engine: z.enum(['cel', 'cedar']).default('cel'),
    default: EffectSchema.default('deny'),
    description: z.string().optional(),
    events: Events.optional(),
    rules: z.array(RuleSchema).default([]),
    rateLimits: z.array(RateLimitSchema).default([]),
    cedar: CedarBlockSchema.optional(),
    pinning: PinningSchema.default({ enabled: false, failOpen: true }),
  })
  .superRefine((doc, ctx) => {
    if (doc.engine === 'cedar' && doc.cedar === undefined) {
      ctx.addIssue({ code: 'custom', path: ['cedar'], message: 'is required with engine: cedar' });
    }
    if (doc.engine === 'cedar' && doc.rules.length > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['rules'],
        message:
          'engine: cedar takes its rules from cedar.policies; remove rules or use engine: cel',
      });
    }
    if (doc.engine === 'cel' && doc.cedar !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['cedar'],
        message: 'is only valid with engine: cedar',
      });
    }
  });

/** A parsed policy document, defaults applied. */
export type PolicyDocument = z.output<typeof PolicyDocumentSchema>;
/** One parsed rule. */
export type RuleDocument = z.output<typeof RuleSchema>;
/** One parsed rate limit. */
export type RateLimitDocument = z.output<typeof RateLimitSchema>;
/** The parsed `pinning:` block. */
export type PinningDocument = z.output<typeof PinningSchema>;

/** Why `id` is not a valid id, or `undefined` when it is. */
export function invalidIdReason(id: string): string | undefined {
  if (!RULE_ID_PATTERN.test(id)) return RULE_ID_MESSAGE;
  return id === 'default' ? '"default" is reserved for the policy default' : undefined;
}

/** The keys each kind of object accepts, for "unknown key" messages. */
export const ALLOWED_KEYS = {
  document: Object.keys(PolicyDocumentSchema.shape),
  rule: Object.keys(RuleSchema.shape),
  rateLimit: Object.keys(RateLimitSchema.shape),
  cedar: Object.keys(CedarBlockSchema.shape),
  pinning: Object.keys(PinningSchema.shape),
} as const;
