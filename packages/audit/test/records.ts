/**
 * Test records, in a module of their own: the helpers load vitest (their cleanups), which the
 * child processes of the crash tests (`producer-child.ts`) do not run under.
 */
import { type AuditRecord, createAuditRecord } from '../src/index.ts';

/** `count` distinct, ordered records (targets `tool-<start>`, `tool-<start+1>`, ...). */
export function makeRecords(count: number, start = 0): AuditRecord[] {
  return Array.from({ length: count }, (_, i) =>
    createAuditRecord({
      kind: 'chain',
      event: 'tools/call',
      phase: 'request',
      method: 'tools/call',
      target: `tool-${start + i}`,
      decision: 'allowed',
      status: 'success',
      durationMs: 1,
    }),
  );
}
