/**
 * Nesting limits on `interceptor/invoke` params. A handler that does not walk a value still
 * has it serialised back (a mutator's unchanged payload is echoed) and JSON.stringify
 * recurses: a few thousand levels overflow the stack. So the kit refuses, before any handler
 * runs, params whose `payload`, `config` or `context` nest deeper than a limit, measured
 * without recursion.
 */
import { JsonRpcCode, ProtocolError } from '@fleet/core';

/**
 * The longest delay `setTimeout` keeps (2^31-1 ms, 24.8 days): Node runs a longer one after
 * 1 ms, so budgets are capped at it (a longer one is no limit in practice).
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Default {@link InvokeLimits.maxDepth}: far above real MCP payloads, far below the stack. */
export const DEFAULT_MAX_DEPTH = 256;

/** Limits a kit server applies to every `interceptor/invoke` (batch items included). */
export interface InvokeLimits {
  /**
   * Deepest nesting of arrays and objects accepted in `payload`, `config` and `context`
   * (`{}` is 1 deep, `[[1]]` 2). Deeper params get -32602 `{name, reason: "limit_exceeded",
   * limit: "maxDepth", max, path}` before any handler runs. Default {@link DEFAULT_MAX_DEPTH}.
   */
  maxDepth?: number;
}

/** The fields of invoke params whose values reach handlers and come back in results. */
const CHECKED_FIELDS = ['payload', 'config', 'context'] as const;

function isContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

/**
 * Whether `value` nests deeper than `max`. Iterative, no allocation per scalar: a stack of
 * containers and their depths.
 */
function exceedsDepth(value: unknown, max: number): boolean {
  if (!isContainer(value)) return false;
  const values: object[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const node = values.pop() as object;
    const depth = depths.pop() as number;
    if (depth > max) return true;
    if (Array.isArray(node)) {
      for (const child of node) {
        if (isContainer(child)) {
          values.push(child);
          depths.push(depth + 1);
        }
      }
    } else {
      for (const key in node) {
        if (!Object.hasOwn(node, key)) continue;
        const child = (node as Record<string, unknown>)[key];
        if (isContainer(child)) {
          values.push(child);
          depths.push(depth + 1);
        }
      }
    }
  }
  return false;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** A path segment as `formatPath`-style text: `.key`, `["odd key"]` or `[3]`. */
function segment(key: string | number): string {
  if (typeof key === 'number') return `[${key}]`;
  return IDENTIFIER.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/**
 * The path of the first container nested deeper than `max` in `value` (depth-first, in
 * key order), as text rooted at `root`. Only called once a value is known to be too deep.
 */
function pathBeyond(value: unknown, max: number, root: string): string | undefined {
  interface Frame {
    node: unknown;
    depth: number;
    parent: Frame | undefined;
    key: string | number | undefined;
  }
  const stack: Frame[] = [{ node: value, depth: 1, parent: undefined, key: undefined }];
  while (stack.length > 0) {
    const frame = stack.pop() as Frame;
    if (!isContainer(frame.node)) continue;
    if (frame.depth > max) {
      const parts: string[] = [];
      for (let f: Frame | undefined = frame; f?.key !== undefined; f = f.parent)
        parts.push(segment(f.key));
      return root + parts.reverse().join('');
    }
    const children: Frame[] = [];
    if (Array.isArray(frame.node)) {
      frame.node.forEach((child, index) => {
        children.push({ node: child, depth: frame.depth + 1, parent: frame, key: index });
      });
    } else {
      const record = frame.node as Record<string, unknown>;
      for (const key of Object.keys(record))
        children.push({ node: record[key], depth: frame.depth + 1, parent: frame, key });
    }
    // Pushed in reverse so the first child is visited first.
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i] as Frame);
  }
  return undefined;
}

/**
 * Where `value` first nests deeper than `max` (`{}` is 1 deep), as a path rooted at `root`
 * (`arguments.a[0]...`), or undefined when it does not. Iterative: any depth is safe.
 */
export function nestedBeyond(value: unknown, max: number, root = ''): string | undefined {
  if (!exceedsDepth(value, max)) return undefined;
  return pathBeyond(value, max, root) ?? root;
}

/**
 * Refuse invoke params nested deeper than `maxDepth` in `payload`, `config` or `context`.
 * Anything else about the params (their shape, the name) is left to the host.
 * @throws {ProtocolError} -32602 `{name, reason: "limit_exceeded", limit: "maxDepth", max, path}`.
 */
export function checkInvokeDepth(params: unknown, maxDepth: number = DEFAULT_MAX_DEPTH): void {
  if (!isContainer(params) || Array.isArray(params)) return;
  const record = params as Record<string, unknown>;
  for (const field of CHECKED_FIELDS) {
    const path = nestedBeyond(record[field], maxDepth, field);
    if (path === undefined) continue;
    const name = typeof record.name === 'string' ? record.name : undefined;
    throw new ProtocolError(
      JsonRpcCode.INVALID_PARAMS,
      `Invalid params: "${field}" nests deeper than maxDepth (${maxDepth})`,
      {
        ...(name === undefined ? {} : { name }),
        reason: 'limit_exceeded',
        limit: 'maxDepth',
        max: maxDepth,
        path,
      },
    );
  }
}

/** Validate {@link InvokeLimits.maxDepth}. @throws {RangeError} unless a positive integer. */
export function resolveMaxDepth(maxDepth: number | undefined): number {
  const value = maxDepth ?? DEFAULT_MAX_DEPTH;
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`maxDepth must be a positive integer, got ${value}`);
  return value;
}
