/**
 * `--override name.key=value`: per-interceptor registry overrides from the command line,
 * merged into the `overrides` body of `POST /admin/services` (`{name: {key: value}}`).
 */
import { parseServiceOverrides, WireParseError } from '@fleet/core';
import { CliError } from './errors.ts';

/** One `--override` argument, parsed. */
export interface OverrideAssignment {
  /** The interceptor's name, e.g. `pii-redactor`. */
  interceptor: string;
  /** The override key, e.g. `timeoutMs`. */
  key: string;
  /** The value: JSON when it parses (numbers, booleans, arrays, objects), else the text. */
  value: unknown;
}

/** Keys whose value is structured and must therefore be written as JSON. */
const JSON_KEYS = new Set(['hooks']);

const SYNTAX = 'expected name.key=value, e.g. pii-redactor.timeoutMs=500';

/**
 * Parse `name.key=value`. The key is what follows the last dot before `=`, so interceptor
 * names may contain dots; the value is everything after the first `=`.
 * @throws {CliError} `USAGE` for a malformed assignment.
 */
export function parseOverrideAssignment(text: string): OverrideAssignment {
  const eq = text.indexOf('=');
  if (eq < 0) throw new CliError('USAGE', `--override "${text}": ${SYNTAX}`);
  const target = text.slice(0, eq).trim();
  const raw = text.slice(eq + 1).trim();
  const dot = target.lastIndexOf('.');
  const interceptor = dot < 0 ? '' : target.slice(0, dot);
  const key = dot < 0 ? '' : target.slice(dot + 1);
  if (interceptor === '' || key === '') {
    throw new CliError('USAGE', `--override "${text}": ${SYNTAX}`);
  }
  if (raw === '') throw new CliError('USAGE', `--override "${text}": the value is empty`);
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    if (JSON_KEYS.has(key)) {
      throw new CliError(
        'USAGE',
        `--override "${text}": ${key} must be JSON, e.g. ${interceptor}.hooks='[{"events":["tools/call"],"phase":"request"}]'`,
      );
    }
  }
  return { interceptor, key, value };
}

/**
 * Merge assignments into `{name: {key: value}}` (a later assignment of the same key wins)
 * and check the result against the registry's override schema, so a typo fails here with
 * exit code 2 instead of at the orchestrator.
 * @throws {CliError} `USAGE` naming every bad path.
 */
export function buildOverrides(
  assignments: readonly OverrideAssignment[],
): Record<string, Record<string, unknown>> {
  const overrides: Record<string, Record<string, unknown>> = {};
  for (const { interceptor, key, value } of assignments) {
    const entry = overrides[interceptor] ?? {};
    entry[key] = value;
    overrides[interceptor] = entry;
  }
  try {
    parseServiceOverrides(overrides);
  } catch (error) {
    if (!(error instanceof WireParseError)) throw error;
    const detail = error.issues
      .map((i) => (i.path ? `${i.path}: ${i.message}` : i.message))
      .join('; ');
    throw new CliError('USAGE', `invalid --override: ${detail}`, { cause: error });
  }
  return overrides;
}
