/**
 * The conformance fixture: an MCP server that implements every tool, resource and prompt the
 * `@modelcontextprotocol/conformance` server scenarios ask for (`test_simple_text`,
 * `test://static-text`, `test_simple_prompt`, progress, logging, sampling, elicitation,
 * subscriptions, completion, ...), served over stateful Streamable HTTP on loopback with
 * DNS-rebinding protection (Host and Origin must name a loopback host).
 *
 * Written on the SDK's low-level `Server` so that every schema goes out exactly as written
 * (the JSON Schema 2020-12 scenario checks `$schema`, `$defs` and `additionalProperties`).
 * The texts follow the scenario descriptions (`conformance server --scenario X --verbose`).
 */

import { LOGGING_LEVELS } from '@fleet/core';
import { rebindingGuard } from '@fleet/interceptor-kit';
import { serveMcpOverHttp } from '@fleet/test-fixtures';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  type GetPromptResult,
  type JSONRPCMessage,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  type LoggingLevel,
  McpError,
  type Prompt,
  ReadResourceRequestSchema,
  type ReadResourceResult,
  type Resource,
  type ResourceTemplate,
  type ServerNotification,
  type ServerRequest,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  type Tool,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;
type Args = Record<string, unknown>;

/** A 1×1 red PNG. */
export const RED_PIXEL_PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';

/** A valid WAV file: 8 kHz, 8-bit mono, 80 samples of silence (10 ms). */
export const SILENT_WAV = (() => {
  const samples = 80;
  const wav = Buffer.alloc(44 + samples, 0x80);
  wav.write('RIFF', 0, 'ascii');
  wav.writeUInt32LE(36 + samples, 4);
  wav.write('WAVE', 8, 'ascii');
  wav.write('fmt ', 12, 'ascii');
  wav.writeUInt32LE(16, 16); // fmt chunk size
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(1, 22); // mono
  wav.writeUInt32LE(8000, 24); // sample rate
  wav.writeUInt32LE(8000, 28); // byte rate
  wav.writeUInt16LE(1, 32); // block align
  wav.writeUInt16LE(8, 34); // bits per sample
  wav.write('data', 36, 'ascii');
  wav.writeUInt32LE(samples, 40);
  return wav.toString('base64');
})();

const LOG_LEVELS: readonly LoggingLevel[] = LOGGING_LEVELS;

const NO_ARGS = { type: 'object', properties: {} } as const;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

function text(value: string): CallToolResult {
  return { content: [{ type: 'text', text: value }] };
}

function requireString(args: Args, name: string): string {
  const value = args[name];
  if (typeof value !== 'string')
    throw new McpError(ErrorCode.InvalidParams, `Invalid params: "${name}" must be a string`);
  return value;
}

// ---------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------

interface ToolContext {
  server: Server;
  extra: Extra;
  /** Send a log message on this request's stream, unless below the session's level. */
  log(level: LoggingLevel, data: string): Promise<void>;
}

interface ToolDefinition extends Tool {
  run(args: Args, context: ToolContext): Promise<CallToolResult> | CallToolResult;
}

const TOOLS: ToolDefinition[] = [
  {
    name: 'test_simple_text',
    description: 'Returns a simple text response',
    inputSchema: NO_ARGS,
    run: () => text('This is a simple text response for testing.'),
  },
  {
    name: 'test_image_content',
    description: 'Returns a 1x1 red PNG image',
    inputSchema: NO_ARGS,
    run: () => ({ content: [{ type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' }] }),
  },
  {
    name: 'test_audio_content',
    description: 'Returns a short silent WAV clip',
    inputSchema: NO_ARGS,
    run: () => ({ content: [{ type: 'audio', data: SILENT_WAV, mimeType: 'audio/wav' }] }),
  },
  {
    name: 'test_embedded_resource',
    description: 'Returns an embedded text resource',
    inputSchema: NO_ARGS,
    run: () => ({
      content: [
        {
          type: 'resource',
          resource: {
            uri: 'test://embedded-resource',
            mimeType: 'text/plain',
            text: 'This is an embedded resource content.',
          },
        },
      ],
    }),
  },
  {
    name: 'test_multiple_content_types',
    description: 'Returns text, image and resource content',
    inputSchema: NO_ARGS,
    run: () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    }),
  },
  {
    name: 'test_tool_with_logging',
    description: 'Sends three info log messages, 50 ms apart, while it runs',
    inputSchema: NO_ARGS,
    run: async (_args, { log, extra }) => {
      await log('info', 'Tool execution started');
      await sleep(50, extra.signal);
      await log('info', 'Tool processing data');
      await sleep(50, extra.signal);
      await log('info', 'Tool execution completed');
      return text('Tool with logging executed successfully');
    },
  },
  {
    name: 'test_error_handling',
    description: 'Always fails with a tool error (isError: true)',
    inputSchema: NO_ARGS,
    run: () => ({
      isError: true,
      content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }],
    }),
  },
  {
    name: 'test_tool_with_progress',
    description: 'Reports progress 0, 50 and 100 of 100, 50 ms apart',
    inputSchema: NO_ARGS,
    run: async (_args, { extra }) => {
      const progressToken = extra._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (progress > 0) await sleep(50, extra.signal);
        if (progressToken !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress, total: 100, message: `${progress}%` },
          });
        }
      }
      return text('Tool with progress executed successfully');
    },
  },
  {
    name: 'test_sampling',
    description: "Asks the client's LLM (sampling/createMessage) and returns its answer",
    inputSchema: {
      type: 'object',
      properties: { prompt: { type: 'string', description: 'The prompt to send to the LLM' } },
      required: ['prompt'],
    },
    run: async (args, { server, extra }) => {
      const prompt = requireString(args, 'prompt');
      if (!server.getClientCapabilities()?.sampling) {
        return {
          isError: true,
          content: [{ type: 'text', text: 'The client does not support sampling' }],
        };
      }
      const result = await extra.sendRequest(
        {
          method: 'sampling/createMessage',
          params: {
            messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
            maxTokens: 100,
          },
        },
        CreateMessageResultSchema,
      );
      const content = result.content;
      const answer =
        !Array.isArray(content) && content.type === 'text' ? content.text : JSON.stringify(content);
      return text(`LLM response: ${answer}`);
    },
  },
  {
    name: 'test_elicitation',
    description: 'Asks the user (elicitation/create) for a username and an email address',
    inputSchema: {
      type: 'object',
      properties: { message: { type: 'string', description: 'The message to show the user' } },
      required: ['message'],
    },
    run: async (args, context) => {
      const message = requireString(args, 'message');
      return elicit(context, {
        message,
        requestedSchema: {
          type: 'object',
          properties: {
            username: { type: 'string', description: "User's response" },
            email: { type: 'string', description: "User's email address" },
          },
          required: ['username', 'email'],
        },
      });
    },
  },
  {
    name: 'test_elicitation_sep1034_defaults',
    description: 'Elicitation with a default value for every primitive type (SEP-1034)',
    inputSchema: NO_ARGS,
    run: (_args, context) =>
      elicit(context, {
        message: 'Please review and update the form fields with defaults',
        requestedSchema: {
          type: 'object',
          properties: {
            name: { type: 'string', description: 'User name', default: 'John Doe' },
            age: { type: 'integer', description: 'User age', default: 30 },
            score: { type: 'number', description: 'User score', default: 95.5 },
            status: {
              type: 'string',
              description: 'User status',
              enum: ['active', 'inactive', 'pending'],
              default: 'active',
            },
            verified: { type: 'boolean', description: 'Verification status', default: true },
          },
          required: [],
        },
      }),
  },
  {
    name: 'test_elicitation_sep1330_enums',
    description: 'Elicitation with all five enum schema variants (SEP-1330)',
    inputSchema: NO_ARGS,
    run: (_args, context) =>
      elicit(context, {
        message: 'Please select options from the enum fields',
        requestedSchema: {
          type: 'object',
          properties: {
            untitledSingle: {
              type: 'string',
              description: 'Untitled single-select',
              enum: ['option1', 'option2', 'option3'],
            },
            titledSingle: {
              type: 'string',
              description: 'Titled single-select',
              oneOf: [
                { const: 'value1', title: 'First Option' },
                { const: 'value2', title: 'Second Option' },
                { const: 'value3', title: 'Third Option' },
              ],
            },
            legacyEnum: {
              type: 'string',
              description: 'Legacy titled enum (enumNames)',
              enum: ['opt1', 'opt2', 'opt3'],
              enumNames: ['Option One', 'Option Two', 'Option Three'],
            },
            untitledMulti: {
              type: 'array',
              description: 'Untitled multi-select',
              items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
            },
            titledMulti: {
              type: 'array',
              description: 'Titled multi-select',
              items: {
                anyOf: [
                  { const: 'value1', title: 'First Choice' },
                  { const: 'value2', title: 'Second Choice' },
                  { const: 'value3', title: 'Third Choice' },
                ],
              },
            },
          },
          required: [],
        },
      }),
  },
  {
    name: 'json_schema_2020_12_tool',
    description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: {
        address: {
          type: 'object',
          properties: { street: { type: 'string' }, city: { type: 'string' } },
        },
      },
      properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
      additionalProperties: false,
    },
    run: (args) => text(`JSON Schema 2020-12 tool called with ${JSON.stringify(args)}`),
  },
  {
    name: 'test_reconnection',
    description: 'Closes its SSE stream mid-call; the result arrives after the client reconnects',
    inputSchema: NO_ARGS,
    run: async (_args, { extra }) => {
      extra.closeSSEStream?.();
      await sleep(100, extra.signal);
      return text('Reconnection test completed successfully');
    },
  },
];

async function elicit(
  { server, extra }: ToolContext,
  params: { message: string; requestedSchema: Record<string, unknown> },
): Promise<CallToolResult> {
  if (!server.getClientCapabilities()?.elicitation) {
    return {
      isError: true,
      content: [{ type: 'text', text: 'The client does not support elicitation' }],
    };
  }
  const result = await extra.sendRequest(
    { method: 'elicitation/create', params } as ServerRequest,
    ElicitResultSchema,
  );
  return text(
    `Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`,
  );
}

// ---------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------

const WATCHED_URI = 'test://watched-resource';

const RESOURCES: Array<Resource & { read(): ReadResourceResult }> = [
  {
    uri: 'test://static-text',
    name: 'static-text',
    description: 'A static text resource',
    mimeType: 'text/plain',
    read: () => ({
      contents: [
        {
          uri: 'test://static-text',
          mimeType: 'text/plain',
          text: 'This is the content of the static text resource.',
        },
      ],
    }),
  },
  {
    uri: 'test://static-binary',
    name: 'static-binary',
    description: 'A static binary resource (1x1 red PNG)',
    mimeType: 'image/png',
    read: () => ({
      contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: RED_PIXEL_PNG }],
    }),
  },
  {
    uri: WATCHED_URI,
    name: 'watched-resource',
    description: 'A resource clients may subscribe to',
    mimeType: 'text/plain',
    read: () => ({
      contents: [{ uri: WATCHED_URI, mimeType: 'text/plain', text: 'Watched resource content.' }],
    }),
  },
];

const TEMPLATE: ResourceTemplate = {
  uriTemplate: 'test://template/{id}/data',
  name: 'template-data',
  description: 'Data for the item {id}',
  mimeType: 'application/json',
};
const TEMPLATE_PATTERN = /^test:\/\/template\/([^/]+)\/data$/;

function readResource(uri: string): ReadResourceResult {
  const fixed = RESOURCES.find((r) => r.uri === uri);
  if (fixed) return fixed.read();
  const match = TEMPLATE_PATTERN.exec(uri);
  if (match) {
    const id = decodeURIComponent(match[1] as string);
    return {
      contents: [
        {
          uri,
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
        },
      ],
    };
  }
  throw new McpError(-32002, `Resource not found: ${uri}`, { uri });
}

// ---------------------------------------------------------------------------------------
// Prompts
// ---------------------------------------------------------------------------------------

const PROMPTS: Array<Prompt & { get(args: Record<string, string>): GetPromptResult }> = [
  {
    name: 'test_simple_prompt',
    description: 'A simple prompt without arguments',
    get: () => ({
      messages: [
        { role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } },
      ],
    }),
  },
  {
    name: 'test_prompt_with_arguments',
    description: 'A prompt with two required arguments',
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true },
    ],
    get: ({ arg1, arg2 }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` },
        },
      ],
    }),
  },
  {
    name: 'test_prompt_with_embedded_resource',
    description: 'A prompt that embeds a resource',
    arguments: [
      { name: 'resourceUri', description: 'URI of the resource to embed', required: true },
    ],
    get: ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: {
              uri: resourceUri as string,
              mimeType: 'text/plain',
              text: 'Embedded resource content for testing.',
            },
          },
        },
        {
          role: 'user',
          content: { type: 'text', text: 'Please process the embedded resource above.' },
        },
      ],
    }),
  },
  {
    name: 'test_prompt_with_image',
    description: 'A prompt with image content',
    get: () => ({
      messages: [
        {
          role: 'user',
          content: { type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' },
        },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
      ],
    }),
  },
];

/** Completion candidates per (prompt or template, argument). */
const COMPLETIONS: Record<string, Record<string, string[]>> = {
  test_prompt_with_arguments: {
    arg1: ['paris', 'park', 'party', 'test', 'testValue1'],
    arg2: ['world', 'testValue2'],
  },
  [TEMPLATE.uriTemplate]: { id: ['1', '2', '3', '123'] },
};

// ---------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------

/** Build one fixture server (one per client session). */
export function createConformanceServer(): Server {
  const server = new Server(
    {
      name: 'conformance-fixture',
      version: '1.0.0',
      title: 'Interceptor Fleet conformance fixture',
    },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
      instructions: 'Implements the fixtures of the MCP conformance server scenarios.',
    },
  );
  let logLevel: LoggingLevel | undefined;
  const subscriptions = new Set<string>();

  server.setRequestHandler(SetLevelRequestSchema, (request) => {
    logLevel = request.params.level;
    return {};
  });

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: TOOLS.map(({ run: _run, ...tool }) => tool),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = TOOLS.find((t) => t.name === request.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    const log = async (level: LoggingLevel, data: string) => {
      if (logLevel !== undefined && LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(logLevel))
        return;
      await extra.sendNotification({
        method: 'notifications/message',
        params: { level, logger: 'conformance-fixture', data },
      });
    };
    return tool.run(request.params.arguments ?? {}, { server, extra, log });
  });

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: RESOURCES.map(({ read: _read, ...resource }) => resource),
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [TEMPLATE],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, (request) =>
    readResource(request.params.uri),
  );
  server.setRequestHandler(SubscribeRequestSchema, (request) => {
    subscriptions.add(request.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    subscriptions.delete(request.params.uri);
    return {};
  });

  server.setRequestHandler(ListPromptsRequestSchema, () => ({
    prompts: PROMPTS.map(({ get: _get, ...prompt }) => prompt),
  }));
  server.setRequestHandler(GetPromptRequestSchema, (request) => {
    const prompt = PROMPTS.find((p) => p.name === request.params.name);
    if (!prompt)
      throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
    const args = request.params.arguments ?? {};
    for (const argument of prompt.arguments ?? []) {
      if (argument.required && typeof args[argument.name] !== 'string')
        throw new McpError(
          ErrorCode.InvalidParams,
          `Invalid params: missing required argument "${argument.name}"`,
        );
    }
    return prompt.get(args);
  });

  server.setRequestHandler(CompleteRequestSchema, (request) => {
    const { ref, argument } = request.params;
    const key = ref.type === 'ref/prompt' ? ref.name : ref.uri;
    const candidates = COMPLETIONS[key]?.[argument.name] ?? [];
    const values = candidates.filter((v) => v.startsWith(argument.value));
    return { completion: { values, total: values.length, hasMore: false } };
  });

  return server;
}

// ---------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------

/** Event store for resumable SSE streams (what `test_reconnection` needs), in memory and bounded. */
class MemoryEventStore implements EventStore {
  readonly #events = new Map<string, { streamId: string; message: JSONRPCMessage }>();
  #next = 0;

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    const eventId = `${streamId}_${++this.#next}`;
    this.#events.set(eventId, { streamId, message });
    if (this.#events.size > 10_000) {
      const oldest = this.#events.keys().next().value;
      if (oldest !== undefined) this.#events.delete(oldest);
    }
    return eventId;
  }

  async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    return this.#events.get(eventId)?.streamId;
  }

  async replayEventsAfter(
    lastEventId: string,
    { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> },
  ): Promise<string> {
    const streamId = this.#events.get(lastEventId)?.streamId ?? '';
    let after = false;
    for (const [eventId, event] of this.#events) {
      if (eventId === lastEventId) {
        after = true;
        continue;
      }
      // The priming event is stored as `{}`: nothing to replay.
      if (after && event.streamId === streamId && Object.keys(event.message).length > 0)
        await send(eventId, event.message);
    }
    return streamId;
  }
}

/**
 * DNS-rebinding protection: the Host header (any port) and, when present, the Origin must be
 * loopback. The kit's guard, as the orchestrator applies it (Host checked on every connection).
 */
export const rebindingProblem = rebindingGuard({ hostCheck: 'always' });

/** Options for {@link startConformanceFixture}. */
export interface ConformanceFixtureOptions {
  /** Port on 127.0.0.1; 0 (the default) picks a free one. */
  port?: number;
}

/** A running conformance fixture. */
export interface ConformanceFixture {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  port: number;
  /** Open MCP sessions. */
  sessionCount(): number;
  close(): Promise<void>;
}

/** Serve {@link createConformanceServer} over stateful Streamable HTTP on 127.0.0.1. */
export async function startConformanceFixture(
  options: ConformanceFixtureOptions = {},
): Promise<ConformanceFixture> {
  return serveMcpOverHttp({
    create: createConformanceServer,
    // Resumable streams (test_reconnection) and the rebinding check of the SDK's own servers.
    transport: { eventStore: new MemoryEventStore(), retryInterval: 500 },
    guard: rebindingProblem,
    ...(options.port === undefined ? {} : { port: options.port }),
  });
}
