import { describe, expect, it } from 'vitest';
import {
  ADMIN_API_NAME,
  ADMIN_LOG_INTERVAL_MS,
  ADMIN_REFUSALS_PER_MINUTE,
  type AdminChange,
  type AuditRecord,
  createAdminAuditor,
  createAdminRecord,
  parseAuditRecord,
} from './index.ts';

const approved: AdminChange = {
  event: 'admin/pins/approve',
  method: 'POST /policy/pins/{tool}/approve',
  target: 'read_file',
  operator: { type: 'service', id: 'FLEET_TOKEN' },
  outcome: 'done',
  durationMs: 2.5,
};
const refused: AdminChange = {
  event: 'admin/pins/approve',
  method: 'POST /policy/pins/{tool}/approve',
  target: 'read_file',
  outcome: 'refused',
  reason: 'a valid bearer token is required',
  durationMs: 0.5,
};

describe('createAdminRecord', () => {
  it.each([
    [
      'a change made',
      approved,
      {
        principal: { type: 'service', id: 'FLEET_TOKEN' },
        decision: 'allowed',
        status: 'success',
        abortReasons: [],
      },
    ],
    [
      'a refused attempt',
      refused,
      {
        decision: 'denied',
        status: 'validation_failed',
        abortReasons: [
          {
            interceptor: ADMIN_API_NAME,
            reason: 'a valid bearer token is required',
            type: 'validation',
            phase: 'request',
          },
        ],
      },
    ],
    [
      'an open API (anonymous operator)',
      { ...approved, operator: { type: 'anonymous' } },
      { principal: { type: 'anonymous' }, decision: 'allowed' },
    ],
    [
      'a tool pin forgotten',
      { ...approved, event: 'admin/pins/forget', method: 'DELETE /policy/pins/{tool}' },
      { principal: { type: 'service', id: 'FLEET_TOKEN' }, decision: 'allowed' },
    ],
  ] as const)('maps %s to a valid admin record', (_, change, expected) => {
    const record = createAdminRecord(change);
    expect(record).toMatchObject({
      kind: 'admin',
      event: change.event,
      phase: 'request',
      method: change.method,
      target: 'read_file',
      interceptors: [],
      durationMs: change.durationMs,
      ...expected,
    });
    if (change.outcome === 'refused') expect(record.principal).toBeUndefined();
    expect(parseAuditRecord(record)).toEqual(record);
  });

  it('records the operator without its claims', () => {
    const operator = { type: 'user', id: 'ops-alice', claims: { email: 'alice@example.com' } };
    const record = createAdminRecord({ ...approved, operator } as AdminChange);
    expect(record.principal).toEqual({ type: 'user', id: 'ops-alice' });
    expect(JSON.stringify(record)).not.toContain('alice@example.com');
  });
});

describe('createAdminAuditor', () => {
  function setUp(enqueue: (record: AuditRecord) => void = () => undefined) {
    let clock = 0;
    const warnings: Array<[string, Record<string, unknown> | undefined]> = [];
    const auditor = createAdminAuditor(
      { enqueue },
      {
        logger: { warn: (message, fields) => warnings.push([message, fields]) },
        now: () => clock,
      },
    );
    return { auditor, warnings, tick: (ms: number) => (clock += ms) };
  }

  it('records refusals up to the bound a minute, says once how many it left out, and always records changes', () => {
    const queued: AuditRecord[] = [];
    const { auditor, warnings, tick } = setUp((record) => queued.push(record));
    for (let i = 0; i < ADMIN_REFUSALS_PER_MINUTE + 5; i++) auditor.record(refused);
    expect(queued).toHaveLength(ADMIN_REFUSALS_PER_MINUTE);
    expect(warnings).toEqual([
      [
        'refused admin API attempts beyond the bound are not audited',
        { unrecorded: 1, perMinute: ADMIN_REFUSALS_PER_MINUTE },
      ],
    ]);
    auditor.record(approved);
    expect(queued.at(-1)?.decision).toBe('allowed');
    tick(60_000);
    for (let i = 0; i < ADMIN_REFUSALS_PER_MINUTE + 1; i++) auditor.record(refused);
    expect(queued).toHaveLength(2 * ADMIN_REFUSALS_PER_MINUTE + 1);
    // The count runs from the start: 5 left out in the first minute, 1 in the second.
    expect(warnings[1]?.[1]).toEqual({ unrecorded: 6, perMinute: ADMIN_REFUSALS_PER_MINUTE });
  });

  it('never throws: a record the sink refuses is dropped and said at most once an interval', () => {
    const { auditor, warnings, tick } = setUp(() => {
      throw new RangeError('the queue refused the record');
    });
    auditor.record(approved);
    auditor.record(approved);
    expect(warnings).toEqual([
      [
        'audit record dropped: it could not be built or queued',
        { dropped: 1, reason: 'RangeError: the queue refused the record' },
      ],
    ]);
    tick(ADMIN_LOG_INTERVAL_MS);
    auditor.record(approved);
    expect(warnings[1]?.[1]).toMatchObject({ dropped: 3 });
  });

  it('survives a logger that throws', () => {
    const auditor = createAdminAuditor(
      {
        enqueue() {
          throw new Error('down');
        },
      },
      {
        logger: {
          warn() {
            throw new Error('logger down');
          },
        },
      },
    );
    expect(() => auditor.record(approved)).not.toThrow();
  });
});
