import type { Phase, PriorityHint } from './types.ts';

/** Both sides of a priority hint, resolved (a missing side is 0). */
export interface ResolvedPriority {
  request: number;
  response: number;
}

/** The priority an interceptor runs at in `phase`: a number applies to both phases. */
export function resolvePriority(hint: PriorityHint | undefined, phase: Phase): number {
  if (hint === undefined) return 0;
  if (typeof hint === 'number') return hint;
  return hint[phase] ?? 0;
}

/** Resolve both sides of a hint. */
export function resolvePriorities(hint: PriorityHint | undefined): ResolvedPriority {
  return { request: resolvePriority(hint, 'request'), response: resolvePriority(hint, 'response') };
}

/**
 * The shortest hint that resolves to `priority`: a plain number when both sides agree,
 * otherwise an object that leaves out a side equal to 0.
 */
export function serialisePriority(priority: ResolvedPriority): PriorityHint {
  if (priority.request === priority.response) return priority.request;
  const hint: { request?: number; response?: number } = {};
  if (priority.request !== 0) hint.request = priority.request;
  if (priority.response !== 0) hint.response = priority.response;
  return hint;
}

/**
 * Compare two strings by Unicode code point (not UTF-16 code unit, which orders astral
 * characters before U+E000..U+FFFF).
 */
export function compareCodePoints(a: string, b: string): number {
  if (a === b) return 0;
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const ca = ia.next();
    const cb = ib.next();
    if (ca.done) return cb.done ? 0 : -1;
    if (cb.done) return 1;
    const pa = (ca.value as string).codePointAt(0) ?? 0;
    const pb = (cb.value as string).codePointAt(0) ?? 0;
    if (pa !== pb) return pa < pb ? -1 : 1;
  }
}

/** What the chain order is decided by. */
export interface Orderable {
  priority: number;
  name: string;
  serviceId: string;
}

/** Chain order: priority ascending, then name by code point, then service id. */
export function compareChainOrder(a: Orderable, b: Orderable): number {
  if (a.priority !== b.priority) return a.priority < b.priority ? -1 : 1;
  return compareCodePoints(a.name, b.name) || compareCodePoints(a.serviceId, b.serviceId);
}
