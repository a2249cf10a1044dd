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
