import { describe, expect, it } from 'vitest';
import { createPiiEngine, ENTITY_TYPES, type TokenPair } from './index.ts';

describe('engine', () => {
  it('uses params.name as the tool of a tools/call request', () => {
    const engine = createPiiEngine({
      config: { tools: { crm: { entities: { EMAIL_ADDRESS: { enabled: false } } } } },
    });
    const crm = engine.transformMcp('request', 'tools/call', {
      name: 'crm',
      arguments: { to: 'a@example.com' },
    });
    expect(crm.changed).toBe(false);
    const other = engine.transformMcp('request', 'tools/call', {
      name: 'mailer',
      arguments: { to: 'a@example.com' },
    });
    expect(other.value).toEqual({ name: 'mailer', arguments: { to: '[EMAIL_ADDRESS]' } });
  });

  it('takes the tool of a response from the options', () => {
    const engine = createPiiEngine({ config: { tools: { crm: { defaultStrategy: 'mask' } } } });
    const result = { content: [{ type: 'text', text: 'a@example.com' }] };
    expect(engine.transformMcp('response', 'tools/call', result, { tool: 'crm' }).value).toEqual({
      content: [{ type: 'text', text: '*@******e.com' }],
    });
  });

  it('tokenizes a response and reports the pairs', () => {
    const pairs: TokenPair[] = [];
    const engine = createPiiEngine({ config: { defaultStrategy: 'tokenize' } });
    const r = engine.transformMcp(
      'response',
      'tools/call',
      {
        content: [{ type: 'text', text: 'a@example.com' }],
        structuredContent: { email: 'a@example.com' },
      },
      { tokenizer: { onToken: (p) => pairs.push(p) } },
    );
    expect(pairs).toHaveLength(1);
    const token = pairs[0]?.token;
    expect(r.value).toEqual({
      content: [{ type: 'text', text: token }],
      structuredContent: { email: token },
    });
    expect(r.counts).toEqual({ EMAIL_ADDRESS: 2 });
  });

  it('guards tool arguments against secrets, naming type and path only', () => {
    const engine = createPiiEngine();
    const secret = ['AKIA', 'IOSFODNN7EXAMPLE'].join('');
    const g = engine.guard('tools/call', {
      name: 'deploy',
      arguments: { env: { AWS_ACCESS_KEY_ID: secret }, note: 'mail a@example.com' },
    });
    expect(g).toEqual({
      allowed: false,
      violations: [{ path: 'arguments.env.AWS_ACCESS_KEY_ID', type: 'AWS_ACCESS_KEY_ID' }],
    });
    expect(engine.guard('tools/call', { name: 'x', arguments: { q: 'hello' } })).toEqual({
      allowed: true,
      violations: [],
    });
  });

  it('treats a credential-named argument as a SECRET for the guard', () => {
    const g = createPiiEngine().guard('tools/call', {
      name: 'login',
      arguments: { password: 'hunter2' },
    });
    expect(g.violations).toEqual([{ path: 'arguments.password', type: 'SECRET' }]);
  });

  it('blocks the block-strategy types too', () => {
    const engine = createPiiEngine({
      config: { guard: { block: [] }, entities: { CREDIT_CARD: { strategy: 'block' } } },
    });
    expect([...engine.blockedTypes()]).toEqual(['CREDIT_CARD']);
    const g = engine.guard('tools/call', {
      name: 'pay',
      arguments: { card: '4111 1111 1111 1111' },
    });
    expect(g.violations).toEqual([{ path: 'arguments.card', type: 'CREDIT_CARD' }]);
  });

  it('scans without transforming', () => {
    const value = { a: 'a@example.com' };
    const r = createPiiEngine().scanValue(value);
    expect(r.counts).toEqual({ EMAIL_ADDRESS: 1 });
    expect(r.findings[0]).toMatchObject({ path: 'a', type: 'EMAIL_ADDRESS', strategy: 'redact' });
    expect(value.a).toBe('a@example.com');
  });

  it('detects every entity type with no config and transforms every detected value', () => {
    const engine = createPiiEngine();
    expect(engine.blockedTypes().size).toBeGreaterThan(0);
    const text = [
      'a@example.com',
      'Phone: +1 212-736-5000',
      '4111 1111 1111 1111',
      'GB82 WEST 1234 5698 7654 32',
      '536-22-8726',
      '192.168.1.1',
      '00:1A:2B:3C:4D:5E',
      'https://u:p4ss@example.org',
      ['AKIA', 'IOSFODNN7EXAMPLE'].join(''),
      '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
      'born on 1/2/1990',
      'Name: Ada Lovelace',
      'password=hunter2!',
    ].join('\n');
    const r = engine.transformText(text);
    expect(r.text).not.toMatch(
      /example\.com|736|4111|WEST|8726|192\.|1A:2B|p4ss|AKIA|0x5a|1990|Ada|hunter/,
    );
    expect(
      Object.keys(r.counts).every((t) => (ENTITY_TYPES as readonly string[]).includes(t)),
    ).toBe(true);
  });

  it('applies config limits to walks', () => {
    const engine = createPiiEngine({ config: { limits: { maxDepth: 2 } } });
    expect(() => engine.transformValue([[['x']]])).toThrow(
      expect.objectContaining({ limit: 'maxDepth' }),
    );
    expect(() => engine.transformValue([[['x']]], { limits: { maxDepth: 5 } })).not.toThrow();
  });

  describe('no detected value leaves a response unchanged (no config)', () => {
    const engine = createPiiEngine();
    const email = 'bob@example.com';

    it.each([
      [
        'tools/call',
        {
          content: [
            {
              type: 'resource_link',
              uri: `mailto:${email}`,
              name: email,
              description: `owner ${email}`,
              annotations: { audience: ['user'], priority: 0.5, comment: email },
              _meta: { owner: email, progressToken: 'p-1' },
            },
            { type: 'text', text: 'ok', extra: email, _meta: { [email]: true } },
          ],
          structuredContent: { [email]: 1, type: email },
          _meta: {
            owner: email,
            traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
          },
          unknown: { nested: [email] },
        },
      ],
      ['prompts/get', { description: `for ${email}`, messages: [], extra: email }],
      [
        'resources/read',
        { contents: [{ uri: `file:///home/${email}/a.txt`, mimeType: 'text/plain', text: 'x' }] },
      ],
    ] as const)('%s', (method, result) => {
      const r = engine.transformMcp('response', method, result);
      expect(JSON.stringify(r.value)).not.toContain(email);
      expect(JSON.stringify(r.findings)).not.toContain(email);
      // Protocol fields stay as they were.
      const out = JSON.stringify(r.value);
      for (const kept of [
        '"type":"resource_link"',
        '"mimeType":"text/plain"',
        '"progressToken":"p-1"',
      ])
        if (JSON.stringify(result).includes(kept)) expect(out).toContain(kept);
    });

    it('renames a key holding PII, naming it in paths without its value', () => {
      const r = engine.transformMcp('response', 'tools/call', {
        content: [],
        structuredContent: { [email]: { note: 'call +1 212-736-5000' }, 'eve@example.com': 2 },
      });
      expect(r.value).toEqual({
        content: [],
        structuredContent: {
          '[EMAIL_ADDRESS]': { note: 'call [PHONE_NUMBER]' },
          '[EMAIL_ADDRESS]#2': 2,
        },
      });
      expect(r.findings.map((f) => [f.path, f.type])).toEqual([
        ['structuredContent[<key>]', 'EMAIL_ADDRESS'],
        ['structuredContent[<key>].note', 'PHONE_NUMBER'],
        ['structuredContent[<key>]', 'EMAIL_ADDRESS'],
      ]);
    });

    it('guards and transforms secrets used as argument keys', () => {
      const key = ['AKIA', 'IOSFODNN7EXAMPLE'].join('');
      const params = { name: 'deploy', arguments: { config: { [key]: 'x' } } };
      const verdict = engine.guard('tools/call', params);
      expect(verdict).toEqual({
        allowed: false,
        violations: [{ path: 'arguments.config[<key>]', type: 'AWS_ACCESS_KEY_ID' }],
      });
      expect(engine.transformMcp('request', 'tools/call', params).value).toEqual({
        name: 'deploy',
        arguments: { config: { '[AWS_ACCESS_KEY_ID]': 'x' } },
      });
    });
  });
});
