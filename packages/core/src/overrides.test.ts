import { describe, expect, it } from 'vitest';
import {
  FleetError,
  PriorityHintSchema,
  parseInterceptorInfo,
  parseServiceOverrides,
  resolveInterceptor,
  WireParseError,
} from './index.ts';

const descriptor = parseInterceptorInfo({
  name: 'redactor',
  type: 'mutation',
  mode: 'active',
  priorityHint: { request: -1000, response: 1000 },
  hooks: [
    { events: ['tools/*', 'prompts/get'], phase: 'request' },
    { events: ['tools/call'], phase: 'response' },
  ],
});

describe('overrides', () => {
  it('win over the descriptor, which wins over spec defaults', () => {
    const plain = resolveInterceptor('s', descriptor, null);
    expect(plain).toMatchObject({
      mode: 'active',
      failOpen: false,
      timeoutMs: undefined,
      priority: { request: -1000, response: 1000 },
    });
    const overridden = resolveInterceptor(
      's',
      descriptor,
      null,
      parseServiceOverrides({
        redactor: { mode: 'audit', failOpen: true, timeoutMs: 250, priorityHint: 5 },
      }).redactor,
    );
    expect(overridden).toMatchObject({
      mode: 'audit',
      failOpen: true,
      timeoutMs: 250,
      priority: { request: 5, response: 5 },
    });
  });

  it.each([
    [[{ events: ['tools/call'], phase: 'request' }]],
    [
      [
        { events: ['tools/list'], phase: 'request' },
        { events: ['tools/call'], phase: 'response' },
      ],
    ],
    [[]],
  ])('accept narrower hooks %j', (hooks) => {
    const overrides = parseServiceOverrides({ redactor: { hooks } }).redactor;
    expect(resolveInterceptor('s', descriptor, null, overrides).hooks).toEqual(hooks);
  });

  it.each([
    [[{ events: ['*'], phase: 'request' }], '*'],
    [[{ events: ['prompts/get'], phase: 'response' }], 'prompts/get'],
    [[{ events: ['resources/read'], phase: 'request' }], 'resources/read'],
    [
      [
        { events: ['tools/call'], phase: 'both' },
        { events: ['tools/list'], phase: 'response' },
      ],
      'tools/list',
    ],
  ])('refuse hooks that widen: %j', (hooks, widenedEvent) => {
    const overrides = parseServiceOverrides({ redactor: { hooks } }).redactor;
    try {
      resolveInterceptor('s', descriptor, null, overrides);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(FleetError);
      expect((error as FleetError).code).toBe('OVERRIDE_WIDENS_HOOKS');
      const data = (error as FleetError).data as { widened: Array<{ events: string[] }> };
      expect(data.widened.flatMap((h) => h.events)).toContain(widenedEvent);
    }
  });

  it('reads mode "enforce" and phase "both" liberally', () => {
    const parsed = parseServiceOverrides({
      x: { mode: 'enforce', hooks: [{ events: ['a/b'], phase: 'both' }] },
    });
    expect(parsed.x).toEqual({
      mode: 'active',
      hooks: [
        { events: ['a/b'], phase: 'request' },
        { events: ['a/b'], phase: 'response' },
      ],
    });
  });

  it('names the bad field of malformed overrides', () => {
    try {
      parseServiceOverrides({ x: { timeoutMs: 'soon' } });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(WireParseError);
      expect((error as WireParseError).issues[0]?.path).toBe('x.timeoutMs');
    }
  });

  it('refuses unknown override keys', () => {
    expect(() => parseServiceOverrides({ x: { colour: 'red' } })).toThrow(WireParseError);
  });

  it.each([
    [
      'a hook',
      { x: { hooks: [{ events: ['tools/call'], phase: 'request', phsae: 'x' }] } },
      'x.hooks[0]',
    ],
    ['a priority hint', { x: { priorityHint: { request: 1, respones: 2 } } }, 'x.priorityHint'],
  ])('refuses unknown keys inside %s', (_what, overrides, path) => {
    try {
      parseServiceOverrides(overrides);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(WireParseError);
      expect((error as WireParseError).issues.map((i) => i.path).join(' ')).toContain(path);
    }
  });

  it('still reads a service descriptor liberally (extra keys in its priority hint)', () => {
    expect(PriorityHintSchema.parse({ request: 1, future: true })).toEqual({ request: 1 });
  });
});
