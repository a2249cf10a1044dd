/**
 * A backend that restarts (a new process behind the same URL, which no longer knows the
 * gateway's MCP session, or a stdio child that was killed) gets back, on the gateway's new
 * connection, what the live sessions hold there: their resource subscriptions and the log
 * level. Sessions are told a list changed only when it did: the gateway compares the new
 * connection's lists with what it read on the old one. Through a real gateway and real fixture
 * backends over HTTP and stdio.
 */
import { randomUUID } from 'node:crypto';
import {
  createFixtureState,
  type FixtureState,
  freePort,
  type HttpBackend,
  type ServedMcp,
  serveMcpOverHttp,
  startHttpBackend,
  stdioBackendCommand,
} from '@fleet/test-fixtures';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it, vi } from 'vitest';
import {
  alive,
  childrenMatching,
  connectClient,
  defer,
  type LoggedLine,
  recordingLogger,
  startGateway,
  textOf,
  waitFor,
} from './harness.ts';

const TOOLS_CHANGED = 'notifications/tools/list_changed';
const PROMPTS_CHANGED = 'notifications/prompts/list_changed';
const RESOURCES_CHANGED = 'notifications/resources/list_changed';

/** The `*\/list_changed` notifications `client` receives from now on, in order. */
function listChanges(client: Client): string[] {
  const seen: string[] = [];
  client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => {
    seen.push(n.method);
  });
  client.setNotificationHandler(PromptListChangedNotificationSchema, (n) => {
    seen.push(n.method);
  });
  client.setNotificationHandler(ResourceListChangedNotificationSchema, (n) => {
    seen.push(n.method);
  });
  return seen;
}

/** Long enough for any notification the reconnection caused to have arrived. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 500));

/** Per comparison the gateway logged after a reconnection, the lists it told sessions of. */
function comparisons(infos: LoggedLine[]): string[][] {
  return infos
    .filter((line) => line.msg === 'backend lists compared with those of the lost connection')
    .map((line) => (line.obj as { changed: string[] }).changed);
}

/**
 * A gateway in front of `backends` (the YAML items of its `backends:`) and a client connected
 * to it, with the list changes the client gets, the comparisons the gateway logged and how
 * many times the first backend was asked for `tools/list` (from now on).
 */
async function watchedGateway(backends: string) {
  const log = recordingLogger();
  const gateway = await startGateway(`backends:\n${backends}`, { redis: false, log });
  const upstream = gateway.orchestrator.backends[0];
  if (!upstream) throw new Error('no backend');
  const requests = vi.spyOn(upstream, 'request');
  const client = await connectClient(gateway.mcpUrl);
  return {
    client,
    changes: listChanges(client),
    compared: () => comparisons(log.infos),
    toolListings: () => requests.mock.calls.filter(([method]) => method === 'tools/list').length,
  };
}

/**
 * After a reconnection: the client is told that `lists` changed and nothing else (in time for
 * any other notification to have come), and the gateway's one comparison reported them.
 */
async function expectToldOf(
  watched: Awaited<ReturnType<typeof watchedGateway>>,
  lists: string[],
): Promise<void> {
  if (lists.length > 0) await waitFor(() => watched.changes.length > 0, 5000, 'list_changed');
  await settle();
  expect(watched.changes).toEqual(lists.map((list) => `notifications/${list}/list_changed`));
  await waitFor(() => watched.compared().length === 1, 5000, 'the lists to be compared');
  expect(watched.compared()).toEqual([lists]);
}

/**
 * An HTTP fixture backend that restarts on its port: a new server that knows no session,
 * with a fresh state or `state`. The current one is closed after the test.
 */
async function restartableBackend(name: string, port?: number) {
  let backend: HttpBackend = await startHttpBackend({
    name,
    ...(port === undefined ? {} : { port }),
  });
  defer(() => backend.close());
  return {
    get current(): HttpBackend {
      return backend;
    },
    async restart(state?: FixtureState): Promise<void> {
      await backend.close();
      backend = await startHttpBackend({ name, port: backend.port, ...(state ? { state } : {}) });
    },
  };
}

/**
 * A backend over Streamable HTTP with two tools: `ping`, which takes any arguments, and
 * `measure`, whose inputSchema is `inputSchema`; each answers "<name> again". It restarts on
 * its port with another schema for `measure` (a new server that knows no session). The
 * current one is closed after the test.
 */
async function schemaBackend(inputSchema: Record<string, unknown>) {
  const serve = (schema: Record<string, unknown>, port?: number) =>
    serveMcpOverHttp({
      create: () => {
        const server = new Server(
          { name: 'schemas', version: '1.0.0' },
          { capabilities: { tools: {} } },
        );
        server.setRequestHandler(ListToolsRequestSchema, () => ({
          tools: [
            { name: 'ping', inputSchema: { type: 'object' } },
            { name: 'measure', inputSchema: schema },
          ],
        }));
        server.setRequestHandler(CallToolRequestSchema, (request) => ({
          content: [{ type: 'text', text: `${request.params.name} again` }],
        }));
        return server;
      },
      ...(port === undefined ? {} : { port }),
    });
  let served: ServedMcp = await serve(inputSchema);
  defer(() => served.close());
  return {
    url: served.url,
    async restart(schema: Record<string, unknown>): Promise<void> {
      await served.close();
      served = await serve(schema, served.port);
    },
  };
}

/** Call `name` until it answers: the gateway has connected to the backend's new process. */
async function callUntilAnswered(client: Client, name = 'echo'): Promise<string> {
  let answer = '';
  await waitFor(
    async () => {
      answer = await client.callTool({ name, arguments: { text: 'again' } }).then(textOf, () => '');
      return answer.endsWith('again');
    },
    10_000,
    `a call of ${name} to reach the restarted backend`,
  );
  return answer;
}

/** The names of every tool the session gets (all pages: one per backend). */
async function toolNames(client: Client): Promise<string[]> {
  const names: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    names.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return names;
}

describe('a backend that restarts', () => {
  it('is subscribed again to the URIs sessions hold and asked for their log level again; with the same lists, sessions are told of no change', async () => {
    const fx = await restartableBackend('fx');
    const watched = await watchedGateway(`  - {id: fx, url: "${fx.current.url}"}\n`);
    const { client, changes } = watched;
    const updates: string[] = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    const counter = 'fixture://counter';
    await client.subscribeResource({ uri: counter });
    await client.setLoggingLevel('debug');
    const held = (backend: HttpBackend) =>
      [...backend.state.sessions].map((s) => ({
        subscriptions: [...s.subscriptions],
        logLevel: s.logLevel,
      }));
    expect(held(fx.current)).toEqual([{ subscriptions: [counter], logLevel: 'debug' }]);

    // The backend restarts on the same port: a new process that knows no session.
    await fx.restart();
    // The next call reaches it (the gateway connects again, once it finds its session gone).
    await callUntilAnswered(client);
    // It used to hold nothing: the session's subscription was silently gone.
    await waitFor(
      () => fx.current.state.sessions.size === 1 && held(fx.current)[0]?.subscriptions.length === 1,
      5000,
      'the subscription to be made again',
    );
    expect(held(fx.current)).toEqual([{ subscriptions: [counter], logLevel: 'debug' }]);
    await client.callTool({ name: 'bump', arguments: {} });
    await waitFor(() => updates.length === 1, 5000, 'an update from the restarted backend');
    expect(updates).toEqual([counter]);

    // Its tools, prompts and resources are those of before: the session used to be told all
    // three changed, on every reconnection.
    await expectToldOf(watched, []);
    // The backend's own list_changed still reaches the session (the channel works).
    await client.callTool({ name: 'touch_list', arguments: {} });
    await waitFor(() => changes.length > 0, 5000, "the backend's tools/list_changed");
    expect(changes).toEqual([TOOLS_CHANGED]);
  });

  it('a killed stdio child restarted with the same lists: no list_changed, and the cached tool schemas are kept', async () => {
    const name = `rc-${randomUUID().slice(0, 8)}`;
    const needles = ['stdio-backend.ts', name];
    defer(async () => {
      for (const pid of childrenMatching(needles)) process.kill(pid, 'SIGKILL');
    });
    const { command, args } = stdioBackendCommand({ name });
    const watched = await watchedGateway(
      `  - id: kid\n    command: ${JSON.stringify(command)}\n    args: ${JSON.stringify(args)}\n`,
    );
    const { client } = watched;
    // The first call fills the gateway's schema cache.
    await client.callTool({ name: 'echo', arguments: { text: 'one' } });
    const listedBefore = watched.toolListings();
    const [pid] = childrenMatching(needles);
    expect(pid).toBeDefined();

    process.kill(pid as number, 'SIGKILL');
    await waitFor(() => !alive(pid as number), 2000, 'the killed child to be gone');
    // The gateway starts a new child by itself (backoff 0.5 s) or for the call.
    expect(await callUntilAnswered(client)).toBe(`[${name}] again`);
    expect(childrenMatching(needles)).not.toContain(pid);
    await expectToldOf(watched, []);
    // One listing of its tools (the comparison's); the schemas it found equal stay cached, so
    // calls list nothing more, and they are still checked.
    await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } });
    const invalid = await client.callTool({ name: 'add', arguments: { a: 1 } }).catch((e) => e);
    expect((invalid as { code?: unknown }).code).toBe(-32602);
    expect(watched.toolListings()).toBe(listedBefore + 1);
  });

  it('with another tool and the same prompts and resources: sessions are told of the tools only', async () => {
    const fx = await restartableBackend('fx');
    const watched = await watchedGateway(`  - {id: fx, url: "${fx.current.url}"}\n`);
    const { client } = watched;
    // A call fills the gateway's schema cache (one whole listing of the backend's tools).
    await client.callTool({ name: 'echo', arguments: { text: 'one' } });
    expect(await toolNames(client)).not.toContain('added');
    const listedBefore = watched.toolListings();

    // The new process serves one tool more, and says nothing of it (it is how it started).
    const state = createFixtureState('fx');
    state.dynamicTools.push('added');
    await fx.restart(state);
    await callUntilAnswered(client);
    await expectToldOf(watched, ['tools']);
    // The cached schemas were replaced by the tools the comparison read: a call lists nothing
    // more (it used to list them once again).
    expect(textOf(await client.callTool({ name: 'added', arguments: {} }))).toBe('[fx] added');
    expect(watched.toolListings()).toBe(listedBefore + 1);
    expect(await toolNames(client)).toContain('added');
  });

  it('with another inputSchema for a tool: calls are checked against the new one, read by the comparison, with no listing of their own', async () => {
    const before = { type: 'object', properties: { a: { type: 'number' } }, required: ['a'] };
    const after = { type: 'object', properties: { b: { type: 'string' } }, required: ['b'] };
    const sx = await schemaBackend(before);
    const watched = await watchedGateway(`  - {id: sx, url: "${sx.url}"}\n`);
    const { client } = watched;
    const measure = (args: Record<string, unknown>) =>
      client.callTool({ name: 'measure', arguments: args }).then(textOf, (e: unknown) => e);
    expect(await measure({ a: 1 })).toBe('measure again');
    expect(await measure({ b: 'x' })).toMatchObject({ code: -32602 });
    const listedBefore = watched.toolListings();

    await sx.restart(after);
    await callUntilAnswered(client, 'ping');
    await expectToldOf(watched, ['tools']);
    // Arguments valid only under the new schema pass; those valid only under the old one are
    // refused before the backend; and only the comparison listed the tools.
    expect(await measure({ b: 'x' })).toBe('measure again');
    expect(await measure({ a: 1 })).toMatchObject({ code: -32602 });
    expect(watched.toolListings()).toBe(listedBefore + 1);
  });

  it('whose tools cannot be read after it restarted: sessions are told of the tools, as before, and of nothing else', async () => {
    const fx = await restartableBackend('fx');
    const watched = await watchedGateway(`  - {id: fx, url: "${fx.current.url}"}\n`);
    const { client } = watched;
    // A call fills the gateway's schema cache: the next one needs no listing.
    await client.callTool({ name: 'echo', arguments: { text: 'one' } });

    const state = createFixtureState('fx');
    state.failToolsList = true;
    await fx.restart(state);
    await callUntilAnswered(client);
    // Whether the tools changed is not known: never a change lost.
    await expectToldOf(watched, ['tools']);
    // The cached schemas were dropped and nothing read took their place: a call lists the
    // tools (and fails, closed, while they cannot be listed).
    const listed = watched.toolListings();
    const failed = await client
      .callTool({ name: 'echo', arguments: { text: 'x' } })
      .catch((e) => e);
    expect((failed as { code?: unknown }).code).toBe(-32603);
    expect(watched.toolListings()).toBe(listed + 1);
    state.failToolsList = false;
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'y' } }))).toBe(
      '[fx] y',
    );
    expect(watched.toolListings()).toBe(listed + 2);
    await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } });
    expect(watched.toolListings()).toBe(listed + 2);
  });

  it("that said its tools changed, then restarted without that change: sessions are told of the tools (the gateway's reading of before is stale)", async () => {
    const fx = await restartableBackend('fx');
    const watched = await watchedGateway(`  - {id: fx, url: "${fx.current.url}"}\n`);
    const { client, changes } = watched;
    await client.callTool({ name: 'touch_list', arguments: {} });
    await waitFor(() => changes.length > 0, 5000, "the backend's tools/list_changed");
    expect(await toolNames(client)).toContain('dynamic_1');
    changes.length = 0;

    // A fresh process has no dynamic_1 again: the same tools as when the gateway first read
    // them, but not those the session holds.
    await fx.restart();
    await callUntilAnswered(client);
    await expectToldOf(watched, ['tools']);
    expect(await toolNames(client)).not.toContain('dynamic_1');
  });

  it("whose items a session's listing missed while it was down: that session's list is told changed", async () => {
    const fa = await restartableBackend('fa');
    const fb = await restartableBackend('fb');
    const watched = await watchedGateway(
      `  - {id: fa, url: "${fa.current.url}", prefix: "a_"}\n  - {id: fb, url: "${fb.current.url}", prefix: "b_"}\n`,
    );
    const { client } = watched;
    expect(await toolNames(client)).toContain('b_echo');

    await fb.current.close();
    // Listed while fb is down: the session gets fa's tools only.
    const without = await toolNames(client);
    expect(without).toContain('a_echo');
    expect(without).not.toContain('b_echo');

    // fb comes back with the very lists the gateway read before; the session still lacks its
    // tools (not its prompts or resources, which it did not list meanwhile).
    await fb.restart();
    await callUntilAnswered(client, 'b_echo');
    await expectToldOf(watched, ['tools']);
    expect(await toolNames(client)).toContain('b_echo');
  });

  it('that came up after a session started: the session is told its lists changed, and of nothing when it restarts', async () => {
    const port = await freePort();
    const watched = await watchedGateway(`  - {id: fx, url: "http://127.0.0.1:${port}/mcp"}\n`);
    const { client, changes } = watched;
    // Declared although no backend says so yet: the gateway will say when they change.
    expect(client.getServerCapabilities()?.tools).toEqual({ listChanged: true });
    await expect(client.listTools()).rejects.toThrow(/unavailable/);

    const fx = await restartableBackend('fx', port);
    // The gateway's next attempt (backoff from 0.5 s) connects; the session used to be left
    // with its empty list.
    await waitFor(
      () => changes.includes(TOOLS_CHANGED),
      10_000,
      'tools/list_changed once the backend is up',
    );
    await settle();
    expect([...changes].sort()).toEqual([PROMPTS_CHANGED, RESOURCES_CHANGED, TOOLS_CHANGED]);
    expect(await toolNames(client)).toContain('echo');
    changes.length = 0;

    // What the gateway read on that first connection is what the next one is compared with.
    await fx.restart();
    await callUntilAnswered(client);
    await expectToldOf(watched, []);
  });
});
