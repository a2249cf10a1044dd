import { describe, expect, it } from 'vitest';
import { CliError } from './errors.ts';
import { buildOverrides, parseOverrideAssignment } from './overrides.ts';

describe('parseOverrideAssignment', () => {
  it.each([
    ['pii-redactor.timeoutMs=500', { interceptor: 'pii-redactor', key: 'timeoutMs', value: 500 }],
    ['guard.failOpen=true', { interceptor: 'guard', key: 'failOpen', value: true }],
    ['guard.mode=audit', { interceptor: 'guard', key: 'mode', value: 'audit' }],
    ['guard.mode="audit"', { interceptor: 'guard', key: 'mode', value: 'audit' }],
    ['guard.priorityHint=-5', { interceptor: 'guard', key: 'priorityHint', value: -5 }],
    [
      'guard.priorityHint={"request":10}',
      { interceptor: 'guard', key: 'priorityHint', value: { request: 10 } },
    ],
    [
      'guard.hooks=[{"events":["tools/call"],"phase":"request"}]',
      {
        interceptor: 'guard',
        key: 'hooks',
        value: [{ events: ['tools/call'], phase: 'request' }],
      },
    ],
    [
      'com.example.guard.mode=active',
      { interceptor: 'com.example.guard', key: 'mode', value: 'active' },
    ],
    ['guard.note=a=b', { interceptor: 'guard', key: 'note', value: 'a=b' }],
  ])('%s', (text, expected) => {
    expect(parseOverrideAssignment(text)).toEqual(expected);
  });

  it.each([
    ['guard.failOpen', 'expected name.key=value'],
    ['guard=true', 'expected name.key=value'],
    ['.mode=audit', 'expected name.key=value'],
    ['guard.=audit', 'expected name.key=value'],
    ['guard.mode=', 'the value is empty'],
    ['guard.hooks=tools/call', 'hooks must be JSON'],
  ])('refuses %s', (text, message) => {
    const error = (() => {
      try {
        parseOverrideAssignment(text);
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(CliError);
    expect(error).toMatchObject({ code: 'USAGE', exitCode: 2 });
    expect((error as CliError).message).toContain(message);
  });
});

describe('buildOverrides', () => {
  it('merges assignments per interceptor; a later one wins', () => {
    const overrides = buildOverrides([
      { interceptor: 'a', key: 'timeoutMs', value: 100 },
      { interceptor: 'b', key: 'failOpen', value: true },
      { interceptor: 'a', key: 'timeoutMs', value: 200 },
      { interceptor: 'a', key: 'mode', value: 'audit' },
    ]);
    expect(overrides).toEqual({ a: { timeoutMs: 200, mode: 'audit' }, b: { failOpen: true } });
  });

  it('checks the result against the registry override schema', () => {
    expect(() => buildOverrides([{ interceptor: 'a', key: 'timeoutMs', value: 'soon' }])).toThrow(
      expect.objectContaining({ code: 'USAGE', message: expect.stringContaining('a.timeoutMs') }),
    );
    expect(() => buildOverrides([{ interceptor: 'a', key: 'retries', value: 3 }])).toThrow(
      CliError,
    );
  });
});
