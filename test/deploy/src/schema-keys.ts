/**
 * The chart's values schema beside the schemas of the configs it renders: wherever a service's
 * zod schema has an object with fixed keys, the matching part of values.schema.json must refuse
 * other keys and allow the same ones. A key the chart allows and the service refuses passes
 * `helm lint` and then stops the service (a crash loop instead of a failed install); a key the
 * service allows and the chart refuses hides a setting.
 */
import type { z } from 'zod';
import { allowedKeysAt } from '../../../packages/core/src/keys.ts';
import { formatPath } from '../../../packages/core/src/wire.ts';

/** The parts of JSON Schema (draft-07) the chart uses for objects. */
export interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  enum?: unknown[];
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  allOf?: JsonSchema[];
  definitions?: Record<string, JsonSchema>;
}

/** A path segment: a key, or 0 for the items of an array. */
type Segment = string | number;

/** Stands for any key of a map (a zod record, a JSON Schema `additionalProperties` schema). */
const ANY_KEY = '<name>';

/** `node` with its `$ref` resolved and its alternatives (`oneOf`, `anyOf`, `allOf`) beside it. */
function alternatives(root: JsonSchema, node: JsonSchema): JsonSchema[] {
  const resolved = node.$ref ? refTarget(root, node.$ref) : node;
  return [
    resolved,
    ...[...(resolved.oneOf ?? []), ...(resolved.anyOf ?? []), ...(resolved.allOf ?? [])].flatMap(
      (alt) => alternatives(root, alt),
    ),
  ];
}

function refTarget(root: JsonSchema, ref: string): JsonSchema {
  const name = /^#\/definitions\/(.+)$/.exec(ref)?.[1];
  const target = name ? root.definitions?.[name] : undefined;
  if (!target) throw new Error(`unresolved $ref ${ref}`);
  return target;
}

const describesObject = (n: JsonSchema) =>
  n.properties !== undefined ||
  n.additionalProperties !== undefined ||
  n.type === 'object' ||
  (Array.isArray(n.type) && n.type.includes('object'));

/**
 * The keys the chart schema allows for an object at `path` below `node`, and whether it refuses
 * others; `undefined` when it describes no object there.
 */
export function chartKeysAt(
  root: JsonSchema,
  node: JsonSchema,
  path: readonly Segment[],
): { keys: string[]; closed: boolean } | undefined {
  let level = [node];
  for (const segment of path) {
    level = level.flatMap((n) =>
      alternatives(root, n).flatMap((alt): JsonSchema[] => {
        if (typeof segment === 'number') return alt.items ? [alt.items] : [];
        const named = alt.properties?.[segment];
        if (named) return [named];
        return typeof alt.additionalProperties === 'object' ? [alt.additionalProperties] : [];
      }),
    );
  }
  const objects = level.flatMap((n) => alternatives(root, n)).filter(describesObject);
  if (objects.length === 0) return undefined;
  const keys = objects.flatMap((o) => Object.keys(o.properties ?? {}));
  const closed = objects.every((o) => o.additionalProperties === false);
  return { keys: [...new Set(keys)], closed };
}

/** Every path at which `schema` has an object with fixed keys, with those keys. */
function serviceObjects(
  schema: z.ZodType,
  path: Segment[] = [],
): Array<{ path: Segment[]; keys: string[] }> {
  const keys = allowedKeysAt(schema, path);
  if (keys.length > 0)
    return [{ path, keys }, ...keys.flatMap((key) => serviceObjects(schema, [...path, key]))];
  // No fixed keys: a map (any key) or an array (item 0) of objects, or a plain value.
  for (const segment of [ANY_KEY, 0]) {
    if (allowedKeysAt(schema, [...path, segment]).length > 0)
      return serviceObjects(schema, [...path, segment]);
  }
  return [];
}

/** Options of {@link keyMismatches}. */
export interface KeyMismatchOptions {
  /** values.schema.json as a whole (for `$ref`s). */
  root: JsonSchema;
  /** The part of it describing the rendered config. */
  node: JsonSchema;
  /** The service's schema of that config. */
  service: z.ZodType;
  /** Paths (`audit.queue`) the service accepts and the chart refuses on purpose: it writes them. */
  chartOwned?: readonly string[];
}

/**
 * Every disagreement between the chart's schema at `node` and the service's schema: objects the
 * chart leaves open, keys only one of them allows. Empty when they agree.
 */
export function keyMismatches(options: KeyMismatchOptions): string[] {
  const { root, node, service, chartOwned = [] } = options;
  const owned = (path: Segment[]) =>
    chartOwned.some((o) => {
      const p = formatPath(path);
      return p === o || p.startsWith(`${o}.`) || p.startsWith(`${o}[`);
    });
  const problems: string[] = [];
  for (const { path, keys } of serviceObjects(service)) {
    if (owned(path)) continue;
    const at = formatPath(path) || '<root>';
    const chart = chartKeysAt(root, node, path);
    if (!chart?.closed) {
      problems.push(`${at}: the chart allows any key, the service only ${keys.join(', ')}`);
      continue;
    }
    const chartOnly = chart.keys.filter((k) => !keys.includes(k));
    const serviceOnly = keys.filter((k) => !chart.keys.includes(k) && !owned([...path, k]));
    if (chartOnly.length > 0)
      problems.push(`${at}: the chart allows ${chartOnly.join(', ')}, the service refuses it`);
    if (serviceOnly.length > 0)
      problems.push(`${at}: the service allows ${serviceOnly.join(', ')}, the chart refuses it`);
  }
  return problems;
}
