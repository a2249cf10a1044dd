/**
 * Dispatch checks on `tools/call`: arguments validated against the tool's `inputSchema`
 * (ajv, compiled once per schema, JSON Schema 2020-12 or draft-07 by `$schema`) before any
 * interceptor or backend sees them, and a result's text content clamped to a byte budget.
 */
import { JsonRpcCode, ProtocolError } from '@fleet/core';
import type { Result } from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { Logger } from './logger.ts';

/** One failing field of a tool call's arguments. */
export interface ArgumentError {
  /** JSON pointer of the failing field (`""` is the arguments object itself). */
  path: string;
  message: string;
}

/** Most distinct schemas kept compiled; beyond it the cache starts over. */
const MAX_COMPILED = 2000;

const DRAFT_07 = /json-schema\.org\/draft-0[467]\/schema/;

/** Compiles each distinct input schema once and validates arguments with it. */
export class SchemaValidators {
  readonly #log: Logger;
  readonly #options = {
    strict: false,
    allErrors: true,
    // Two tools may carry schemas with the same `$id`: never register them globally.
    addUsedSchema: false,
    validateSchema: true,
  } as const;
  #draft2020 = new Ajv2020(this.#options);
  #draft07 = new Ajv(this.#options);
  /** Serialized schema → compiled validator, or null when it does not compile. */
  readonly #compiled = new Map<string, ValidateFunction | null>();

  constructor(log: Logger) {
    this.#log = log;
  }

  /**
   * The errors of `args` against `schema`, or undefined when they conform (or when the
   * schema cannot be compiled, which is logged once and not held against the call).
   */
  validate(tool: string, schema: unknown, args: unknown): ArgumentError[] | undefined {
    const validator = this.#validator(tool, schema);
    if (!validator || validator(args)) return undefined;
    return (validator.errors ?? []).map(toArgumentError);
  }

  #validator(tool: string, schema: unknown): ValidateFunction | null {
    if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return null;
    const key = JSON.stringify(schema);
    const cached = this.#compiled.get(key);
    if (cached !== undefined) return cached;
    if (this.#compiled.size >= MAX_COMPILED) {
      // Fresh ajv instances too: ajv keeps a reference to every compiled schema.
      this.#compiled.clear();
      this.#draft2020 = new Ajv2020(this.#options);
      this.#draft07 = new Ajv(this.#options);
    }
    const declared = (schema as { $schema?: unknown }).$schema;
    const ajv =
      typeof declared === 'string' && DRAFT_07.test(declared) ? this.#draft07 : this.#draft2020;
    let compiled: ValidateFunction | null;
    try {
      compiled = ajv.compile(
        typeof declared === 'string' && /draft-0[46]/.test(declared)
          ? withoutKey(schema as Record<string, unknown>, '$schema')
          : (schema as Record<string, unknown>),
      );
    } catch (error) {
      this.#log.warn(
        { tool, err: (error as Error).message },
        'tool inputSchema does not compile; its arguments are not validated',
      );
      compiled = null;
    }
    this.#compiled.set(key, compiled);
    return compiled;
  }
}

function withoutKey(object: Record<string, unknown>, key: string): Record<string, unknown> {
  const copy = { ...object };
  delete copy[key];
  return copy;
}

function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

function toArgumentError(error: ErrorObject): ArgumentError {
  const params = error.params as { missingProperty?: unknown; additionalProperty?: unknown };
  const child =
    error.keyword === 'required' && typeof params.missingProperty === 'string'
      ? params.missingProperty
      : error.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string'
        ? params.additionalProperty
        : undefined;
  const path =
    child === undefined ? error.instancePath : `${error.instancePath}/${escapePointer(child)}`;
  return { path, message: error.message ?? error.keyword };
}

/** The -32602 error for arguments that do not match the tool's schema. */
export function invalidArguments(tool: string, errors: ArgumentError[]): ProtocolError {
  const summary = errors.map((e) => `${e.path || '/'} ${e.message}`).join('; ');
  return new ProtocolError(
    JsonRpcCode.INVALID_PARAMS,
    `Invalid arguments for tool ${tool}: ${summary}`,
    { tool, errors },
  );
}

/** UTF-8 size of one code point (a lone surrogate is sent as U+FFFD: 3 bytes). */
function utf8Size(codePoint: number): number {
  return codePoint < 0x80 ? 1 : codePoint < 0x800 ? 2 : codePoint < 0x10000 ? 3 : 4;
}

/** The longest prefix of `text` that fits in `budget` UTF-8 bytes, cut between code points. */
export function truncateUtf8(text: string, budget: number): string {
  let bytes = 0;
  let i = 0;
  while (i < text.length) {
    const codePoint = text.codePointAt(i) as number;
    const size = utf8Size(codePoint);
    if (bytes + size > budget) break;
    bytes += size;
    i += codePoint > 0xffff ? 2 : 1;
  }
  return text.slice(0, i);
}

/**
 * A `tools/call` result whose `content[].text` totals at most `maxBytes` UTF-8 bytes: the
 * text item where the budget runs out is cut on a character boundary and a notice appended
 * to it; later text items are dropped (other content is kept). Unchanged when it fits.
 */
export function clampTextContent(result: Result, maxBytes: number): Result {
  const content = result.content;
  if (!Array.isArray(content)) return result;
  const isText = (item: unknown): item is { type: 'text'; text: string } =>
    typeof item === 'object' &&
    item !== null &&
    (item as { type?: unknown }).type === 'text' &&
    typeof (item as { text?: unknown }).text === 'string';
  let total = 0;
  for (const item of content) if (isText(item)) total += Buffer.byteLength(item.text, 'utf8');
  if (total <= maxBytes) return result;

  let remaining = maxBytes;
  let cut = false;
  const clamped: unknown[] = [];
  for (const item of content) {
    if (!isText(item)) {
      clamped.push(item);
      continue;
    }
    if (cut) continue;
    const size = Buffer.byteLength(item.text, 'utf8');
    if (size <= remaining) {
      remaining -= size;
      clamped.push(item);
      continue;
    }
    const kept = truncateUtf8(item.text, remaining);
    const shown = maxBytes - remaining + Buffer.byteLength(kept, 'utf8');
    clamped.push({
      ...item,
      text: `${kept}\n[… truncated by the gateway: ${shown} of ${total} bytes shown]`,
    });
    cut = true;
  }
  return { ...result, content: clamped };
}
