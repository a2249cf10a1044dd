/**
 * Event names and hook patterns. An event is named by the MCP method it governs
 * (`tools/call`, `resources/read`, ...). A hook pattern is an exact event name, `"*"`, or a
 * prefix glob ending in `/*` (`"tools/*"` matches `tools/call` and `tools/list`).
 */

/** Methods the chain never intercepts (besides every `notifications/*` message). */
export const NEVER_INTERCEPTED_METHODS: ReadonlySet<string> = new Set([
  'initialize',
  'ping',
  'interceptors/list',
  'interceptor/invoke',
]);

/** True when `method` is never run through the interceptor chain. */
export function isNeverIntercepted(method: string): boolean {
  return NEVER_INTERCEPTED_METHODS.has(method) || method.startsWith('notifications/');
}

/** True when a hook `pattern` matches the concrete `event`. */
export function matchesEvent(pattern: string, event: string): boolean {
  if (pattern === '*' || pattern === event) return true;
  if (pattern.endsWith('/*')) {
    const prefix = pattern.slice(0, -1); // keep the slash: "tools/"
    return event.length > prefix.length && event.startsWith(prefix);
  }
  return false;
}

/** True when any of `patterns` matches `event`. */
export function matchesAnyEvent(patterns: readonly string[], event: string): boolean {
  for (const pattern of patterns) if (matchesEvent(pattern, event)) return true;
  return false;
}

/**
 * True when every event that `inner` matches is also matched by `outer`, i.e. `inner` is
 * the same as or narrower than `outer`. Used to refuse overrides that widen hooks.
 */
export function patternCovers(outer: string, inner: string): boolean {
  if (outer === '*') return true;
  if (inner === '*') return false;
  if (inner.endsWith('/*')) {
    if (!outer.endsWith('/*')) return false;
    return inner.startsWith(outer.slice(0, -1));
  }
  return matchesEvent(outer, inner);
}

/** True when `pattern` is a well-formed hook pattern (exact name, `*`, or `prefix/*`). */
export function isValidEventPattern(pattern: string): boolean {
  if (pattern === '*') return true;
  if (pattern.length === 0 || /\s/.test(pattern)) return false;
  const star = pattern.indexOf('*');
  if (star === -1) return true;
  return star === pattern.length - 1 && pattern.endsWith('/*') && pattern.length > 2;
}
