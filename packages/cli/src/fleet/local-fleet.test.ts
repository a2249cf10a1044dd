// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these configs test ${VAR} expansion.
import { AUDIT_QUEUE } from '@fleet/audit';
import { describe, expect, it } from 'vitest';
import { DEFAULT_AUDIT_QUEUE, fleetAuditQueue } from './local-fleet.ts';

describe('fleetAuditQueue', () => {
  it('defaults to the queue of the standalone services, as @fleet/audit names it', () => {
    expect(DEFAULT_AUDIT_QUEUE).toBe(AUDIT_QUEUE);
  });

  it.each([
    ['the generated config: one queue per fleet', {}, undefined, 'fleet-audit-1a2b'],
    ['an explicit AUDIT_QUEUE wins', { AUDIT_QUEUE: 'mine' }, undefined, 'mine'],
    ['a config that names no queue: the orchestrator default', {}, 'backends: []\n', 'fleet-audit'],
    ['a config with a queue of its own', {}, 'audit: {queue: ours}\n', 'ours'],
    [
      'a config that names one, over AUDIT_QUEUE (the orchestrator reads the config)',
      { AUDIT_QUEUE: 'mine' },
      'audit: {queue: ours}\n',
      'ours',
    ],
    [
      'a config that takes AUDIT_QUEUE: the fleet id',
      {},
      'audit: {queue: "${AUDIT_QUEUE:-fleet-audit}"}\n',
      'fleet-audit-1a2b',
    ],
    [
      'a config that takes AUDIT_QUEUE, which is set',
      { AUDIT_QUEUE: 'mine' },
      'audit: {queue: "${AUDIT_QUEUE}"}\n',
      'mine',
    ],
    [
      'a config that takes another variable',
      { TEAM: 'blue' },
      'audit: {queue: "${TEAM}-audit"}\n',
      'blue-audit',
    ],
    [
      'a config that takes an unset variable with a default',
      {},
      'audit: {queue: "${TEAM:-red}-audit"}\n',
      'red-audit',
    ],
    ['a config that is not YAML (the orchestrator refuses it)', {}, 'audit: [', 'fleet-audit-1a2b'],
  ])('%s', (_, env: Record<string, string>, config, expected) => {
    expect(fleetAuditQueue(env, '1a2b', config)).toBe(expected);
  });
});
