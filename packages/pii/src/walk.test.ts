import { describe, expect, it } from 'vitest';
import {
  createPiiEngine,
  formatJsonPath,
  mapMcpStrings,
  mapStringLeaves,
  mcpTargets,
  PiiLimitError,
} from './index.ts';
import { collectMcpStrings, collectStringLeaves } from './walk.ts';

const upper = (s: string) => s.toUpperCase();

describe('JSON walking', () => {
  it('maps string leaves only; keys and other values stay', () => {
    const value = { 'a@example.com': 'x', n: 1, b: true, z: null, list: ['y', 2, { deep: 'z' }] };
    expect(mapStringLeaves(value, upper)).toEqual({
      'a@example.com': 'X',
      n: 1,
      b: true,
      z: null,
      list: ['Y', 2, { deep: 'Z' }],
    });
  });

  it('returns the same reference when nothing changed, and shares untouched branches', () => {
    const value = { a: { b: 'keep' }, c: ['x', { d: 'change me' }] };
    expect(mapStringLeaves(value, (s) => s)).toBe(value);
    const out = mapStringLeaves(value, (s) => (s === 'change me' ? 'changed' : s));
    expect(out).not.toBe(value);
    expect(out.a).toBe(value.a);
    expect(out.c).not.toBe(value.c);
    expect(value.c[1]).toEqual({ d: 'change me' });
  });

  it('keeps a "__proto__" key an own property', () => {
    const value = JSON.parse('{"__proto__": "x", "a": "y"}') as Record<string, unknown>;
    const out = mapStringLeaves(value, upper) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.hasOwn(out, '__proto__')).toBe(true);
    expect(out.a).toBe('Y');
  });

  it.each([
    [['content', 0, 'text'], 'content[0].text'],
    [['arguments', 'note'], 'arguments.note'],
    [['arguments', 'e-mail'], 'arguments["e-mail"]'],
    [[0, 1], '[0][1]'],
    [[], ''],
  ] as const)('formatJsonPath(%j) = %s', (path, want) => {
    expect(formatJsonPath(path)).toBe(want);
  });

  it('rejects a 10,000-deep array with a typed error, not a stack overflow', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 10_000; i++) deep = [deep];
    const run = () => mapStringLeaves(deep, upper);
    expect(run).toThrow(PiiLimitError);
    try {
      run();
    } catch (error) {
      expect(error).toBeInstanceOf(PiiLimitError);
      expect((error as PiiLimitError).code).toBe('PII_LIMIT_EXCEEDED');
      expect((error as PiiLimitError).limit).toBe('maxDepth');
      expect((error as PiiLimitError).max).toBe(64);
    }
  });

  it('allows exactly maxDepth levels', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 3; i++) deep = [deep];
    expect(mapStringLeaves(deep, upper, { maxDepth: 3 })).toEqual([[['X']]]);
    expect(() => mapStringLeaves([deep], upper, { maxDepth: 3 })).toThrow(PiiLimitError);
  });

  it('bounds the total string size', () => {
    const value = { a: 'x'.repeat(600), b: ['é'.repeat(300)] };
    try {
      mapStringLeaves(value, upper, { maxStringBytes: 1000 });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(PiiLimitError);
      expect((error as PiiLimitError).limit).toBe('maxStringBytes');
      expect((error as PiiLimitError).path).toBe('b[0]');
    }
    expect(() => mapStringLeaves(value, upper, { maxStringBytes: 1200 })).not.toThrow();
  });
});

describe('MCP parts', () => {
  it.each([
    ['tools/call', 'request', [['arguments']]],
    ['tools/call', 'response', [[]]],
    ['resources/read', 'response', [[]]],
    ['prompts/get', 'response', [[]]],
    ['tools/list', 'response', []],
    ['resources/read', 'request', []],
  ] as const)('%s %s', (method, phase, want) => {
    expect(mcpTargets(method, phase)).toEqual(want);
  });

  it('walks every string of a tools/call result but its protocol-structural fields', () => {
    const result = {
      content: [
        {
          type: 'text',
          text: 'hello',
          annotations: { audience: ['user'], priority: 1, note: 'n' },
        },
        { type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' },
        {
          type: 'resource',
          resource: { uri: 'file:///a', text: 'inside', mimeType: 'text/plain' },
        },
        { type: 'resource', resource: { uri: 'file:///b', blob: 'aGVsbG8=' } },
        { type: 'resource_link', uri: 'file:///c', name: 'c', description: 'd', extra: 'e' },
        {
          type: 'text',
          text: 't',
          _meta: { progressToken: 'p', 'io.modelcontextprotocol/x': 'r' },
        },
      ],
      structuredContent: { deep: { list: ['one', 2] }, type: 'user data' },
      _meta: { note: 'meta', traceparent: 'tp', tracestate: 'ts', 'dev.mcp/y': 'r' },
      isError: false,
      unknown: 'field',
    };
    const out = mapMcpStrings('response', 'tools/call', result, upper);
    expect(out).toEqual({
      content: [
        {
          type: 'text',
          text: 'HELLO',
          annotations: { audience: ['user'], priority: 1, note: 'N' },
        },
        { type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' },
        {
          type: 'resource',
          resource: { uri: 'FILE:///A', text: 'INSIDE', mimeType: 'text/plain' },
        },
        { type: 'resource', resource: { uri: 'FILE:///B', blob: 'aGVsbG8=' } },
        { type: 'resource_link', uri: 'FILE:///C', name: 'C', description: 'D', extra: 'E' },
        {
          type: 'text',
          text: 'T',
          _meta: { progressToken: 'p', 'io.modelcontextprotocol/x': 'r' },
        },
      ],
      structuredContent: { deep: { list: ['ONE', 2] }, type: 'USER DATA' },
      _meta: { note: 'META', traceparent: 'tp', tracestate: 'ts', 'dev.mcp/y': 'r' },
      isError: false,
      unknown: 'FIELD',
    });
    expect(out.content[1]).toBe(result.content[1]);
  });

  it('walks resources/read contents and prompts/get results whole', () => {
    expect(
      mapMcpStrings(
        'response',
        'resources/read',
        {
          contents: [
            { uri: 'u', text: 'a', mimeType: 'm' },
            { uri: 'v', blob: 'b' },
          ],
        },
        upper,
      ),
    ).toEqual({
      contents: [
        { uri: 'U', text: 'A', mimeType: 'm' },
        { uri: 'V', blob: 'b' },
      ],
    });
    expect(
      mapMcpStrings(
        'response',
        'prompts/get',
        {
          description: 'd',
          messages: [
            { role: 'user', content: { type: 'text', text: 'hi' } },
            { role: 'assistant', content: { type: 'audio', data: 'QQ==', mimeType: 'audio/wav' } },
          ],
        },
        upper,
      ),
    ).toEqual({
      description: 'D',
      messages: [
        { role: 'user', content: { type: 'text', text: 'HI' } },
        { role: 'assistant', content: { type: 'audio', data: 'QQ==', mimeType: 'audio/wav' } },
      ],
    });
  });

  it('reports findings with paths and types, never values', () => {
    const engine = createPiiEngine();
    const params = {
      name: 'send',
      arguments: { note: 'mail a@example.com', list: ['x', 'call +1 212-736-5000'], n: 5 },
    };
    const r = engine.transformMcp('request', 'tools/call', params);
    expect(r.value).toEqual({
      name: 'send',
      arguments: { note: 'mail [EMAIL_ADDRESS]', list: ['x', 'call [PHONE_NUMBER]'], n: 5 },
    });
    expect(r.findings.map((f) => [f.path, f.type])).toEqual([
      ['arguments.note', 'EMAIL_ADDRESS'],
      ['arguments.list[1]', 'PHONE_NUMBER'],
    ]);
    expect(r.counts).toEqual({ EMAIL_ADDRESS: 1, PHONE_NUMBER: 1 });
    expect(JSON.stringify(r.findings)).not.toMatch(/example|212/);
  });

  it('returns the input itself when the message has no PII', () => {
    const params = { name: 't', arguments: { q: 'weather in Paris' } };
    const r = createPiiEngine().transformMcp('request', 'tools/call', params);
    expect(r.value).toBe(params);
    expect(r.changed).toBe(false);
  });
});

describe('collecting leaves and writing replacements back', () => {
  it('collects in the order mapStringLeaves visits, with keys and paths', () => {
    const value = { a: 'x', list: ['y', 2, { 'e-mail': 'z' }], n: null };
    const leaves = collectStringLeaves(value);
    const visited: Array<[string, string]> = [];
    mapStringLeaves(value, (text, path) => {
      visited.push([text, formatJsonPath(path)]);
      return text;
    });
    expect(leaves.texts.map((t, i) => [t, leaves.pathText(i)])).toEqual(visited);
    expect(leaves.keys).toEqual(['a', 0, 'e-mail']);
    expect(leaves.path(2)).toEqual(['list', 2, 'e-mail']);
    expect(leaves.pathText(2)).toBe('list[2]["e-mail"]');
  });

  it('copies only the containers on changed paths', () => {
    const value = { a: { b: 'keep' }, c: ['x', { d: 'change me' }], e: ['y'] };
    const leaves = collectStringLeaves(value);
    const d = leaves.texts.indexOf('change me');
    const out = leaves.replace([d], ['changed']);
    expect(out).toEqual({ a: { b: 'keep' }, c: ['x', { d: 'changed' }], e: ['y'] });
    expect(out).not.toBe(value);
    expect(out.a).toBe(value.a);
    expect(out.e).toBe(value.e);
    expect(out.c).not.toBe(value.c);
    expect(value.c[1]).toEqual({ d: 'change me' });
    // The same text is no change.
    expect(leaves.replace([0], ['keep'])).toBe(value);
  });

  it('replaces a root string and keeps "__proto__" an own property', () => {
    expect(collectStringLeaves('abc').replace([0], ['ABC'])).toBe('ABC');
    const value = JSON.parse('{"__proto__": "x", "a": "y"}') as Record<string, unknown>;
    const out = collectStringLeaves(value).replace([0, 1], ['X', 'Y']) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.hasOwn(out, '__proto__')).toBe(true);
    expect(out).toEqual(JSON.parse('{"__proto__": "X", "a": "Y"}'));
  });

  it('collects a result in one walk, with paths, and writes replacements back', () => {
    const result = {
      content: [
        { type: 'text', text: 'a', resource: { text: 'b' } },
        { type: 'text', text: 'c' },
      ],
      structuredContent: { s: 'd' },
    };
    const leaves = collectMcpStrings('response', 'tools/call', result);
    // `structuredContent` (long enough to be looked at) is a key leaf.
    expect(leaves.texts).toEqual(['a', 'b', 'c', 'structuredContent', 'd']);
    expect(leaves.isKey(3)).toBe(true);
    expect(leaves.texts.map((_t, i) => leaves.pathText(i))).toEqual([
      'content[0].text',
      'content[0].resource.text',
      'content[1].text',
      'structuredContent',
      'structuredContent.s',
    ]);
    const out = leaves.replace([0, 1, 4], ['A', 'B', 'D']);
    expect(out).toEqual({
      content: [
        { type: 'text', text: 'A', resource: { text: 'B' } },
        { type: 'text', text: 'c' },
      ],
      structuredContent: { s: 'D' },
    });
    expect(out.content[1]).toBe(result.content[1]);
  });

  it('collects keys that may hold an entity and renames them in place, keeping both on a clash', () => {
    const value = {
      structuredContent: {
        email: 'x',
        'bob@example.com': 1,
        'eve@example.com': { note: 'n' },
        '[EMAIL_ADDRESS]': 3,
      },
    };
    const leaves = collectMcpStrings('response', 'tools/call', value);
    const keyLeaves = leaves.texts.filter((_t, i) => leaves.isKey(i));
    // `email` is a short letters-only key: never an entity, never looked at.
    expect(keyLeaves).toEqual([
      'structuredContent',
      'bob@example.com',
      'eve@example.com',
      '[EMAIL_ADDRESS]',
    ]);
    const bob = leaves.texts.indexOf('bob@example.com');
    const eve = leaves.texts.indexOf('eve@example.com');
    const note = leaves.texts.indexOf('n');
    leaves.maskKey(eve);
    expect(leaves.pathText(note)).toBe('structuredContent[<key>].note');
    const out = leaves.replace([bob, eve, note], ['[EMAIL_ADDRESS]', '[EMAIL_ADDRESS]', 'N']);
    expect(Object.entries(out.structuredContent)).toEqual([
      ['email', 'x'],
      ['[EMAIL_ADDRESS]#2', 1],
      ['[EMAIL_ADDRESS]#3', { note: 'N' }],
      ['[EMAIL_ADDRESS]', 3],
    ]);
  });

  it('throws the limits where mapStringLeaves does', () => {
    const value = { a: 'x'.repeat(600), b: ['é'.repeat(300)], c: 'é' };
    // Three bytes per character (an upper bound) are counted until they pass the limit.
    for (const max of [0, 599, 600, 1199, 1200, 1201, 1202, 1800, 2000, 2700, 3000]) {
      const mapped = (() => {
        try {
          mapStringLeaves(value, upper, { maxStringBytes: max });
          return 'ok';
        } catch (error) {
          return (error as PiiLimitError).path;
        }
      })();
      const collected = (() => {
        try {
          collectStringLeaves(value, { maxStringBytes: max });
          return 'ok';
        } catch (error) {
          return (error as PiiLimitError).path;
        }
      })();
      expect(collected).toBe(mapped);
    }
    let deep: unknown = 'x';
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(() => collectStringLeaves(deep)).toThrow(PiiLimitError);
    expect(() => collectMcpStrings('request', 'tools/call', { arguments: deep })).toThrow(
      PiiLimitError,
    );
  });
});
