/**
 * Loader hook: inside `@modelcontextprotocol/conformance`, `fs` / `node:fs` resolve to
 * ./fs-shim.mjs when the running Node has no `fs.globSync`. Everything else resolves as usual.
 */
import * as fs from 'node:fs';

const SHIM = new URL('./fs-shim.mjs', import.meta.url).href;
const NEEDED = typeof fs.globSync !== 'function';

export async function resolve(specifier, context, nextResolve) {
  if (
    NEEDED &&
    (specifier === 'fs' || specifier === 'node:fs') &&
    context.parentURL?.includes('/@modelcontextprotocol/conformance/')
  ) {
    return { url: SHIM, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
