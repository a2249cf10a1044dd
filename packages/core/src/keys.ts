/**
 * Unknown keys in configuration documents: a misspelt key must stop a service with a
 * message that names it and what was meant, never be ignored (an ignored `intercepters:`
 * would run a gateway without its interceptors).
 */
import { ZodError, type z } from 'zod';

/** Levenshtein distance between two strings. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + cost,
      );
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/** `unknown key "x" (did you mean "y"?); allowed: …` for a key not in `allowed`. */
export function unknownKeyMessage(key: string, allowed: readonly string[]): string {
  const close = allowed.find((k) => editDistance(k.toLowerCase(), key.toLowerCase()) <= 2);
  const hint = close ? ` (did you mean "${close}"?)` : '';
  return allowed.length === 0
    ? `unknown key "${key}"`
    : `unknown key "${key}"${hint}; allowed: ${allowed.join(', ')}`;
}

interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  innerType?: z.ZodType;
  in?: z.ZodType;
  options?: readonly z.ZodType[];
  valueType?: z.ZodType;
  keyType?: z.ZodType;
  entries?: Record<string, string | number>;
}
const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** `schema` without its wrappers (default, prefault, optional, pipe/transform, …). */
function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (let def = defOf(current); def.innerType ?? def.in; def = defOf(current))
    current = (def.innerType ?? def.in) as z.ZodType;
  return current;
}

/** The object schemas `schema` may be at this level (wrappers and unions looked through). */
function objectsOf(schema: z.ZodType): Array<Record<string, z.ZodType>> {
  const def = defOf(unwrap(schema));
  if (def.type === 'object' && def.shape) return [def.shape];
  if (def.type === 'union' && def.options) return def.options.flatMap(objectsOf);
  return [];
}

/** The keys of a record keyed by an enum (`z.record(z.enum([...]), …)`), else none. */
function keysOfRecord(schema: z.ZodType): string[] {
  const def = defOf(unwrap(schema));
  if (def.type !== 'record' || !def.keyType) return [];
  const key = defOf(def.keyType);
  return key.type === 'enum' && key.entries ? Object.values(key.entries).map(String) : [];
}

/** The keys an object at `path` of a document parsed by `schema` may have. */
export function allowedKeysAt(schema: z.ZodType, path: ReadonlyArray<PropertyKey>): string[] {
  let level: z.ZodType[] = [schema];
  for (const segment of path) {
    const next: z.ZodType[] = [];
    for (const s of level) {
      const current = unwrap(s);
      const def = defOf(current);
      if (typeof segment === 'number') {
        if (def.type === 'array' && def.element) next.push(def.element);
        if (def.type === 'record' && def.valueType) next.push(def.valueType);
      } else if (def.type === 'record' && def.valueType) {
        next.push(def.valueType);
      } else {
        for (const shape of objectsOf(current)) {
          const child = shape[String(segment)];
          if (child) next.push(child);
        }
      }
    }
    level = next;
  }
  return [
    ...new Set(level.flatMap((s) => [...keysOfRecord(s), ...objectsOf(s).flatMap(Object.keys)])),
  ];
}

/**
 * The issues of a failed parse with each unknown key as its own issue, at the key's path,
 * saying what was probably meant (`unknown key "intercepters" (did you mean
 * "interceptors"?); allowed: …`); other issues as they were. Feed to `z.prettifyError`.
 */
export function withKeyHints(schema: z.ZodType, error: z.ZodError): z.ZodError {
  const issues = error.issues.flatMap((issue): z.core.$ZodIssue[] => {
    if (issue.code !== 'unrecognized_keys') return [issue];
    const allowed = allowedKeysAt(schema, issue.path);
    return issue.keys.map((key) => ({
      code: 'custom',
      path: [...issue.path, key],
      message: unknownKeyMessage(key, allowed),
      input: undefined,
    }));
  });
  return new ZodError(issues);
}
