import { describe, expect, it } from 'vitest';
import { JsonRpcCode, ProtocolError } from './errors.ts';
import {
  classifyRequest,
  type HeaderMap,
  moreVerbose,
  reachesLogLevel,
  SUPPORTED_PROTOCOL_VERSIONS,
} from './revisions.ts';

const V = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};
const call = (meta: Record<string, unknown> = META, name = 'echo') => ({
  id: 1,
  method: 'tools/call',
  params: { name, arguments: {}, _meta: meta },
});
const HEADERS = { 'mcp-protocol-version': V, 'mcp-method': 'tools/call', 'mcp-name': 'echo' };

function failure(message: Parameters<typeof classifyRequest>[0], headers: HeaderMap) {
  try {
    classifyRequest(message, headers);
  } catch (error) {
    expect(error).toBeInstanceOf(ProtocolError);
    return error as ProtocolError;
  }
  throw new Error('expected a ProtocolError');
}

describe('classifyRequest', () => {
  it('reads initialize, plain requests and 2025-11-25 task metadata as session requests', () => {
    expect(
      classifyRequest({ id: 1, method: 'initialize', params: { _meta: META } }, HEADERS),
    ).toEqual({ kind: 'session' });
    expect(classifyRequest({ id: 1, method: 'tools/list' }, {})).toEqual({ kind: 'session' });
    expect(
      classifyRequest({ id: 1, method: 'tools/list' }, { 'mcp-protocol-version': '2025-11-25' }),
    ).toEqual({ kind: 'session' });
    expect(
      classifyRequest(
        {
          id: 1,
          method: 'tasks/get',
          params: { _meta: { 'io.modelcontextprotocol/related-task': { taskId: 't' } } },
        },
        {},
      ),
    ).toEqual({ kind: 'session' });
  });

  it('accepts a complete stateless request and returns what it declared', () => {
    expect(classifyRequest(call(), HEADERS)).toEqual({
      kind: 'stateless',
      meta: { protocolVersion: V, clientCapabilities: {}, clientInfo: { name: 't', version: '1' } },
    });
    const withLevel = call({ ...META, 'io.modelcontextprotocol/logLevel': 'warning' });
    expect(classifyRequest(withLevel, HEADERS)).toMatchObject({ meta: { logLevel: 'warning' } });
  });

  it('decodes a base64 Mcp-Name before comparing', () => {
    expect(
      classifyRequest(call(META, 'café'), { ...HEADERS, 'mcp-name': '=?base64?Y2Fmw6k=?=' }),
    ).toMatchObject({ kind: 'stateless' });
    expect(
      classifyRequest(
        { id: 2, method: 'resources/read', params: { uri: 'fixture://static', _meta: META } },
        { ...HEADERS, 'mcp-method': 'resources/read', 'mcp-name': 'fixture://static' },
      ),
    ).toMatchObject({ kind: 'stateless' });
  });

  const { 'io.modelcontextprotocol/protocolVersion': _v, ...noVersion } = META;
  const { 'io.modelcontextprotocol/clientCapabilities': _c, ...noCapabilities } = META;
  const { 'mcp-protocol-version': _h, ...noVersionHeader } = HEADERS;
  const { 'mcp-method': _m, ...noMethodHeader } = HEADERS;
  const { 'mcp-name': _n, ...noNameHeader } = HEADERS;

  it.each<[string, Parameters<typeof classifyRequest>[0], HeaderMap, number]>([
    ['reserved keys without a version', call(noVersion), HEADERS, JsonRpcCode.INVALID_PARAMS],
    [
      'a modern header without any _meta',
      { id: 1, method: 'tools/list' },
      { 'mcp-protocol-version': V, 'mcp-method': 'tools/list' },
      JsonRpcCode.INVALID_PARAMS,
    ],
    [
      'a non-string version',
      call({ ...META, 'io.modelcontextprotocol/protocolVersion': 20260728 }),
      HEADERS,
      JsonRpcCode.INVALID_PARAMS,
    ],
    [
      'no client capabilities',
      call(noCapabilities),
      HEADERS,
      JsonRpcCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
    ],
    [
      'capabilities that are not an object',
      call({ ...META, 'io.modelcontextprotocol/clientCapabilities': [] }),
      HEADERS,
      JsonRpcCode.INVALID_PARAMS,
    ],
    [
      'a malformed clientInfo',
      call({ ...META, 'io.modelcontextprotocol/clientInfo': { name: 1 } }),
      HEADERS,
      JsonRpcCode.INVALID_PARAMS,
    ],
    [
      'an unknown log level',
      call({ ...META, 'io.modelcontextprotocol/logLevel': 'loud' }),
      HEADERS,
      JsonRpcCode.INVALID_PARAMS,
    ],
    ['no MCP-Protocol-Version header', call(), noVersionHeader, JsonRpcCode.HEADER_MISMATCH],
    [
      'a header version that differs from the body',
      call(),
      { ...HEADERS, 'mcp-protocol-version': '2025-11-25' },
      JsonRpcCode.HEADER_MISMATCH,
    ],
    ['no Mcp-Method header', call(), noMethodHeader, JsonRpcCode.HEADER_MISMATCH],
    [
      'an Mcp-Method that differs',
      call(),
      { ...HEADERS, 'mcp-method': 'tools/list' },
      JsonRpcCode.HEADER_MISMATCH,
    ],
    [
      'an Mcp-Method that differs in case',
      call(),
      { ...HEADERS, 'mcp-method': 'Tools/Call' },
      JsonRpcCode.HEADER_MISMATCH,
    ],
    ['no Mcp-Name on tools/call', call(), noNameHeader, JsonRpcCode.HEADER_MISMATCH],
    [
      'an Mcp-Name that differs',
      call(),
      { ...HEADERS, 'mcp-name': 'other' },
      JsonRpcCode.HEADER_MISMATCH,
    ],
    [
      'an Mcp-Name with broken base64',
      call(),
      { ...HEADERS, 'mcp-name': '=?base64?ZWNobw?=' },
      JsonRpcCode.HEADER_MISMATCH,
    ],
    [
      'an unsupported (future) version',
      call({ ...META, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }),
      { ...HEADERS, 'mcp-protocol-version': '2099-01-01' },
      JsonRpcCode.UNSUPPORTED_PROTOCOL_VERSION,
    ],
    [
      'a session revision named per request',
      call({ ...META, 'io.modelcontextprotocol/protocolVersion': '2025-11-25' }),
      { ...HEADERS, 'mcp-protocol-version': '2025-11-25' },
      JsonRpcCode.UNSUPPORTED_PROTOCOL_VERSION,
    ],
  ])('refuses %s', (_what, message, headers, code) => {
    expect(failure(message, headers).code).toBe(code);
  });

  it('names the supported versions and the requested one in -32022', () => {
    const error = failure(
      call({ ...META, 'io.modelcontextprotocol/protocolVersion': '1900-01-01' }),
      {
        ...HEADERS,
        'mcp-protocol-version': '1900-01-01',
      },
    );
    expect(error.data).toEqual({
      supported: [...SUPPORTED_PROTOCOL_VERSIONS],
      requested: '1900-01-01',
    });
    expect(SUPPORTED_PROTOCOL_VERSIONS[0]).toBe(V);
  });

  it('names the header in -32020 and the field in -32602 and -32021', () => {
    expect(failure(call(), { ...HEADERS, 'mcp-name': 'x' }).data).toEqual({
      header: 'Mcp-Name',
      expected: 'echo',
    });
    expect(failure(call(noCapabilities), HEADERS).data).toEqual({
      requiredCapabilities: {},
      field: '_meta.io.modelcontextprotocol/clientCapabilities',
    });
  });
});

describe('log levels', () => {
  it('lets a line through at the threshold and above, never one of no MCP level', () => {
    expect(reachesLogLevel('error', 'warning')).toBe(true);
    expect(reachesLogLevel('warning', 'warning')).toBe(true);
    expect(reachesLogLevel('info', 'warning')).toBe(false);
    expect(reachesLogLevel('verbose', 'debug')).toBe(false);
    expect(reachesLogLevel(undefined, 'debug')).toBe(false);
  });

  it('picks the more verbose of two levels', () => {
    expect(moreVerbose('error', 'debug')).toBe('debug');
    expect(moreVerbose('info', 'critical')).toBe('info');
    expect(moreVerbose('notice', 'notice')).toBe('notice');
  });
});
