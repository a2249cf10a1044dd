import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.ts';
import {
  checkParamHeaders,
  decodeHeaderValue,
  encodeHeaderValue,
  isHttpToken,
  paramHeadersOf,
  paramHeaderValues,
} from './param-headers.ts';

describe('header value encoding', () => {
  it.each([
    ['us-west-1', 'us-west-1'],
    ['Hello, World!', 'Hello, World!'],
    ['café', '=?base64?Y2Fmw6k=?='],
    ['日本語', '=?base64?5pel5pys6Kqe?='],
    [' padded', '=?base64?IHBhZGRlZA==?='],
    ['padded ', '=?base64?cGFkZGVkIA==?='],
    // A plain value that looks like the sentinel is encoded too, so it cannot be misread.
    ['=?base64?abcd?=', '=?base64?PT9iYXNlNjQ/YWJjZD89?='],
  ])('%j → %j and back', (plain, sent) => {
    expect(encodeHeaderValue(plain)).toBe(sent);
    expect(decodeHeaderValue(sent)).toBe(plain);
  });

  it.each([
    ['=?base64?ZXUtd2VzdC0x=?='], // length not a multiple of 4
    ['=?base64?!!!!?='], // not the alphabet
    ['=?base64??='], // empty
    ['=?base64?/w==?='], // 0xff: not UTF-8
  ])('refuses the malformed sentinel %j', (value) => {
    expect(decodeHeaderValue(value)).toBeUndefined();
  });

  it('reads half a sentinel literally', () => {
    expect(decodeHeaderValue('=?base64?abc')).toBe('=?base64?abc');
    expect(decodeHeaderValue('abc?=')).toBe('abc?=');
  });

  it.each([
    ['Region', true],
    ["x!#$%&'*+-.^_`|~9", true],
    ['', false],
    ['has space', false],
    ['colon:', false],
    ['ümlaut', false],
    ['a\r\nb', false],
  ])('isHttpToken(%j) = %s', (value, ok) => {
    expect(isHttpToken(value)).toBe(ok);
  });
});

const object = (properties: Record<string, unknown>) => ({ type: 'object', properties });

describe('paramHeadersOf', () => {
  it('collects annotations on string, integer and boolean properties, nested through properties', () => {
    const check = paramHeadersOf(
      object({
        region: { type: 'string', 'x-mcp-header': 'Region' },
        confirm: { type: 'boolean', 'x-mcp-header': 'Confirm' },
        options: object({ limit: { type: ['integer', 'null'], 'x-mcp-header': 'Limit' } }),
        query: { type: 'string' },
      }),
    );
    expect(check).toEqual({
      ok: true,
      headers: [
        { name: 'Confirm', path: ['confirm'], type: 'boolean' },
        { name: 'Limit', path: ['options', 'limit'], type: 'integer' },
        { name: 'Region', path: ['region'], type: 'string' },
      ],
    });
    expect(paramHeadersOf(object({ a: { type: 'string' } }))).toEqual({ ok: true, headers: [] });
    expect(paramHeadersOf(undefined)).toEqual({ ok: true, headers: [] });
  });

  it.each([
    ['an empty value', object({ a: { type: 'string', 'x-mcp-header': '' } }), 'HTTP token'],
    ['a value with a space', object({ a: { type: 'string', 'x-mcp-header': 'A B' } }), 'token'],
    ['a value with CR LF', object({ a: { type: 'string', 'x-mcp-header': 'A\r\nB' } }), 'token'],
    ['a non-string value', object({ a: { type: 'string', 'x-mcp-header': 1 } }), 'token'],
    [
      'a duplicate ignoring case',
      object({
        a: { type: 'string', 'x-mcp-header': 'Region' },
        b: { type: 'string', 'x-mcp-header': 'REGION' },
      }),
      'repeats',
    ],
    ['a number property', object({ a: { type: 'number', 'x-mcp-header': 'A' } }), 'integer'],
    ['an object property', object({ a: { ...object({}), 'x-mcp-header': 'A' } }), 'integer'],
    ['a property without type', object({ a: { 'x-mcp-header': 'A' } }), 'integer'],
    ['the root', { type: 'object', 'x-mcp-header': 'A' }, 'reachable'],
    [
      'an array item',
      object({ a: { type: 'array', items: { type: 'string', 'x-mcp-header': 'A' } } }),
      'reachable',
    ],
    [
      'a property under items',
      object({
        a: { type: 'array', items: object({ b: { type: 'string', 'x-mcp-header': 'B' } }) },
      }),
      'reachable',
    ],
    [
      'a oneOf branch',
      { type: 'object', oneOf: [object({ a: { type: 'string', 'x-mcp-header': 'A' } })] },
      'reachable',
    ],
    [
      'an anyOf branch',
      object({ a: { anyOf: [{ type: 'string', 'x-mcp-header': 'A' }] } }),
      'reachable',
    ],
    [
      'an allOf branch',
      { allOf: [object({ a: { type: 'string', 'x-mcp-header': 'A' } })] },
      'reachable',
    ],
    [
      'a $defs entry',
      { ...object({}), $defs: { x: { type: 'string', 'x-mcp-header': 'A' } } },
      'reachable',
    ],
  ])('refuses %s', (_what, schema, reason) => {
    const check = paramHeadersOf(schema);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.reason).toContain(reason);
  });

  it('bounds the walk by depth and by size', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 100; i++) deep = object({ n: deep });
    const tooDeep = paramHeadersOf(deep);
    expect(tooDeep).toEqual({ ok: false, reason: expect.stringContaining('deeper than 32') });
    expect(paramHeadersOf(deep, { maxDepth: 500 }).ok).toBe(true);
    const wide = object(
      Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`p${i}`, { type: 'string' }])),
    );
    expect(paramHeadersOf(wide, { maxNodes: 10 })).toEqual({
      ok: false,
      reason: expect.stringContaining('more than 10'),
    });
  });
});

describe('paramHeaderValues', () => {
  const params = [
    { name: 'Region', path: ['region'], type: 'string' as const },
    { name: 'Limit', path: ['options', 'limit'], type: 'integer' as const },
    { name: 'Confirm', path: ['confirm'], type: 'boolean' as const },
  ];

  it('renders the present arguments and skips absent or null ones', () => {
    expect(
      paramHeaderValues(params, { region: 'eu-west-1', options: { limit: 0 }, confirm: false }),
    ).toEqual({
      'mcp-param-region': 'eu-west-1',
      'mcp-param-limit': '0',
      'mcp-param-confirm': 'false',
    });
    expect(paramHeaderValues(params, { region: null, options: 'x' })).toEqual({});
    expect(paramHeaderValues(params, undefined)).toEqual({});
    expect(paramHeaderValues(params, { region: 'Zürich' })).toEqual({
      'mcp-param-region': '=?base64?WsO8cmljaA==?=',
    });
  });

  it.each([
    ['CR LF', { region: 'x\r\nX-Injected: 1' }, 'region', 'control characters'],
    ['NUL', { region: 'a\u0000b' }, 'region', 'control characters'],
    ['a tab', { region: 'a\tb' }, 'region', 'control characters'],
    ['a lone surrogate', { region: 'a\ud800b' }, 'region', 'well-formed'],
    ['an unsafe integer', { options: { limit: 2 ** 53 } }, 'options.limit', 'safe integer'],
    ['a fraction', { options: { limit: 1.5 } }, 'options.limit', 'not an integer'],
    ['a wrong type', { confirm: 'yes' }, 'confirm', 'not a boolean'],
    ['a huge value', { region: 'x'.repeat(10_000) }, 'region', 'longer than'],
  ])('refuses %s with -32602 naming the parameter', (_what, args, parameter, reason) => {
    let error: unknown;
    try {
      paramHeaderValues(params, args);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as ProtocolError).code).toBe(-32602);
    expect((error as ProtocolError).data).toMatchObject({ parameter });
    expect((error as ProtocolError).message).toContain(reason);
  });
});

describe('checkParamHeaders', () => {
  const params = [
    { name: 'Region', path: ['region'], type: 'string' as const },
    { name: 'Count', path: ['count'], type: 'integer' as const },
    { name: 'Dry', path: ['dry'], type: 'boolean' as const },
  ];
  const code = (fn: () => void) => {
    try {
      fn();
    } catch (error) {
      return [(error as ProtocolError).code, (error as ProtocolError).data];
    }
    return undefined;
  };

  it('accepts headers that spell the arguments, encoded or not, and ignores absent arguments', () => {
    expect(
      code(() =>
        checkParamHeaders(
          params,
          { region: 'Zürich', count: 3, dry: true },
          {
            'mcp-param-region': '=?base64?WsO8cmljaA==?=',
            'mcp-param-count': '3',
            'mcp-param-dry': 'true',
          },
        ),
      ),
    ).toBeUndefined();
    expect(code(() => checkParamHeaders(params, { region: null }, {}))).toBeUndefined();
  });

  it.each([
    ['a missing header', { region: 'eu' }, {}],
    ['a different value', { region: 'eu' }, { 'mcp-param-region': 'us' }],
    ['a different integer', { count: 3 }, { 'mcp-param-count': '4' }],
    ['broken base64', { region: 'eu' }, { 'mcp-param-region': '=?base64?ZX?=' }],
  ])('refuses %s with -32020', (_what, args, headers) => {
    expect(code(() => checkParamHeaders(params, args, headers))?.[0]).toBe(-32020);
  });
});
