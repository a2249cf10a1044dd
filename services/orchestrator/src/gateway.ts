/**
 * The gateway pipeline for one client request: request-phase chain → backend →
 * response-phase chain, with a SERVER span, per-stage and per-interceptor spans, metrics
 * and an audit record per chain execution. Also relays notifications and server-to-client
 * requests between backends and client sessions.
 */
import { randomBytes } from 'node:crypto';
import {
  type ChainPlan,
  type ChainResult,
  chainAbortToError,
  chainAbortToToolResult,
  type InvocationContext,
  JsonRpcCode,
  type Phase,
  type Principal,
  ProtocolError,
  runChain,
} from '@fleet/core';
import { parseTraceparent } from '@fleet/interceptor-kit';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  type Notification,
  type Progress,
  type Result,
  ResultSchema,
  type ServerCapabilities,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import {
  type Attributes,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { BackendRouter, isListMethod } from './aggregate.ts';
import type { Backend, ServerToClientRequest } from './backends.ts';
import type { OrchestratorConfig } from './config.ts';
import type { Logger } from './logger.ts';
import { resultValidator } from './payloads.ts';
import type { Registry } from './registry.ts';
import type { GatewayTelemetry } from './telemetry.ts';
import { clampTextContent, invalidArguments, SchemaValidators } from './tool-schemas.ts';
import { ToolView } from './tool-view.ts';

/** What the gateway knows about one client session. */
export interface ClientSession {
  /** `Mcp-Session-Id` (HTTP) or undefined (stdio). */
  id: string | undefined;
  /** The SDK server speaking to this client. */
  server: Server;
  /** Resource URIs (as the client sees them) this session subscribed to. */
  subscriptions: Set<string>;
  /** Who is on the other end when the transport carries no credentials (stdio). */
  principal?: Principal;
}

/** Where chain executions are reported (the audit producer). */
export interface ChainObserver {
  /** One completed chain execution; must return at once. */
  chainExecuted(execution: ChainExecution): void;
}

/** One chain execution, with what the audit trail needs. */
export interface ChainExecution {
  result: ChainResult;
  method: string;
  target: string | undefined;
  backend: string | undefined;
  context: InvocationContext;
  /** Set when the backend failed instead of the chain. */
  backendError?: { code: number; message: string };
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** Dependencies of the gateway. */
export interface GatewayDeps {
  backends: Backend[];
  registry: Registry;
  config: OrchestratorConfig;
  log: Logger;
  telemetry: GatewayTelemetry;
  observer?: ChainObserver | undefined;
}

interface InFlight {
  session: ClientSession;
  extra: Extra;
}

/** What the gateway knows of one backend's tools (names as the backend spells them). */
interface ToolSchemaCache {
  /** Tool name → its `inputSchema`. */
  schemas: Map<string, unknown>;
  /** Every page of the backend's `tools/list` is in `schemas`. */
  complete: boolean;
  /** Bumped on `notifications/tools/list_changed`; a listing started before is discarded. */
  generation: number;
  /** The full listing in progress, shared by the calls that missed. */
  loading?: Promise<void> | undefined;
}

/** The field naming the target of a routed method. */
const ROUTED: Record<string, 'name' | 'uri'> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'resources/subscribe': 'uri',
  'resources/unsubscribe': 'uri',
};

const IDEMPOTENT = new Set([
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'prompts/get',
  'completion/complete',
]);

/** The gateway. */
export class Gateway {
  readonly router: BackendRouter;
  readonly sessions = new Set<ClientSession>();
  readonly #deps: GatewayDeps;
  readonly #inFlight = new Map<Backend, InFlight[]>();
  readonly #toolSchemas = new Map<Backend, ToolSchemaCache>();
  readonly #validators: SchemaValidators;
  /** The operator's view of the tools (allow-list, renames, descriptions). */
  readonly #tools: ToolView;

  constructor(deps: GatewayDeps) {
    this.#deps = deps;
    this.router = new BackendRouter(deps.backends);
    this.#validators = new SchemaValidators(deps.log);
    this.#tools = new ToolView(deps.config.tools);
  }

  /** The union of the backends' capabilities, plus logging and completions when any backend has them. */
  capabilities(): ServerCapabilities {
    const union: ServerCapabilities = {};
    for (const backend of this.#deps.backends) {
      const caps = backend.capabilities;
      if (!caps) continue;
      if (caps.tools)
        union.tools = { ...union.tools, ...(caps.tools.listChanged ? { listChanged: true } : {}) };
      if (caps.prompts)
        union.prompts = {
          ...union.prompts,
          ...(caps.prompts.listChanged ? { listChanged: true } : {}),
        };
      if (caps.resources) {
        union.resources = {
          ...union.resources,
          ...(caps.resources.listChanged ? { listChanged: true } : {}),
          ...(caps.resources.subscribe ? { subscribe: true } : {}),
        };
      }
      if (caps.logging) union.logging = {};
      if (caps.completions) union.completions = {};
    }
    // Backends that are not connected yet: assume the common features so clients can try.
    if (this.#deps.backends.some((b) => !b.capabilities)) {
      union.tools ??= {};
      union.prompts ??= {};
      union.resources ??= {};
    }
    return union;
  }

  /** Handle one client request (everything but initialize and ping). */
  async handle(
    session: ClientSession,
    method: string,
    params: Record<string, unknown> | undefined,
    extra: Extra,
  ): Promise<Result> {
    const { telemetry } = this.#deps;
    const started = performance.now();
    const principal = principalOf(extra, session);
    const parent = propagation.extract(ROOT_CONTEXT, traceCarrier(extra, params));
    const target = targetOf(method, params);
    const attributes: Attributes = {
      'mcp.method.name': method,
      'fleet.principal.type': principal.type,
    };
    if (principal.id) attributes['fleet.principal.id'] = principal.id;
    if (session.id) attributes['mcp.session.id'] = session.id;
    if (target !== undefined)
      attributes[
        method.startsWith('tools/')
          ? 'mcp.tool.name'
          : method.startsWith('prompts/')
            ? 'mcp.prompt.name'
            : 'mcp.resource.uri'
      ] = target;
    return telemetry.tracer.startActiveSpan(
      method,
      { kind: SpanKind.SERVER, attributes },
      parent,
      async (span) => {
        let status = 'ok';
        try {
          return await this.#pipeline(session, method, params, extra, principal, target, span);
        } catch (error) {
          status = 'error';
          safely(() => {
            span.recordException(error as Error);
            span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
          });
          throw error;
        } finally {
          span.end();
          telemetry.recordRequest(method, status, performance.now() - started);
        }
      },
    );
  }

  async #pipeline(
    session: ClientSession,
    method: string,
    params: Record<string, unknown> | undefined,
    extra: Extra,
    principal: Principal,
    target: string | undefined,
    span: Span,
  ): Promise<Result> {
    const spanContext = span.spanContext();
    const context: InvocationContext = { principal, timestamp: new Date().toISOString() };
    if (trace.isSpanContextValid(spanContext)) {
      context.traceId = spanContext.traceId;
      context.spanId = spanContext.spanId;
    } else {
      // No tracing SDK: continue the caller's trace, or start one, so that interceptors and
      // the audit trail always share a trace id.
      const incoming = parseTraceparent(traceCarrier(extra, params).traceparent);
      context.traceId = incoming?.traceId ?? randomBytes(16).toString('hex');
      context.spanId = randomBytes(8).toString('hex');
    }
    if (session.id) context.sessionId = session.id;
    const route = target === undefined ? undefined : this.#route(method, target);
    if (method === 'tools/call' && target !== undefined && !route)
      throw unknownTarget(method, target);
    const undiscovered = this.#deps.registry.undiscovered();
    if (undiscovered.length > 0) {
      // A configured interceptor service has never answered: we cannot know its hooks, so we
      // refuse rather than let traffic through unguarded.
      throw new ProtocolError(
        JsonRpcCode.INTERNAL_ERROR,
        'Interceptor services are not available yet',
        { reason: 'interceptors_unavailable', services: undiscovered },
      );
    }

    if (method === 'tools/call' && route && target !== undefined) {
      // Arguments are checked against the tool's inputSchema before any interceptor or the
      // backend sees them.
      let schema: unknown;
      try {
        schema = await this.#inputSchemaOf(route.backend, route.name);
      } catch (error) {
        this.#observeBackendError(method, target, route.backend.id, context, error);
        throw error;
      }
      if (schema !== undefined) {
        const errors = this.#validators.validate(target, schema, params?.arguments ?? {});
        if (errors) throw invalidArguments(target, errors);
      }
    }

    const request = await this.#runPhase(
      'request',
      method,
      params ?? {},
      context,
      extra,
      target,
      route?.backend.id,
    );
    if ('denied' in request) return request.denied;
    const forwardParams = request.payload as Record<string, unknown>;

    let result: Result;
    try {
      result = await this.#dispatch(session, method, forwardParams, extra);
    } catch (error) {
      this.#observeBackendError(method, target, route?.backend.id, context, error);
      throw error;
    }

    const response = await this.#runPhase(
      'response',
      method,
      result,
      context,
      extra,
      target,
      route?.backend.id,
    );
    if ('denied' in response) return response.denied;
    const final = response.payload as Result;
    return method === 'tools/call'
      ? clampTextContent(final, this.#deps.config.limits.maxResponseBytes)
      : final;
  }

  #observeBackendError(
    method: string,
    target: string | undefined,
    backend: string | undefined,
    context: InvocationContext,
    error: unknown,
  ): void {
    if (!this.#deps.observer) return;
    const code =
      error instanceof ProtocolError || (error as { code?: unknown }).code !== undefined
        ? Number((error as { code: unknown }).code)
        : JsonRpcCode.INTERNAL_ERROR;
    this.#observe({
      result: emptyResult(method, 'response'),
      method,
      target,
      backend,
      context,
      backendError: { code, message: (error as Error).message },
    });
  }

  #toolCache(backend: Backend): ToolSchemaCache {
    let cache = this.#toolSchemas.get(backend);
    if (!cache) {
      cache = { schemas: new Map(), complete: false, generation: 0 };
      this.#toolSchemas.set(backend, cache);
    }
    return cache;
  }

  /** Remember the input schemas of one `tools/list` page as the backend sent it. */
  #rememberTools(backend: Backend, page: Result, generation: number): void {
    const cache = this.#toolCache(backend);
    if (cache.generation !== generation || !Array.isArray(page.tools)) return;
    for (const tool of page.tools as Array<{ name?: unknown; inputSchema?: unknown }>) {
      if (typeof tool?.name === 'string') cache.schemas.set(tool.name, tool.inputSchema);
    }
  }

  /**
   * The `inputSchema` of `name` on `backend` (the backend's own name): from the cache, else
   * from one full listing of the backend's tools. Undefined when the backend does not list
   * the tool or cannot be listed (the backend's own answer then reaches the client).
   */
  async #inputSchemaOf(backend: Backend, name: string): Promise<unknown> {
    const cache = this.#toolCache(backend);
    if (cache.schemas.has(name) || cache.complete) return cache.schemas.get(name);
    if (!cache.loading) {
      const loading: Promise<void> = this.#loadTools(backend, cache).finally(() => {
        if (cache.loading === loading) cache.loading = undefined;
      });
      cache.loading = loading;
    }
    await cache.loading;
    return cache.schemas.get(name);
  }

  async #loadTools(backend: Backend, cache: ToolSchemaCache): Promise<void> {
    const generation = cache.generation;
    const schemas = new Map<string, unknown>();
    let cursor: string | undefined;
    try {
      for (let pages = 0; pages < 1000; pages++) {
        const page = await backend.request(
          'tools/list',
          cursor === undefined ? undefined : { cursor },
          { idempotent: true },
        );
        for (const tool of (Array.isArray(page.tools) ? page.tools : []) as Array<{
          name?: unknown;
          inputSchema?: unknown;
        }>) {
          if (typeof tool?.name === 'string') schemas.set(tool.name, tool.inputSchema);
        }
        cursor = typeof page.nextCursor === 'string' ? page.nextCursor : undefined;
        if (cursor === undefined) break;
      }
    } catch (error) {
      // A backend without tools/list has no schemas to check against; any other failure
      // fails the call (closed) rather than letting unchecked arguments through.
      if ((error as { code?: unknown }).code !== JsonRpcCode.METHOD_NOT_FOUND) throw error;
      cursor = undefined;
    }
    if (cache.generation !== generation) return;
    for (const [name, schema] of schemas) cache.schemas.set(name, schema);
    cache.complete = cursor === undefined;
  }

  async #runPhase(
    phase: Phase,
    method: string,
    payload: unknown,
    context: InvocationContext,
    extra: Extra,
    target: string | undefined,
    backend: string | undefined,
  ): Promise<{ payload: unknown } | { denied: Result }> {
    const { registry, config, telemetry } = this.#deps;
    const plan: ChainPlan = registry.plan(method, phase);
    if (plan.stages.length === 0) {
      this.#observe({
        result: emptyResult(method, phase, payload),
        method,
        target,
        backend,
        context,
      });
      return { payload };
    }
    const result = await runChain(
      plan,
      { payload, context },
      {
        timeoutMs: config.chain.timeoutMs,
        signal: extra.signal,
        validatePayload: resultValidator(method),
        onOutcome: (o) => telemetry.recordInvocation(o),
        onAuditOutcome: (o) => telemetry.recordInvocation(o),
        wrapStage: (stage, run) =>
          telemetry.tracer.startActiveSpan(
            `chain ${phase} ${stage.kind}`,
            {
              attributes: {
                'fleet.chain.phase': phase,
                'fleet.chain.stage': stage.kind,
                'fleet.chain.event': method,
              },
            },
            async (stageSpan) => {
              try {
                await run();
              } finally {
                stageSpan.end();
              }
            },
          ),
      },
    );
    telemetry.recordChain(result);
    this.#observe({ result, method, target, backend, context });
    if (result.status === 'success') return { payload: result.finalPayload };
    if (method === 'tools/call' && config.chain.denyAs === 'toolResult') {
      return { denied: chainAbortToToolResult(result) as Result };
    }
    throw chainAbortToError(result);
  }

  #observe(execution: ChainExecution): void {
    if (!this.#deps.observer) return;
    safely(() => this.#deps.observer?.chainExecuted(execution));
  }

  /**
   * The backend and backend-side name for a name a client sent; for tools the operator's
   * view applies first (a hidden tool has no route; a renamed one routes by its new name).
   */
  #route(method: string, name: string): { backend: Backend; name: string } | undefined {
    if (method !== 'tools/call') return this.router.route(name);
    const original = this.#tools.original(name);
    return original === undefined ? undefined : this.router.route(original);
  }

  async #dispatch(
    session: ClientSession,
    method: string,
    params: Record<string, unknown>,
    extra: Extra,
  ): Promise<Result> {
    if (isListMethod(method)) {
      const page = await this.router.list(method, params, async (backend, p) => {
        const generation = this.#toolCache(backend).generation;
        const answer = await this.#call(session, backend, method, p, extra);
        // Every tools/list page feeds the schema cache before the response chain filters it.
        if (method === 'tools/list') this.#rememberTools(backend, answer, generation);
        return answer;
      });
      return method === 'tools/list' ? this.#tools.applyToList(page) : page;
    }
    const field = ROUTED[method];
    if (field !== undefined) {
      const name = params[field];
      if (typeof name !== 'string') {
        throw new ProtocolError(
          JsonRpcCode.INVALID_PARAMS,
          `Invalid params: "${field}" must be a string`,
          { field },
        );
      }
      const route = this.#route(method, name);
      if (!route) throw unknownTarget(method, name);
      const result = await this.#call(
        session,
        route.backend,
        method,
        { ...params, [field]: route.name },
        extra,
      );
      if (method === 'resources/subscribe') session.subscriptions.add(name);
      if (method === 'resources/unsubscribe') session.subscriptions.delete(name);
      return method === 'resources/read' ? prefixContents(result, route.backend.prefix) : result;
    }
    if (method === 'completion/complete') {
      const ref = params.ref as { type?: string; name?: string; uri?: string } | undefined;
      const key = ref?.type === 'ref/prompt' ? 'name' : 'uri';
      const value = ref?.[key];
      if (typeof value !== 'string')
        throw new ProtocolError(
          JsonRpcCode.INVALID_PARAMS,
          'Invalid params: "ref" must name a prompt or a resource',
          { field: 'ref' },
        );
      const route = this.router.route(value);
      if (!route) throw unknownTarget(method, value);
      return this.#call(
        session,
        route.backend,
        method,
        { ...params, ref: { ...ref, [key]: route.name } },
        extra,
      );
    }
    if (method === 'logging/setLevel') {
      await Promise.all(
        this.#deps.backends
          .filter((b) => b.capabilities?.logging)
          .map((b) => this.#call(session, b, method, params, extra).catch(() => undefined)),
      );
      return {};
    }
    if (this.#deps.backends.length === 1)
      return this.#call(session, this.#deps.backends[0] as Backend, method, params, extra);
    throw new ProtocolError(JsonRpcCode.METHOD_NOT_FOUND, `Method not found: ${method}`);
  }

  async #call(
    session: ClientSession,
    backend: Backend,
    method: string,
    params: Record<string, unknown> | undefined,
    extra: Extra,
  ): Promise<Result> {
    const { telemetry } = this.#deps;
    const clientToken = (params?._meta as { progressToken?: string | number } | undefined)
      ?.progressToken;
    const onprogress =
      clientToken === undefined
        ? undefined
        : (progress: Progress) => {
            void extra
              .sendNotification({
                method: 'notifications/progress',
                params: { ...progress, progressToken: clientToken },
              } as ServerNotification)
              .catch(() => undefined);
          };
    const forwarded = params && clientToken !== undefined ? withoutProgressToken(params) : params;
    const flight: InFlight = { session, extra };
    const list = this.#inFlight.get(backend) ?? [];
    list.push(flight);
    this.#inFlight.set(backend, list);
    const started = performance.now();
    try {
      return await telemetry.tracer.startActiveSpan(
        `${method} ${backend.id}`,
        {
          kind: SpanKind.CLIENT,
          attributes: { 'mcp.method.name': method, 'fleet.backend.id': backend.id },
        },
        async (span) => {
          try {
            return await backend.request(method, forwarded, {
              signal: extra.signal,
              onprogress,
              idempotent: IDEMPOTENT.has(method),
            });
          } catch (error) {
            safely(() =>
              span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message }),
            );
            throw error;
          } finally {
            span.end();
          }
        },
      );
    } finally {
      telemetry.recordBackend(backend.id, method, performance.now() - started);
      const i = list.indexOf(flight);
      if (i >= 0) list.splice(i, 1);
    }
  }

  /**
   * A backend notification: a log line goes to the call in flight on that backend (every
   * session when none is), list changes to every session, resource updates to subscribers.
   */
  onBackendNotification(backend: Backend, notification: Notification): void {
    const params = notification.params as Record<string, unknown> | undefined;
    if (notification.method === 'notifications/tools/list_changed') {
      const cache = this.#toolCache(backend);
      cache.generation += 1;
      cache.schemas.clear();
      cache.complete = false;
      cache.loading = undefined;
    }
    if (notification.method === 'notifications/resources/updated') {
      const uri = `${backend.prefix}${String(params?.uri)}`;
      for (const session of this.sessions) {
        if (session.subscriptions.has(uri))
          void notify(session, { method: notification.method, params: { ...params, uri } });
      }
      return;
    }
    if (notification.method === 'notifications/message') {
      // A log line written while calls are in flight belongs to one of those calls: send it
      // on that call's stream (the most recent one, as for server-to-client requests)
      // rather than to every session, which would leak one user's tool logs to others.
      const flight = this.#latestFlight(backend);
      if (flight) {
        void flight.extra
          .sendNotification(notification as ServerNotification)
          .catch(() => undefined);
        return;
      }
    }
    for (const session of this.sessions) void notify(session, notification);
  }

  /**
   * The call a backend's unsolicited message belongs to: with one shared backend connection
   * the message carries no caller, so the most recent in-flight call on that backend is the
   * best attribution (exact when there is one).
   */
  #latestFlight(backend: Backend): InFlight | undefined {
    return this.#inFlight.get(backend)?.at(-1);
  }

  /** A backend asks its client for something: relay it to the session whose call caused it. */
  async onServerRequest(
    backend: Backend,
    request: ServerToClientRequest,
    signal: AbortSignal,
  ): Promise<Result> {
    const flight = this.#latestFlight(backend);
    if (!flight)
      throw new ProtocolError(
        JsonRpcCode.INTERNAL_ERROR,
        `No client call in progress to relay ${request.method} to`,
      );
    return flight.extra.sendRequest(
      { method: request.method, params: request.params } as ServerRequest,
      ResultSchema,
      { signal },
    );
  }

  /** A client notification (roots changed, ...): forwarded to every backend. */
  async onClientNotification(notification: Notification): Promise<void> {
    if (notification.method === 'notifications/roots/list_changed') {
      await Promise.all(this.#deps.backends.map((b) => b.notify(notification)));
    }
  }
}

async function notify(session: ClientSession, notification: Notification): Promise<void> {
  try {
    await session.server.notification(notification as ServerNotification);
  } catch {
    // A gone client or an undeclared capability: nothing to deliver.
  }
}

function principalOf(extra: Extra, session: ClientSession): Principal {
  const principal = (extra.authInfo?.extra as { principal?: Principal } | undefined)?.principal;
  return principal ?? session.principal ?? { type: 'anonymous' };
}

function traceCarrier(
  extra: Extra,
  params: Record<string, unknown> | undefined,
): Record<string, string> {
  const headers = extra.requestInfo?.headers ?? {};
  const carrier: Record<string, string> = {};
  const header = headers.traceparent;
  const meta = (params?._meta as { traceparent?: unknown; tracestate?: unknown } | undefined) ?? {};
  const traceparent =
    typeof header === 'string'
      ? header
      : typeof meta.traceparent === 'string'
        ? meta.traceparent
        : undefined;
  if (traceparent) carrier.traceparent = traceparent;
  const tracestate =
    typeof headers.tracestate === 'string'
      ? headers.tracestate
      : typeof meta.tracestate === 'string'
        ? meta.tracestate
        : undefined;
  if (tracestate) carrier.tracestate = tracestate;
  return carrier;
}

function targetOf(method: string, params: Record<string, unknown> | undefined): string | undefined {
  const field = ROUTED[method];
  if (field === undefined) return undefined;
  const value = params?.[field];
  return typeof value === 'string' ? value : undefined;
}

function withoutProgressToken(params: Record<string, unknown>): Record<string, unknown> {
  const meta = { ...(params._meta as Record<string, unknown>) };
  delete meta.progressToken;
  const out = { ...params };
  if (Object.keys(meta).length > 0) out._meta = meta;
  else delete out._meta;
  return out;
}

function unknownTarget(method: string, name: string): ProtocolError {
  const what = method.startsWith('tools/')
    ? 'tool'
    : method.startsWith('prompts/')
      ? 'prompt'
      : 'resource';
  return new ProtocolError(JsonRpcCode.INVALID_PARAMS, `Unknown ${what}: ${name}`, {
    [what === 'resource' ? 'uri' : 'name']: name,
  });
}

function prefixContents(result: Result, prefix: string): Result {
  if (!prefix || !Array.isArray(result.contents)) return result;
  return {
    ...result,
    contents: (result.contents as Array<Record<string, unknown>>).map((c) =>
      typeof c.uri === 'string' ? { ...c, uri: `${prefix}${c.uri}` } : c,
    ),
  };
}

function emptyResult(event: string, phase: Phase, payload?: unknown): ChainResult {
  const result: ChainResult = {
    status: 'success',
    event,
    phase,
    results: [],
    validationSummary: { errors: 0, warnings: 0, infos: 0 },
    abortedAt: [],
    totalDurationMs: 0,
  };
  if (payload !== undefined) result.finalPayload = payload;
  return result;
}

function safely(fn: () => void): void {
  try {
    fn();
  } catch {
    // Telemetry never breaks a request.
  }
}
