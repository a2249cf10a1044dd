/**
 * The admin API's audit trail: every change to the registry, and every attempt refused for
 * its credentials, becomes an `admin` audit record naming who, what and when, through the
 * real audit producer and BullMQ queue; reads and requests that change nothing do not.
 */
import { allow, defineValidator } from '@fleet/interceptor-kit';
import { describe, expect, it } from 'vitest';
import type { AdminAction } from '../src/app.ts';
import { serviceIdOf } from '../src/app.ts';
import {
  ADMIN_API_NAME,
  ADMIN_REFUSALS_PER_MINUTE,
  adminRecordOf,
  createAuditObserver,
} from '../src/audit.ts';
import { serveInterceptors, startAuditQueue, startGateway } from './harness.ts';

const ADMIN = 'admin-audit-token-123';

const gate = defineValidator({
  name: 'gate',
  hooks: [{ events: ['tools/call'], phase: 'request' }],
  handler: () => allow(),
});

function admin(base: string, path: string, method = 'GET', body?: unknown, token = ADMIN) {
  return fetch(`${base}/admin${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

describe('admin API audit trail', () => {
  it('records who registered, refreshed and removed a service, and each refused attempt', async () => {
    const audit = await startAuditQueue();
    const observer = createAuditObserver(audit.producer);
    const actions: AdminAction[] = [];
    const gateway = await startGateway('backends: []\n', {
      adminToken: ADMIN,
      onAdminAction: (action) => {
        actions.push(action);
        observer.adminAction(action);
      },
    });
    const service = await serveInterceptors([gate]);
    const id = serviceIdOf(service.url);

    expect((await admin(gateway.base, '/services', 'POST', { url: service.url })).status).toBe(201);
    // Reads change nothing: not in the trail.
    expect((await admin(gateway.base, '/services')).status).toBe(200);
    expect((await admin(gateway.base, '/chain')).status).toBe(200);
    // Nor do requests that fail for other reasons than credentials.
    expect((await admin(gateway.base, '/services', 'POST', { url: 'not a url' })).status).toBe(400);
    expect((await admin(gateway.base, '/services/nope', 'DELETE')).status).toBe(404);
    expect((await admin(gateway.base, `/services/${id}/refresh`, 'POST')).status).toBe(200);
    const refused = await admin(gateway.base, `/services/${id}`, 'DELETE', undefined, 'wrong');
    expect(refused.status).toBe(401);
    expect(
      (await admin(gateway.base, '/services', 'POST', { url: service.url }, 'wrong')).status,
    ).toBe(401);
    expect(
      (await admin(gateway.base, `/services/${encodeURIComponent(id)}`, 'DELETE')).status,
    ).toBe(204);

    const operator = { type: 'service', id: 'FLEET_ADMIN_TOKEN' };
    expect(actions.map(({ durationMs: _, ...rest }) => rest)).toEqual([
      {
        action: 'register',
        method: 'POST /admin/services',
        service: id,
        operator,
        outcome: 'done',
        status: 201,
      },
      {
        action: 'refresh',
        method: 'POST /admin/services/{id}/refresh',
        service: id,
        operator,
        outcome: 'done',
        status: 200,
      },
      {
        action: 'unregister',
        method: 'DELETE /admin/services/{id}',
        service: id,
        outcome: 'refused',
        status: 401,
        reason: 'a valid admin bearer token is required',
      },
      {
        action: 'register',
        method: 'POST /admin/services',
        outcome: 'refused',
        status: 401,
        reason: 'a valid admin bearer token is required',
      },
      {
        action: 'unregister',
        method: 'DELETE /admin/services/{id}',
        service: id,
        operator,
        outcome: 'done',
        status: 204,
      },
    ]);
    for (const action of actions) expect(action.durationMs).toBeGreaterThanOrEqual(0);

    // The same five, as the worker will store them.
    const records = await audit.records();
    expect(
      records.map((r) => [r.kind, r.event, r.target, r.principal?.id, r.decision, r.status]),
    ).toEqual([
      ['admin', 'admin/services/register', id, 'FLEET_ADMIN_TOKEN', 'allowed', 'success'],
      ['admin', 'admin/services/refresh', id, 'FLEET_ADMIN_TOKEN', 'allowed', 'success'],
      ['admin', 'admin/services/unregister', id, undefined, 'denied', 'validation_failed'],
      ['admin', 'admin/services/register', undefined, undefined, 'denied', 'validation_failed'],
      ['admin', 'admin/services/unregister', id, 'FLEET_ADMIN_TOKEN', 'allowed', 'success'],
    ]);
    expect(records[2]?.abortReasons).toEqual([
      {
        interceptor: ADMIN_API_NAME,
        reason: 'a valid admin bearer token is required',
        type: 'validation',
        phase: 'request',
      },
    ]);
    // Neither the service's token nor the refused one reaches the queue.
    expect(JSON.stringify(records)).not.toContain('wrong');
  });

  it('records a change asked for in another case or with a trailing slash, as express serves it', async () => {
    const actions: AdminAction[] = [];
    const gateway = await startGateway('backends: []\n', {
      adminToken: ADMIN,
      onAdminAction: (action) => actions.push(action),
    });
    const service = await serveInterceptors([gate]);
    const id = serviceIdOf(service.url);
    expect((await admin(gateway.base, '/Services/', 'POST', { url: service.url })).status).toBe(
      201,
    );
    expect((await admin(gateway.base, `/SERVICES/${id}/`, 'DELETE')).status).toBe(204);
    expect(actions.map((a) => [a.method, a.service, a.outcome])).toEqual([
      ['POST /admin/services', id, 'done'],
      ['DELETE /admin/services/{id}', id, 'done'],
    ]);
  });

  it('keeps serving when the listener throws', async () => {
    const gateway = await startGateway('backends: []\n', {
      adminToken: ADMIN,
      onAdminAction: () => {
        throw new Error('listener broke');
      },
    });
    const service = await serveInterceptors([gate]);
    expect((await admin(gateway.base, '/services', 'POST', { url: service.url })).status).toBe(201);
    expect((await admin(gateway.base, '/services')).status).toBe(200);
  });

  it('records at most ADMIN_REFUSALS_PER_MINUTE refusals a minute, and says how many it left out', () => {
    let clock = 0;
    const queued: unknown[] = [];
    const warnings: Array<[Record<string, unknown>, string]> = [];
    const observer = createAuditObserver(
      { enqueue: (record) => queued.push(record) },
      { warn: (fields, message) => warnings.push([fields as Record<string, unknown>, message]) },
      () => clock,
    );
    const refused: AdminAction = {
      action: 'unregister',
      method: 'DELETE /admin/services/{id}',
      outcome: 'refused',
      status: 401,
      reason: 'a valid admin bearer token is required',
      durationMs: 1,
    };
    for (let i = 0; i < ADMIN_REFUSALS_PER_MINUTE + 5; i++) observer.adminAction(refused);
    expect(queued).toHaveLength(ADMIN_REFUSALS_PER_MINUTE);
    expect(warnings).toEqual([
      [
        { unrecorded: 1, perMinute: ADMIN_REFUSALS_PER_MINUTE },
        'refused admin API attempts beyond the bound are not audited',
      ],
    ]);
    // Changes made are always recorded, over the bound too.
    observer.adminAction({ ...refused, outcome: 'done', status: 204, reason: undefined });
    expect(queued).toHaveLength(ADMIN_REFUSALS_PER_MINUTE + 1);
    // A minute later refusals are recorded again.
    clock += 60_000;
    observer.adminAction(refused);
    expect(queued).toHaveLength(ADMIN_REFUSALS_PER_MINUTE + 2);
  });

  it('maps an admin JWT operator to the record principal, without its claims', () => {
    const record = adminRecordOf({
      action: 'refresh',
      method: 'POST /admin/services/{id}/refresh',
      service: 'pii-1',
      operator: { type: 'user', id: 'ops-alice', claims: { email: 'alice@example.com' } },
      outcome: 'done',
      status: 200,
      durationMs: 3.5,
    });
    expect(record).toMatchObject({
      kind: 'admin',
      event: 'admin/services/refresh',
      phase: 'request',
      target: 'pii-1',
      principal: { type: 'user', id: 'ops-alice' },
      decision: 'allowed',
      durationMs: 3.5,
      interceptors: [],
      abortReasons: [],
    });
    expect(JSON.stringify(record)).not.toContain('alice@example.com');
  });
});
