import { describe, expect, it } from 'vitest';
import { HTTP_ERROR_CODES, httpStatusOfJsonRpcError, JsonRpcCode } from './errors.ts';

describe('HTTP_ERROR_CODES', () => {
  it('pairs every ingress rejection with a client-fault status, and failures with 5xx', () => {
    for (const [key, { http, jsonrpc }] of Object.entries(HTTP_ERROR_CODES)) {
      if (jsonrpc === JsonRpcCode.INTERNAL_ERROR) expect(http, key).toBeGreaterThanOrEqual(500);
      else expect(http, key).toBeLessThan(500);
    }
  });
});

describe('httpStatusOfJsonRpcError', () => {
  it.each([
    [JsonRpcCode.PARSE_ERROR, 400],
    [JsonRpcCode.INVALID_PARAMS, 400],
    [JsonRpcCode.HEADER_MISMATCH, 400],
    [JsonRpcCode.MISSING_REQUIRED_CLIENT_CAPABILITY, 400],
    [JsonRpcCode.UNSUPPORTED_PROTOCOL_VERSION, 400],
    [JsonRpcCode.METHOD_NOT_FOUND, 404],
    // Owned by several entries, or by none: the body alone carries the error.
    [JsonRpcCode.INVALID_REQUEST, 200],
    [JsonRpcCode.INTERNAL_ERROR, 200],
    [-32050, 200],
  ])('%i → HTTP %i', (code, status) => {
    expect(httpStatusOfJsonRpcError(code)).toBe(status);
  });

  it('answers an interceptor denial (-32602 with validationErrors) with 403', () => {
    const denial = { validationErrors: [{ interceptor: 'p', reason: 'no' }] };
    expect(httpStatusOfJsonRpcError(JsonRpcCode.INVALID_PARAMS, denial)).toBe(403);
    expect(httpStatusOfJsonRpcError(JsonRpcCode.INVALID_PARAMS, { field: 'name' })).toBe(400);
    expect(httpStatusOfJsonRpcError(JsonRpcCode.INTERNAL_ERROR, denial)).toBe(200);
  });
});
