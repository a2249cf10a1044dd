// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these strings test ${VAR} expansion.
import { describe, expect, it } from 'vitest';
import { ConfigError, expandEnv, parseConfig } from './config.ts';

describe('orchestrator config', () => {
  it('applies documented defaults to an empty file', () => {
    const config = parseConfig('');
    expect(config.backends).toEqual([]);
    expect(config.chain).toEqual({
      timeoutMs: 2000,
      denyAs: 'error',
      auditBatchMs: 50,
      maxAuditInFlight: 1000,
      coalesceInvocations: true,
      speculativeMutators: false,
    });
    expect(config.auth).toEqual({ mode: 'none' });
    expect(config.limits).toEqual({
      maxBodyBytes: 4194304,
      maxResponseBytes: 1048576,
      maxBackendMessageBytes: 67_108_864,
      maxClientBacklogBytes: 8_388_608,
      sseKeepAliveMs: 15_000,
      requestTimeoutMs: 30_000,
      headersTimeoutMs: 10_000,
      maxDepth: 60,
      sessionIdleMs: 1_800_000,
      maxInFlightPerSession: 32,
      maxSessionsPerPrincipal: 100,
    });
    expect(config.audit).toEqual({ queue: 'fleet-audit', enabled: true });
  });

  it('reads the design example with ${VAR} expansion', () => {
    const text = `
backends:
  - id: everything
    url: http://127.0.0.1:3001/mcp
    prefix: ""
    resilience: {timeoutMs: 30000, retries: 0, breaker: {failures: 5, resetMs: 10000}, maxConcurrent: 64}
interceptors:
  - url: http://127.0.0.1:8081/mcp
    token: \${FLEET_TOKEN}
    overrides: {pii-redactor: {failOpen: false, timeoutMs: 500}}
chain: {timeoutMs: 2000, denyAs: toolResult}
audit: {queue: fleet-audit}
auth: {mode: none}
limits: {maxBodyBytes: 4194304, maxResponseBytes: 1048576}
`;
    const config = parseConfig(text, { FLEET_TOKEN: 'secret-token' });
    expect(config.backends[0]).toMatchObject({
      id: 'everything',
      url: 'http://127.0.0.1:3001/mcp',
      prefix: '',
      resilience: { timeoutMs: 30000, maxConcurrent: 64 },
    });
    expect(config.interceptors[0]?.token).toBe('secret-token');
    expect(config.chain.denyAs).toBe('toolResult');
  });

  it.each([
    ['backends:\n  - id: a\n', 'backends[0]', 'exactly one of "url"'],
    [
      'backends:\n  - id: a\n    url: http://x/mcp\n    command: node\n',
      'backends[0]',
      'exactly one of',
    ],
    [
      'backends:\n  - {id: a, url: "http://a/mcp"}\n  - {id: b, url: "http://b/mcp"}\n',
      'backends[1].prefix',
      'must be unique',
    ],
    [
      'backends:\n  - {id: a, url: "http://a/mcp", prefix: x_}\n  - {id: a, url: "http://b/mcp", prefix: y_}\n',
      'backends[1].id',
      'duplicate backend id',
    ],
    ['backends:\n  - {id: "bad id", url: "http://a/mcp"}\n', 'backends[0].id', 'letters'],
    [
      'interceptors:\n  - {url: "http://a/mcp", overrides: {x: {timeoutMs: soon}}}\n',
      'interceptors[0].overrides',
      'x.timeoutMs',
    ],
    [
      'interceptors:\n  - {url: "http://user:pw@a/mcp"}\n',
      'interceptors[0].url',
      'must not carry credentials',
    ],
    ['auth: {mode: tokens, tokens: []}\n', 'auth.tokens', ''],
    ['chain: {timeoutMs: -1}\n', 'chain.timeoutMs', ''],
    ['auth: {mode: magic}\n', 'auth.mode', ''],
    // Unknown keys stop the gateway, naming the key and what was meant: an ignored
    // `intercepters:` would run a gateway with no interceptors at all.
    ['intercepters:\n  - url: "http://a/mcp"\n', 'intercepters', 'did you mean "interceptors"'],
    ['chain: {timeoutMS: 5}\n', 'chain.timeoutMS', 'did you mean "timeoutMs"'],
    ['backends:\n  - {id: a, url: "http://a/mcp", prefx: x}\n', 'backends[0].prefx', '"prefix"'],
    [
      'backends:\n  - {id: a, url: "http://a/mcp", resilience: {breaker: {failure: 3}}}\n',
      'backends[0].resilience.breaker.failure',
      'allowed: failures, resetMs',
    ],
    ['auth: {mode: none, tokens: []}\n', 'auth.tokens', 'unknown key "tokens"'],
    ['limits: {maxBody: 10}\n', 'limits.maxBody', 'unknown key "maxBody"'],
  ])('%j fails naming %s', (text, path, detail) => {
    try {
      parseConfig(text);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toContain(path);
      expect((error as Error).message).toContain(detail);
    }
  });

  it('names an unset variable when the field it left empty is invalid', () => {
    const text = 'backends:\n  - {id: a, url: "${BACKEND_URL}"}\n';
    expect(() => parseConfig(text, {})).toThrow(ConfigError);
    expect(() => parseConfig(text, {})).toThrow(
      /Invalid URL \(\$\{BACKEND_URL\} is not set\)\n\s+→ at backends\[0\]\.url/,
    );
    // Set, the same file is fine; an unset variable in a field that may be empty is no error.
    expect(parseConfig(text, { BACKEND_URL: 'http://a/mcp' }).backends[0]?.url).toBe(
      'http://a/mcp',
    );
    expect(parseConfig('interceptors:\n  - {url: "http://a/mcp", token: "${T}"}\n', {})).toEqual(
      expect.objectContaining({ interceptors: [expect.objectContaining({ token: '' })] }),
    );
  });

  it('takes numbers and booleans from a field that is one ${VAR}', () => {
    const text =
      'chain:\n  timeoutMs: ${T}\naudit:\n  enabled: ${E:-true}\ninterceptors:\n  - {url: "http://a/mcp", token: "${T}"}\n';
    const config = parseConfig(text, { T: '500', E: 'false' });
    expect([config.chain.timeoutMs, config.audit.enabled]).toEqual([500, false]);
    // A string field stays a string, whatever the variable holds.
    expect(config.interceptors[0]?.token).toBe('500');
    expect(parseConfig(text, { T: '750' }).audit.enabled).toBe(true);
    expect(() => parseConfig(text, { T: 'soon' })).toThrow(/expected number, received string/);
    expect(() => parseConfig('chain:\n  timeoutMs: ${T}ms\n', { T: '500' })).toThrow(
      /expected number/,
    );
  });

  it('reports YAML syntax errors', () => {
    expect(() => parseConfig('backends: [')).toThrow(/not valid YAML/);
  });

  it.each([
    ['${A}', { A: 'x' }, 'x'],
    ['${A:-dflt}', {}, 'dflt'],
    ['${A:-dflt}', { A: '' }, 'dflt'],
    ['pre-${A}-post', { A: 'm' }, 'pre-m-post'],
    ['${MISSING}', {}, ''],
    ['no vars', {}, 'no vars'],
  ])('expandEnv(%j)', (input, env, want) => {
    expect(expandEnv(input, env)).toBe(want);
  });
});
