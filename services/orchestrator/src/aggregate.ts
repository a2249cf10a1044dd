/**
 * Many backends as one MCP server: list results merged with each backend's prefix, names
 * and URIs routed back by the longest matching prefix (and stripped), pagination cursors
 * that walk across backends.
 */
import { createHash } from 'node:crypto';
import { JsonRpcCode, ProtocolError } from '@fleet/core';
import type { Result } from '@modelcontextprotocol/sdk/types.js';
import type { Backend } from './backends.ts';

/** The list methods that merge across backends, with the field holding their items. */
export const LIST_METHODS = {
  'tools/list': { items: 'tools', capability: 'tools' },
  'prompts/list': { items: 'prompts', capability: 'prompts' },
  'resources/list': { items: 'resources', capability: 'resources' },
  'resources/templates/list': { items: 'resourceTemplates', capability: 'resources' },
} as const;

/** A list method. */
export type ListMethod = keyof typeof LIST_METHODS;

/** A list a backend adds items to, with its `notifications/<kind>/list_changed`. */
export type ListKind = (typeof LIST_METHODS)[ListMethod]['capability'];

/** The methods that list `kind` (resources: resources and their templates). */
export function listMethodsOf(kind: ListKind): ListMethod[] {
  return (Object.keys(LIST_METHODS) as ListMethod[]).filter(
    (method) => LIST_METHODS[method].capability === kind,
  );
}

/**
 * A digest of the items one backend adds to a list, per list method: equal digests, equal
 * lists. Items compare as canonical JSON (object keys sorted) and in any order, so a backend
 * that lists the same items in another order or spells an object's keys in another order
 * has not changed its list.
 */
export function listDigest(items: Partial<Record<ListMethod, readonly unknown[]>>): string {
  const hash = createHash('sha256');
  for (const method of (Object.keys(items) as ListMethod[]).sort()) {
    hash.update(`${method}\n`);
    for (const item of (items[method] ?? []).map(canonicalJson).sort()) hash.update(`${item}\n`);
  }
  return hash.digest('base64url');
}

/** JSON with every object's keys sorted (JSON itself escapes newlines in strings). */
function canonicalJson(value: unknown): string {
  return (
    JSON.stringify(value, (_key, v: unknown) =>
      v !== null && typeof v === 'object' && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
        : v,
    ) ?? 'null'
  );
}

/** True for the list methods that merge across backends. */
export function isListMethod(method: string): method is ListMethod {
  return Object.hasOwn(LIST_METHODS, method);
}

type Item = Record<string, unknown>;

/** Add a backend's prefix to the identifying fields of a list item. */
export function prefixItem(method: ListMethod, item: Item, prefix: string): Item {
  if (!prefix) return item;
  switch (method) {
    case 'tools/list':
    case 'prompts/list':
      return { ...item, name: `${prefix}${String(item.name)}` };
    case 'resources/list':
      return { ...item, uri: `${prefix}${String(item.uri)}` };
    case 'resources/templates/list':
      return { ...item, uriTemplate: `${prefix}${String(item.uriTemplate)}` };
  }
}

interface Cursor {
  /** Index of the backend being paged. */
  b: number;
  /** That backend's own cursor. */
  c?: string;
}

function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

function decodeCursor(raw: unknown): Cursor {
  if (typeof raw !== 'string')
    throw new ProtocolError(JsonRpcCode.INVALID_PARAMS, 'Invalid cursor', { field: 'cursor' });
  try {
    const cursor = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Cursor;
    if (
      !Number.isInteger(cursor.b) ||
      cursor.b < 0 ||
      (cursor.c !== undefined && typeof cursor.c !== 'string')
    )
      throw new Error('shape');
    return cursor;
  } catch {
    throw new ProtocolError(JsonRpcCode.INVALID_PARAMS, 'Invalid cursor', { field: 'cursor' });
  }
}

/** Routes names and URIs to backends. */
export class BackendRouter {
  readonly backends: readonly Backend[];
  readonly #byPrefix: readonly Backend[];

  constructor(backends: readonly Backend[]) {
    this.backends = backends;
    this.#byPrefix = [...backends].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** The backend owning `name` (longest matching prefix) and the name without it. */
  route(name: string): { backend: Backend; name: string } | undefined {
    for (const backend of this.#byPrefix) {
      if (name.startsWith(backend.prefix))
        return { backend, name: name.slice(backend.prefix.length) };
    }
    return undefined;
  }

  /**
   * One page of a merged list: each page is one page of one backend; the cursor says which
   * backend and which of its pages comes next.
   */
  async list(
    method: ListMethod,
    params: Record<string, unknown> | undefined,
    call: (backend: Backend, params: Record<string, unknown> | undefined) => Promise<Result>,
  ): Promise<Result> {
    const { items, capability } = LIST_METHODS[method];
    let cursor: Cursor = params?.cursor === undefined ? { b: 0 } : decodeCursor(params.cursor);
    const rest = { ...params };
    delete rest.cursor;
    while (cursor.b < this.backends.length) {
      const backend = this.backends[cursor.b] as Backend;
      const capable = backend.connected ? backend.capabilities?.[capability] !== undefined : true;
      if (!capable) {
        cursor = { b: cursor.b + 1 };
        continue;
      }
      let page: Result;
      try {
        page = await call(backend, cursor.c === undefined ? rest : { ...rest, cursor: cursor.c });
      } catch (error) {
        // One unreachable backend must not hide the others' items; a broken cursor must.
        if (cursor.c !== undefined || this.backends.length === 1) throw error;
        cursor = { b: cursor.b + 1 };
        continue;
      }
      const list = Array.isArray(page[items]) ? (page[items] as Item[]) : [];
      const next: Cursor | undefined =
        typeof page.nextCursor === 'string'
          ? { b: cursor.b, c: page.nextCursor }
          : cursor.b + 1 < this.backends.length
            ? { b: cursor.b + 1 }
            : undefined;
      const result: Result = {
        ...page,
        [items]: list.map((item) => prefixItem(method, item, backend.prefix)),
      };
      delete result.nextCursor;
      if (next) result.nextCursor = encodeCursor(next);
      return result;
    }
    return { [items]: [] };
  }
}
