/**
 * The interceptor chain in the gateway, with remote interceptor services over real HTTP:
 * ordering, blocking, mutations visible at the backend and at the client, audit mode off
 * the critical path, fail-open and fail-closed when a service is down, denyAs toolResult.
 */
import {
  allow,
  defineMutator,
  defineValidator,
  deny,
  modified,
  unchanged,
} from '@fleet/interceptor-kit';
import { startHttpBackend } from '@fleet/test-fixtures';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { connectClient, defer, serveInterceptors, startGateway, textOf } from './harness.ts';

function textArgMutator(name: string, transform: (s: string) => string, priorityHint?: number) {
  return defineMutator({
    name,
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    ...(priorityHint === undefined ? {} : { priorityHint }),
    handler: (payload) => {
      const p = payload as { arguments?: { text?: unknown } };
      if (typeof p.arguments?.text !== 'string') return unchanged();
      return modified({ ...p, arguments: { ...p.arguments, text: transform(p.arguments.text) } });
    },
  });
}

const responseTagger = defineMutator({
  name: 'tagger',
  hooks: [{ events: ['tools/call'], phase: 'response' }],
  handler: (payload) => {
    const r = payload as { content?: Array<{ type: string; text?: string }> };
    return modified({
      ...r,
      content: (r.content ?? []).map((c) =>
        c.type === 'text' ? { ...c, text: `${c.text} #tagged` } : c,
      ),
    });
  },
});

const forbidden = defineValidator({
  name: 'no-forbidden',
  hooks: [{ events: ['tools/call'], phase: 'request' }],
  handler: (payload) =>
    JSON.stringify(payload).includes('forbidden')
      ? deny('the word "forbidden" is not allowed', { path: 'arguments.text' })
      : allow(),
});

async function setup(
  interceptorsYaml: (urls: string[]) => string,
  services: Parameters<typeof serveInterceptors>[0][],
  extra = '',
) {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const served = await Promise.all(services.map((s) => serveInterceptors(s)));
  const gateway = await startGateway(
    `backends:\n  - {id: fx, url: "${backend.url}"}\n${interceptorsYaml(served.map((s) => s.url))}${extra}`,
    { redis: false },
  );
  const client = await connectClient(gateway.mcpUrl);
  return { backend, served, gateway, client };
}

const list = (urls: string[], overrides: Array<string | undefined> = []) =>
  `interceptors:\n${urls.map((u, i) => `  - url: "${u}"${overrides[i] ? `\n    overrides: ${overrides[i]}` : ''}`).join('\n')}\n`;

describe('the chain in the gateway', () => {
  it('applies request mutators in priority order before the backend and response mutators before the client', async () => {
    const { client, gateway } = await setup(list, [
      [
        textArgMutator('upper', (s) => s.toUpperCase(), 10),
        textArgMutator('exclaim', (s) => `${s}!`, 20),
      ],
      [responseTagger],
    ]);
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    // The backend echoes what it received: upper then exclaim; then the tagger ran on the way out.
    expect(textOf(result)).toBe('[fx] HELLO! #tagged');
    expect((result.structuredContent as { text: string }).text).toBe('HELLO!');
    const phases = gateway.executions
      .filter((e) => e.method === 'tools/call')
      .map((e) => [e.result.phase, e.result.status]);
    expect(phases).toEqual([
      ['request', 'success'],
      ['response', 'success'],
    ]);
  });

  it('coalesces the invocations of concurrent calls into batches, each call keeping its own answers', async () => {
    const run = async (extra: string) => {
      const { client, served } = await setup(
        list,
        [[textArgMutator('exclaim', (s) => `${s}!`), forbidden], [responseTagger]],
        extra,
      );
      await client.callTool({ name: 'echo', arguments: { text: 'warm' } });
      const before = served.map((s) => s.posts());
      const texts = Array.from({ length: 24 }, (_, i) =>
        i % 5 === 4 ? `forbidden ${i}` : `t${i}`,
      );
      const results = await Promise.all(
        texts.map((text) =>
          client.callTool({ name: 'echo', arguments: { text } }).then(textOf, (e: unknown) => e),
        ),
      );
      // Every call got its own mutations and its own verdict, batched or not.
      texts.forEach((text, i) => {
        if (text.startsWith('forbidden')) expect((results[i] as McpError).code).toBe(-32602);
        else expect(results[i]).toBe(`[fx] ${text}! #tagged`);
      });
      return served.map((s, i) => s.posts() - (before[i] ?? 0));
    };
    // 24 calls sent at once, 4 of them denied: 44 request-phase invocations (24 validator,
    // 20 mutator: a denial stops the phase) and 20 for the tagger. One by one, each is a
    // POST; coalesced, the request-phase ones that arrive in the same event-loop turn share
    // one (response phases end at scattered times, so the tagger's may or may not).
    const separate = await run('chain: {coalesceInvocations: false}\n');
    expect(separate[0]).toBeGreaterThanOrEqual(44);
    expect(separate[1]).toBeGreaterThanOrEqual(20);
    const [coalesced] = await run('');
    expect(coalesced).toBeLessThan(44);
  });

  it('blocks with -32602 (policy denial) listing the validator, and never calls the backend', async () => {
    const { client, backend } = await setup(list, [
      [forbidden, textArgMutator('upper', (s) => s.toUpperCase())],
    ]);
    const before = backend.state.counter;
    const error = await client
      .callTool({ name: 'bump', arguments: { text: 'forbidden fruit' } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32602);
    expect((error as McpError).data).toEqual({
      validationErrors: [
        {
          interceptor: 'no-forbidden',
          reason: 'the word "forbidden" is not allowed',
          type: 'validation',
          phase: 'request',
        },
      ],
    });
    expect(backend.state.counter).toBe(before);
    await client.callTool({ name: 'bump', arguments: {} });
    expect(backend.state.counter).toBe(before + 1);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'fine' } }))).toBe(
      '[fx] FINE',
    );
  });

  it('starts request mutators with the validators under speculativeMutators, with the same outcome', async () => {
    const run = async (extra: string) => {
      const mutatorSaw: string[] = [];
      let mutatorStarted = () => {};
      let started = new Promise<void>((resolve) => {
        mutatorStarted = resolve;
      });
      const validatorSawMutatorFirst: boolean[] = [];
      const waitingValidator = defineValidator({
        name: 'no-forbidden',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: async (payload) => {
          // Give the mutator a moment: it has started by now only if it runs alongside.
          const first = await Promise.race([
            started.then(() => true),
            new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 300)),
          ]);
          validatorSawMutatorFirst.push(first);
          return JSON.stringify(payload).includes('forbidden') ? deny('no') : allow();
        },
      });
      const recordingMutator = defineMutator({
        name: 'upper',
        hooks: [{ events: ['tools/call'], phase: 'request' }],
        handler: (payload) => {
          const p = payload as { arguments: { text: string } };
          mutatorSaw.push(p.arguments.text);
          mutatorStarted();
          return modified({ ...p, arguments: { text: p.arguments.text.toUpperCase() } });
        },
      });
      const { client, backend, gateway } = await setup(
        list,
        [[waitingValidator], [recordingMutator]],
        extra,
      );
      const before = backend.state.counter;
      const denied = await client
        .callTool({ name: 'bump', arguments: { text: 'forbidden fruit' } })
        .catch((e: unknown) => e);
      expect((denied as McpError).code).toBe(-32602);
      expect(backend.state.counter).toBe(before);
      // The denied call's audit lists what decided it, as in order.
      const deniedRun = gateway.executions.find((e) => e.result.status === 'validation_failed');
      expect(deniedRun?.result.results.map((r) => r.interceptor)).toEqual(['no-forbidden']);
      started = new Promise<void>((resolve) => {
        mutatorStarted = resolve;
      });
      const allowed = await client.callTool({ name: 'echo', arguments: { text: 'fine' } });
      expect(textOf(allowed)).toBe('[fx] FINE');
      // The admin API says which stage starts with the validators.
      const chain = (await (
        await fetch(`${gateway.base}/admin/chain?event=tools/call&phase=request`)
      ).json()) as { stages: Array<{ kind: string; speculative?: boolean }> };
      const stages = chain.stages.map((s) => `${s.kind}${s.speculative ? ' (speculative)' : ''}`);
      return { mutatorSaw, validatorSawMutatorFirst, stages };
    };
    expect(await run('chain: {speculativeMutators: true}\n')).toEqual({
      mutatorSaw: ['forbidden fruit', 'fine'],
      validatorSawMutatorFirst: [true, true],
      stages: ['validators', 'mutators (speculative)'],
    });
    expect(await run('')).toEqual({
      mutatorSaw: ['fine'],
      validatorSawMutatorFirst: [false, false],
      stages: ['validators', 'mutators'],
    });
  });

  it('sends a service its request validator and mutator as one batch under speculativeMutators', async () => {
    const postsPerCall = async (extra: string) => {
      const { client, served } = await setup(
        list,
        [[forbidden, textArgMutator('upper', (s) => s.toUpperCase())]],
        extra,
      );
      await client.callTool({ name: 'echo', arguments: { text: 'warm' } });
      const before = served[0]?.posts() ?? 0;
      expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } }))).toBe(
        '[fx] HI',
      );
      return (served[0]?.posts() ?? 0) - before;
    };
    expect(await postsPerCall('')).toBe(2);
    expect(await postsPerCall('chain: {speculativeMutators: true}\n')).toBe(1);
  });

  it('answers a denial as an isError tool result when denyAs is toolResult', async () => {
    const { client } = await setup(list, [[forbidden]], 'chain: {denyAs: toolResult}\n');
    const result = await client.callTool({ name: 'echo', arguments: { text: 'forbidden' } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('no-forbidden');
  });

  it('runs audit-mode interceptors off the critical path and never applies their mutations', async () => {
    let auditFinished = false;
    const slowAudit = defineValidator({
      name: 'slow-observer',
      mode: 'audit',
      hooks: [{ events: ['*'], phase: 'request' }],
      handler: async () => {
        await new Promise((r) => setTimeout(r, 400));
        auditFinished = true;
        return deny('observed');
      },
    });
    const auditMutator = textArgMutator('shadow', () => 'SHADOWED');
    const { client } = await setup(
      (urls) => list(urls, [undefined, '{shadow: {mode: audit}}']),
      [[slowAudit], [auditMutator]],
    );
    const result = await client.callTool({ name: 'echo', arguments: { text: 'kept' } });
    expect(textOf(result)).toBe('[fx] kept');
    expect(auditFinished).toBe(false);
    await new Promise((r) => setTimeout(r, 600));
    expect(auditFinished).toBe(true);
  });

  it('fails closed when an interceptor service is down, and open when it is configured to', async () => {
    const closed = await setup(list, [[textArgMutator('upper', (s) => s.toUpperCase())]]);
    await closed.served[0]?.stop();
    const error = await closed.client
      .callTool({ name: 'echo', arguments: { text: 'x' } })
      .catch((e: unknown) => e);
    expect((error as McpError).code).toBe(-32603);
    expect((error as McpError).data).toMatchObject({
      failedInterceptor: 'upper',
      phase: 'request',
      reason: expect.stringMatching(/^unreachable/),
    });
    // The client learns what failed, not where the interceptor service lives.
    expect(JSON.stringify(error)).not.toContain('127.0.0.1');

    const open = await setup(
      (urls) => list(urls, ['{upper: {failOpen: true}}']),
      [[textArgMutator('upper', (s) => s.toUpperCase())]],
    );
    await open.served[0]?.stop();
    expect(textOf(await open.client.callTool({ name: 'echo', arguments: { text: 'x' } }))).toBe(
      '[fx] x',
    );
  });

  it('rejects a mutation that breaks the result shape as a failure of that mutator', async () => {
    const breaker = defineMutator({
      name: 'breaker',
      hooks: [{ events: ['tools/call'], phase: 'response' }],
      handler: () => modified({ content: 'not-an-array' }),
    });
    const { client } = await setup(list, [[breaker]]);
    const error = await client
      .callTool({ name: 'echo', arguments: { text: 'x' } })
      .catch((e: unknown) => e);
    expect((error as McpError).code).toBe(-32603);
    expect((error as McpError).data).toMatchObject({
      failedInterceptor: 'breaker',
      phase: 'response',
    });
  });

  it('passes the principal, trace ids and session to interceptors', async () => {
    const contexts: unknown[] = [];
    const recorder = defineValidator({
      name: 'recorder',
      hooks: [{ events: ['tools/call'], phase: 'request' }],
      handler: (_p, ctx) => {
        contexts.push(ctx.context);
        return allow();
      },
    });
    const { client } = await setup(list, [[recorder]]);
    await client.callTool({ name: 'echo', arguments: { text: 'x' } });
    expect(contexts[0]).toMatchObject({
      principal: { type: 'anonymous' },
      sessionId: expect.any(String),
      traceId: expect.stringMatching(/^[0-9a-f]{32}$/),
      timestamp: expect.any(String),
    });
  });
});
