/**
 * The config the pii-redactor service loads (YAML at `PII_CONFIG`), as a zod schema. Every
 * field has a default, so an empty config detects every entity type and redacts every
 * detected value. Parse once at the edge with {@link parsePiiConfig}: errors name the path.
 */
import { withKeyHints } from '@fleet/core';
import { z } from 'zod';
import { isPhoneRegion } from './detectors/phone.ts';
import { ENTITY_TYPES, type EntityType, SECRET_ENTITY_TYPES } from './entities.ts';
import { PiiConfigError, type PiiConfigIssue } from './errors.ts';
import { formatJsonPath } from './walk.ts';

/** One of the five strategies. */
export const StrategySchema = z.enum(['redact', 'mask', 'hash', 'tokenize', 'block']);

/** One of {@link ENTITY_TYPES}. */
export const EntityTypeSchema = z.enum(ENTITY_TYPES);

const SLASHED = /^\/(.+)\/([a-z]*)$/s;

/**
 * Compile an allow-list pattern. `/source/flags` keeps its flags (`i`, `m`, `s`); a bare source
 * is used as is. Either way the pattern must match the whole value.
 */
export function compileAllowPattern(pattern: string): RegExp {
  const slashed = SLASHED.exec(pattern);
  const source = slashed?.[1] ?? pattern;
  const flags = [...new Set((slashed?.[2] ?? '').replace(/[^ims]/g, ''))].join('');
  return new RegExp(`^(?:${source})$`, `${flags}u`);
}

const AllowPatternSchema = z
  .string()
  .min(1)
  .refine(
    (p) => {
      try {
        compileAllowPattern(p);
        return true;
      } catch {
        return false;
      }
    },
    { message: 'not a valid regular expression' },
  );

/** Settings of one entity type. Absent fields inherit (tool → global → defaults). */
export const EntitySettingsSchema = z.strictObject({
  /** Detect this type at all (default true). */
  enabled: z.boolean().optional(),
  /** What replaces a detected value (default: `defaultStrategy`). */
  strategy: StrategySchema.optional(),
  /** Minimum score in [0, 1] to report a detection (default: `defaultThreshold`). */
  threshold: z.number().min(0).max(1).optional(),
  /** Characters the `mask` strategy keeps at the end (default: `mask.keepLast`). */
  keepLast: z.int().min(0).max(64).optional(),
});

/** Values never touched: exact strings and whole-value regexes (`/…/i` for flags). */
export const AllowListSchema = z.strictObject({
  values: z.array(z.string().min(1)).default([]),
  patterns: z.array(AllowPatternSchema).default([]),
});

/**
 * Settings by entity type. An object with one optional key per type rather than a record, so
 * a misspelt type is an unknown key whose message lists the types (`did you mean …?`).
 */
const EntitiesSchema = z.strictObject(
  Object.fromEntries(ENTITY_TYPES.map((type) => [type, EntitySettingsSchema.optional()])) as {
    [K in EntityType]: z.ZodOptional<typeof EntitySettingsSchema>;
  },
);

/** Overrides for one tool (by `tools/call` name); merged over the global settings. */
export const ToolOverrideSchema = z.strictObject({
  defaultStrategy: StrategySchema.optional(),
  entities: EntitiesSchema.prefault({}),
  /** Added to the global allow-list for this tool. */
  allow: AllowListSchema.prefault({}),
});

/** The whole config. */
export const PiiConfigSchema = z.strictObject({
  /** Strategy of every type without its own (default `redact`, secrets included). */
  defaultStrategy: StrategySchema.default('redact'),
  /** Score threshold of every type without its own (default 0.5). */
  defaultThreshold: z.number().min(0).max(1).default(0.5),
  entities: EntitiesSchema.prefault({}),
  mask: z
    .strictObject({
      keepLast: z.int().min(0).max(64).default(4),
      char: z.string().length(1).default('*'),
    })
    .prefault({}),
  allow: AllowListSchema.prefault({}),
  tools: z.record(z.string().min(1), ToolOverrideSchema).default({}),
  /** Where the service reads the HMAC key for `hash` (never the key itself). */
  hash: z
    .strictObject({
      keyEnv: z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
        .default('PII_HMAC_KEY'),
    })
    .prefault({}),
  /** Lifetime of `tokenize` vault entries, used by the service. */
  tokens: z.strictObject({ ttlSeconds: z.int().min(1).max(2_592_000).default(3600) }).prefault({}),
  /** Entity types the guard rejects in tool arguments (default: every secret type). */
  guard: z
    .strictObject({ block: z.array(EntityTypeSchema).default([...SECRET_ENTITY_TYPES]) })
    .prefault({}),
  phone: z
    .strictObject({
      /** Region for numbers written without a country code (ISO 3166 alpha-2). */
      defaultRegion: z
        .string()
        .refine(isPhoneRegion, { message: 'not a region known to libphonenumber-js' })
        .default('US'),
    })
    .prefault({}),
  limits: z
    .strictObject({
      maxDepth: z.int().min(1).max(1024).default(64),
      maxStringBytes: z
        .int()
        .min(1)
        .max(1024 * 1024 * 1024)
        .default(4 * 1024 * 1024),
    })
    .prefault({}),
});

/** A parsed config, every default filled in. */
export type PiiConfig = z.output<typeof PiiConfigSchema>;

/** A config as written (every field optional). */
export type PiiConfigInput = z.input<typeof PiiConfigSchema>;

/** Settings of one entity type as written. */
export type EntitySettings = z.output<typeof EntitySettingsSchema>;

/** Overrides for one tool. */
export type ToolOverride = z.output<typeof ToolOverrideSchema>;

/**
 * Parse a config (the object YAML gave; `undefined` or `null` → all defaults). Throws
 * {@link PiiConfigError} whose `issues` name every bad path, e.g.
 * `entities.EMAIL_ADDRESS.strategy` or `allow.patterns[0]`. An unknown key is an issue at
 * its own path saying what was probably meant (`guard.blok: unknown key "blok" (did you
 * mean "block"?); allowed: block`): a misspelt key must never be ignored.
 */
export function parsePiiConfig(input: unknown): PiiConfig {
  const parsed = PiiConfigSchema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const { issues: zodIssues } = withKeyHints(PiiConfigSchema, parsed.error);
  const issues: PiiConfigIssue[] = zodIssues.map((issue) => ({
    path: formatJsonPath(issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))),
    message: issue.message,
  }));
  throw new PiiConfigError(issues);
}
