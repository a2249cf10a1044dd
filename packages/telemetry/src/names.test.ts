/** The name table is a contract: dashboards, alerts and other services spell names this way. */
import { describe, expect, it } from 'vitest';
import {
  ATTR,
  chainStageSpanName,
  FLEET_NAMES,
  interceptorInvokeSpanName,
  METRIC,
  mcpSpanName,
  QUEUE,
  SPAN,
} from './names.ts';

describe('FLEET_NAMES', () => {
  it('holds the names the fleet relies on', () => {
    expect(Object.values(ATTR)).toEqual(
      expect.arrayContaining([
        'mcp.method.name',
        'mcp.tool.name',
        'mcp.prompt.name',
        'mcp.resource.uri',
        'mcp.session.id',
        'fleet.principal.id',
        'fleet.principal.type',
        'fleet.backend.id',
        'fleet.interceptor.name',
        'fleet.interceptor.type',
        'fleet.interceptor.mode',
        'fleet.interceptor.outcome',
        'fleet.interceptor.service',
        'fleet.chain.phase',
        'fleet.chain.event',
        'fleet.chain.status',
        'fleet.chain.stage',
      ]),
    );
    expect(METRIC).toEqual({
      REQUEST_DURATION: 'fleet.request.duration',
      CHAIN_DURATION: 'fleet.chain.duration',
      INTERCEPTOR_DURATION: 'fleet.interceptor.duration',
      CHAIN_ABORTS: 'fleet.chain.aborts',
      BACKEND_DURATION: 'fleet.backend.duration',
      AUDIT_RECORDS: 'fleet.audit.records',
    });
    expect(QUEUE.AUDIT).toBe('fleet-audit');
  });

  it('sections are views of the one table', () => {
    expect(SPAN).toBe(FLEET_NAMES.span);
    expect(ATTR).toBe(FLEET_NAMES.attribute);
    expect(METRIC).toBe(FLEET_NAMES.metric);
    expect(QUEUE).toBe(FLEET_NAMES.queue);
  });

  it('spells attribute and metric names in dotted lower snake case, each once', () => {
    const names = [...Object.values(ATTR), ...Object.values(METRIC)];
    for (const name of names) expect(name).toMatch(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/);
    expect(new Set(names).size).toBe(names.length);
    expect(new Set(Object.values(SPAN)).size).toBe(Object.values(SPAN).length);
  });
});

describe('span names', () => {
  it.each([
    ['tools/call', 'get_weather', 'tools/call get_weather'],
    ['resources/read', 'file:///a.txt', 'resources/read file:///a.txt'],
    ['tools/list', undefined, 'tools/list'],
  ])('mcpSpanName(%s, %s) = %s', (method, target, expected) => {
    expect(mcpSpanName(method, target)).toBe(expected);
  });

  it('names a chain stage by phase and stage', () => {
    expect(chainStageSpanName('request', 'validators')).toBe('fleet.chain request validators');
    expect(chainStageSpanName('response', 'mutators')).toBe('fleet.chain response mutators');
  });

  it('names an invocation like the interceptor-kit server span', () => {
    expect(interceptorInvokeSpanName('pii-redactor')).toBe('interceptor/invoke pii-redactor');
  });
});
