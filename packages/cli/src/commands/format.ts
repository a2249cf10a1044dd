/** Cell formatting shared by the admin commands' tables. */
import type { AdminInterceptorInfo } from '../admin-client.ts';

/** `tools/call (request); * (response)`. */
export function formatHooks(hooks: AdminInterceptorInfo['hooks'] | undefined): string {
  return (hooks ?? []).map((h) => `${h.events.join(',')} (${h.phase})`).join('; ');
}

/** A priority hint as one cell: `0`, `5`, or `req 5 / res -1`. */
export function formatPriority(hint: AdminInterceptorInfo['priorityHint']): string {
  if (hint === undefined) return '0';
  if (typeof hint === 'number') return String(hint);
  const request = hint.request ?? 0;
  const response = hint.response ?? 0;
  return request === response ? String(request) : `req ${request} / res ${response}`;
}

/** One interceptor's overrides as `key=value` words: `failOpen=true timeoutMs=250`. */
export function formatOverrides(overrides: unknown): string {
  if (typeof overrides !== 'object' || overrides === null) return '';
  return Object.entries(overrides as Record<string, unknown>)
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
}
