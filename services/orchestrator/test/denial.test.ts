/**
 * A policy denial (an interceptor's explicit `valid: false`) is JSON-RPC code -32602 with
 * its `validationErrors` (DESIGN.md §2). Its HTTP status is 403 where the transport lets a status vary: a
 * stateless request answered as plain JSON. A session's answers, and any answer already
 * streaming as SSE, travel with 200 (the status is sent before the denial is known, and
 * session clients read another status as a failed POST). `chain.denyAs: toolResult` answers
 * a `tools/call` denial as an `isError` result instead, with the same code in `_meta`.
 */
import { allow, defineValidator, deny } from '@fleet/interceptor-kit';
import { startHttpBackend } from '@fleet/test-fixtures';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, serveInterceptors, startGateway, textOf } from './harness.ts';
import { postModern } from './raw-http.ts';

const requestGuard = defineValidator({
  name: 'no-forbidden',
  hooks: [{ events: ['tools/call'], phase: 'request' }],
  handler: (payload) =>
    JSON.stringify(payload).includes('forbidden')
      ? deny('the word "forbidden" is not allowed', { path: 'arguments.text' })
      : allow(),
});

const responseGuard = defineValidator({
  name: 'no-done',
  hooks: [{ events: ['tools/call'], phase: 'response' }],
  handler: (payload) =>
    JSON.stringify(payload).includes('"done"') ? deny('results saying done are withheld') : allow(),
});

const VALIDATION_ERRORS = {
  validationErrors: [
    {
      interceptor: 'no-forbidden',
      reason: 'the word "forbidden" is not allowed',
      type: 'validation',
      phase: 'request',
    },
  ],
};

async function setup(extra = '') {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const served = await serveInterceptors([requestGuard, responseGuard]);
  const gateway = await startGateway(
    `backends:\n  - {id: fx, url: "${backend.url}"}\ninterceptors:\n  - url: "${served.url}"\n${extra}`,
    { redis: false },
  );
  return { gateway, backend };
}

describe('policy denials', () => {
  it('answers a stateless plain-JSON request with HTTP 403 and JSON-RPC -32602', async () => {
    const { gateway, backend } = await setup();
    const reply = await postModern(
      gateway.mcpUrl,
      'tools/call',
      {
        name: 'bump',
        arguments: { text: 'forbidden' },
      },
      { id: 0 },
    );
    expect(reply.status).toBe(403);
    expect(reply.headers['content-type']).toContain('application/json');
    expect(reply.json).toEqual({
      jsonrpc: '2.0',
      id: 0,
      error: {
        code: -32602,
        message: 'Blocked by interceptor "no-forbidden": the word "forbidden" is not allowed',
        data: VALIDATION_ERRORS,
      },
    });
    expect(backend.state.counter).toBe(0);
  });

  it('keeps HTTP 200 once the answer is an SSE stream, the error still -32602', async () => {
    const { gateway } = await setup();
    const reply = await postModern(
      gateway.mcpUrl,
      'tools/call',
      { name: 'progress', arguments: { steps: 1 } },
      { meta: { progressToken: 'p' } },
    );
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toContain('text/event-stream');
    expect(reply.events[0]?.method).toBe('notifications/progress');
    expect(reply.json).toMatchObject({
      jsonrpc: '2.0',
      id: 1,
      error: {
        code: -32602,
        data: { validationErrors: [{ interceptor: 'no-done', phase: 'response' }] },
      },
    });
  });

  it('reaches an SDK session client as McpError -32602 with its data (HTTP 200)', async () => {
    const { gateway } = await setup();
    const client = await connectClient(gateway.mcpUrl);
    const error = await client
      .callTool({ name: 'echo', arguments: { text: 'forbidden fruit' } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32602);
    expect((error as McpError).data).toEqual(VALIDATION_ERRORS);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'fine' } }))).toBe(
      '[fx] fine',
    );
  });

  it('answers as an isError tool result with chain.denyAs: toolResult, in both revisions', async () => {
    const { gateway } = await setup('chain: {denyAs: toolResult}\n');
    const client = await connectClient(gateway.mcpUrl);
    const result = await client.callTool({ name: 'echo', arguments: { text: 'forbidden' } });
    expect(result.isError).toBe(true);
    expect((result._meta as Record<string, { code: number }>)['fleet/denial']?.code).toBe(-32602);
    const reply = await postModern(gateway.mcpUrl, 'tools/call', {
      name: 'echo',
      arguments: { text: 'forbidden' },
    });
    expect(reply.status).toBe(200);
    expect(reply.json.result).toMatchObject({
      isError: true,
      _meta: {
        'fleet/denial': { code: -32602, data: VALIDATION_ERRORS },
        'io.modelcontextprotocol/serverInfo': { name: 'interceptor-fleet' },
      },
    });
  });
});
