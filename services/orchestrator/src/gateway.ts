/**
 * The gateway pipeline for one client request: request-phase chain → backend →
 * response-phase chain, with a SERVER span, per-stage and per-interceptor spans, metrics
 * and an audit record per chain execution. Also relays notifications and server-to-client
 * requests between backends and client sessions.
 */
import { randomBytes } from 'node:crypto';
import {
  AUDIT_OVERLOADED,
  type ChainPlan,
  type ChainResult,
  chainAbortToError,
  chainAbortToToolResult,
  checkParamHeaders,
  createInFlightLimit,
  type InFlightLimit,
  type InvocationContext,
  type InvocationOutcome,
  InvokeErrorReason,
  JsonRpcCode,
  type LoggingLevel,
  moreVerbose,
  type ParamHeader,
  type Phase,
  type Principal,
  ProtocolError,
  paramHeadersOf,
  paramHeaderValues,
  reachesLogLevel,
  runChain,
  type StatelessRequestMeta,
  withoutReservedMeta,
} from '@fleet/core';
import { nestedBeyond, parseTraceparent } from '@fleet/interceptor-kit';
import { ATTR, chainStageSpanName, mcpSpanName } from '@fleet/telemetry';
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
  type Context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import {
  BackendRouter,
  isListMethod,
  LIST_METHODS,
  type ListKind,
  type ListMethod,
  listDigest,
  listMethodsOf,
  prefixItem,
} from './aggregate.ts';
import { AuditBatcher } from './audit-batch.ts';
import type { Backend, ServerToClientRequest } from './backends.ts';
import type { OrchestratorConfig } from './config.ts';
import { fairnessKeyOf } from './fair-gate.ts';
import { type Logger, logThrottle } from './logger.ts';
import { resultValidator } from './payloads.ts';
import type { Registry } from './registry.ts';
import {
  chainStatusOf,
  errorTypeOf,
  type GatewayTelemetry,
  OpenInvocations,
  type RequestStatus,
  recordScrubbedError,
  scrubName,
  scrubText,
  shownMethod,
  spanMethod,
} from './telemetry.ts';
import { clampTextContent, invalidArguments, SchemaValidators } from './tool-schemas.ts';
import { ToolView } from './tool-view.ts';

/**
 * What the gateway knows about one client session, or about the client of one stateless
 * (2026-07-28) request, which gets a transient session of its own.
 */
export interface ClientSession {
  /** `Mcp-Session-Id` (HTTP) or undefined (stdio, stateless). */
  id: string | undefined;
  /** The SDK server speaking to this client; undefined for a stateless request. */
  server: Server | undefined;
  /** Resource URIs (as the client sees them) this session subscribed to. */
  subscriptions: Set<string>;
  /** Who is on the other end when the transport carries no credentials (stdio). */
  principal?: Principal;
  /** Set for a stateless request: the protocol metadata it carried. */
  stateless?: StatelessRequestMeta;
  /**
   * The level this session asked for with `logging/setLevel`: backends' log lines below it
   * are not delivered to it (the backends, shared by every session, get the most verbose
   * level any session asked for).
   */
  logLevel?: LoggingLevel;
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

/**
 * What the gateway needs of the request it serves: the SDK's `RequestHandlerExtra` for a
 * session, one built by the ingress for a stateless request.
 */
export type RequestContext = Pick<
  RequestHandlerExtra<ServerRequest, ServerNotification>,
  'signal' | 'authInfo' | 'requestInfo' | 'sendNotification' | 'sendRequest'
>;

type Extra = RequestContext;

/** What one client request passes down to the calls it makes: its tracing context. */
interface CallScope {
  trace: Context;
  /** Set when a chain phase denied the request (a validator said no). */
  denied?: boolean;
}

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
  /** Fail the client's call at once (a stateless client cannot serve what the backend needs). */
  fail?: (error: ProtocolError) => void;
}

/** What the gateway knows of one tool (its backend-side name). */
interface ToolInfo {
  inputSchema: unknown;
  /** Its `x-mcp-header` parameters, mirrored as `Mcp-Param-*` headers to HTTP backends. */
  paramHeaders: ParamHeader[];
}

/** What the gateway knows of one backend's tools (names as the backend spells them). */
interface ToolSchemaCache {
  /** Tool name → what it declares. */
  schemas: Map<string, ToolInfo>;
  /** Tool name → why it is not offered (invalid `x-mcp-header` annotations). */
  rejected: Map<string, string>;
  /** Every page of the backend's `tools/list` is in `schemas`. */
  complete: boolean;
  /** Bumped on `notifications/tools/list_changed`; a listing started before is discarded. */
  generation: number;
  /** The full listing in progress, shared by the calls that missed. */
  loading?: Promise<void> | undefined;
  /**
   * Set while a new connection's tools are read, which fills the cache, and, on one that
   * replaced a lost one, compared with those of the old (the cache holds the old connection's
   * tools until then): calls wait.
   */
  confirming?: Promise<void> | undefined;
}

/**
 * One item of a backend's `tools/list` as the backend sent it, checked once for its
 * `x-mcp-header` annotations: offered with what it declares, or not (`rejected`, why). An
 * item without a name is passed along as is, and not recorded.
 */
interface ScreenedTool {
  tool: unknown;
  name?: string;
  info?: ToolInfo;
  rejected?: string;
}

/** Check every tool of one `tools/list` page (the only place the annotations are checked). */
function screenTools(tools: unknown): ScreenedTool[] {
  const screened: ScreenedTool[] = [];
  for (const tool of Array.isArray(tools) ? tools : []) {
    const { name, inputSchema } = (tool ?? {}) as { name?: unknown; inputSchema?: unknown };
    if (typeof name !== 'string') {
      screened.push({ tool });
      continue;
    }
    const check = paramHeadersOf(inputSchema);
    screened.push(
      check.ok
        ? { tool, name, info: { inputSchema, paramHeaders: check.headers } }
        : { tool, name, rejected: check.reason },
    );
  }
  return screened;
}

/** The tools sessions are offered of those screened. */
function offeredTools(screened: readonly ScreenedTool[]): unknown[] {
  return screened.filter((s) => s.rejected === undefined).map((s) => s.tool);
}

/** What the gateway read of one of a backend's lists on connecting (see `#readList`). */
interface ListReading {
  /** Its {@link listDigest}; undefined when a list has too many pages to read. */
  digest: string | undefined;
  /** For tools, what was read of them, for the schema cache; undefined when none were. */
  tools?: { screened: ScreenedTool[]; complete: boolean } | undefined;
}

/** What the gateway last read of one of a backend's lists. */
interface KnownList {
  /**
   * {@link listDigest} of the items sessions get from it, as last read on its connection;
   * undefined when not known (never read, or sessions may hold something else since).
   */
  digest: string | undefined;
  /**
   * Bumped by every new connection, the backend's own `list_changed` and a session's failed
   * listing: a reading started before is not recorded.
   */
  generation: number;
}

const noop = (): void => {};

/** The lists a backend adds items to, each with its `notifications/<kind>/list_changed`. */
const LISTS: readonly ListKind[] = ['tools', 'prompts', 'resources'];

/** Most pages of one list the gateway reads from a backend for itself. */
const MAX_LIST_PAGES = 1000;

/** The field naming the target of a routed method. */
const ROUTED: Record<string, 'name' | 'uri'> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'resources/subscribe': 'uri',
  'resources/unsubscribe': 'uri',
};

/** The client capability each server-to-client request needs. */
const CAPABILITY_OF: Record<string, string> = {
  'sampling/createMessage': 'sampling',
  'elicitation/create': 'elicitation',
  'roots/list': 'roots',
};

/** Longest method name (in characters) the gateway serves or forwards. */
export const MAX_METHOD_LENGTH = 256;

/**
 * Most resources one session may be subscribed to at once: a session's subscriptions live as
 * long as it does, so a client subscribing to URI after URI would otherwise grow the gateway's
 * memory (and its backends') without bound.
 */
export const MAX_SUBSCRIPTIONS_PER_SESSION = 1000;

/** Longest resource URI (in characters) a session may subscribe to: it is kept while subscribed. */
export const MAX_SUBSCRIPTION_URI_LENGTH = 8192;

/**
 * Most characters the URIs one session subscribes to may have in all (256 Ki): with the two
 * bounds above alone, each of the 10,000 sessions could hold 8 MiB of URIs.
 */
export const MAX_SUBSCRIBED_URI_CHARACTERS = 256 * 1024;

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
  /** Per backend, what the gateway last read of each of its lists. */
  readonly #known = new Map<Backend, Record<ListKind, KnownList>>();
  readonly #validators: SchemaValidators;
  /** The operator's view of the tools (allow-list, renames, descriptions). */
  readonly #tools: ToolView;
  /** Audit-mode invocations, started in batches. */
  readonly #audits: AuditBatcher;
  /** Audit-mode invocations in flight per interceptor service (`chain.maxAuditInFlight`). */
  readonly #auditLimit: InFlightLimit;
  /** Audit-mode invocations skipped over that bound: logged at most once a minute. */
  readonly #auditSkipped = logThrottle(60_000);
  /**
   * Resource URI (as clients see it) → how many sessions are subscribed to it. A backend has
   * one connection for every session, so it holds one subscription per URI: it is told to
   * drop it only when the last session does.
   */
  readonly #subscribers = new Map<string, number>();
  /**
   * What the backends hold for every session (`resource <uri>`: a subscription; `logging`:
   * the log level) → the last call that changes it, still going. The next waits for it, so
   * the backends get them in the order the gateway decided them: the last holder's
   * unsubscribe and another session's subscribe of the same URI could otherwise arrive the
   * other way round and leave the backend unsubscribed from a URI a session holds.
   */
  readonly #shared = new Map<string, Promise<unknown>>();
  /** The log level the backends were last asked for: the most verbose any session set. */
  #backendLogLevel: LoggingLevel | undefined;
  /** URIs no session holds any more, to unsubscribe from at their backends (one at a time). */
  #orphaned: string[] = [];
  #releasing = false;
  /**
   * Backends being told that the client's roots changed → the notification to send them once
   * that is done (the latest one; undefined when none arrived meanwhile).
   */
  readonly #rootsChanges = new Map<Backend, { next: Notification | undefined }>();

  constructor(deps: GatewayDeps) {
    this.#deps = deps;
    this.router = new BackendRouter(deps.backends);
    this.#validators = new SchemaValidators(deps.log);
    this.#tools = new ToolView(deps.config.tools);
    this.#audits = new AuditBatcher(deps.config.chain.auditBatchMs);
    this.#auditLimit = createInFlightLimit(deps.config.chain.maxAuditInFlight);
  }

  /** Start any audit-mode invocations still waiting for their batch. */
  flushAudits(): void {
    this.#audits.flush();
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
    // Backends that are not connected yet: assume the common features so clients can try,
    // and say those lists change: sessions are told once such a backend connects.
    if (this.#deps.backends.some((b) => !b.capabilities)) {
      for (const kind of LISTS) union[kind] = { ...union[kind], listChanged: true };
    }
    return union;
  }

  /** Handle one client request (everything but initialize and ping). */
  async handle(
    session: ClientSession,
    method: string,
    received: Record<string, unknown> | undefined,
    extra: Extra,
  ): Promise<Result> {
    const { telemetry } = this.#deps;
    if (method.length > MAX_METHOD_LENGTH)
      // No MCP method is anywhere near as long. Refused before it names an event: the
      // registry caches a chain plan per event name (1,024 of them, names of any length).
      throw new ProtocolError(
        JsonRpcCode.METHOD_NOT_FOUND,
        `Method not found: ${shownMethod(method)} (longer than ${MAX_METHOD_LENGTH} characters)`,
        { reason: 'limit_exceeded', limit: 'methodLength', max: MAX_METHOD_LENGTH },
      );
    const maxDepth = this.#deps.config.limits.maxDepth;
    const tooDeep = nestedBeyond(received, maxDepth, 'params');
    if (tooDeep !== undefined) {
      // Refused here, named: deeper params would otherwise reach interceptor services that
      // refuse them (their own limit) and turn a client's mistake into a chain failure.
      throw new ProtocolError(
        JsonRpcCode.INVALID_PARAMS,
        `Invalid params: nested deeper than limits.maxDepth (${maxDepth})`,
        { reason: 'limit_exceeded', limit: 'maxDepth', max: maxDepth, path: tooDeep },
      );
    }
    // The client's reserved _meta keys were meant for the gateway, never for a backend.
    const params = withoutReservedMeta(received);
    const started = performance.now();
    const principal = principalOf(extra, session);
    const parent = propagation.extract(ROOT_CONTEXT, traceCarrier(extra, params));
    const target = targetOf(method, params);
    // What the client chose (a made-up method, a tool named after an email address, a file
    // URI with a card number in it) is scrubbed before it names or labels a span.
    const shownMethodName = spanMethod(method);
    const attributes: Attributes = {
      [ATTR.MCP_METHOD_NAME]: shownMethodName,
      [ATTR.FLEET_PRINCIPAL_TYPE]: principal.type,
    };
    if (principal.id) attributes[ATTR.FLEET_PRINCIPAL_ID] = principal.id;
    if (session.id) attributes[ATTR.MCP_SESSION_ID] = session.id;
    const shownTarget = target === undefined ? undefined : scrubName(target);
    if (shownTarget !== undefined)
      attributes[
        method.startsWith('tools/')
          ? ATTR.MCP_TOOL_NAME
          : method.startsWith('prompts/')
            ? ATTR.MCP_PROMPT_NAME
            : ATTR.MCP_RESOURCE_URI
      ] = shownTarget;
    // Spans are started and ended explicitly and their contexts passed down: entering an
    // ambient context would make every promise of the process pay for its propagation.
    const span = telemetry.tracer.startSpan(
      mcpSpanName(shownMethodName, shownTarget),
      { kind: SpanKind.SERVER, attributes },
      parent,
    );
    const scope: CallScope = { trace: trace.setSpan(parent, span) };
    let status: RequestStatus = 'ok';
    let errorType: string | undefined;
    try {
      const result = await this.#pipeline(
        session,
        method,
        params,
        extra,
        principal,
        target,
        span,
        scope,
      );
      if (scope.denied) status = 'denied'; // answered as an isError tool result
      return result;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (typeof code === 'number')
        safely(() => span.setAttribute(ATTR.RPC_RESPONSE_STATUS_CODE, String(code)));
      if (scope.denied) {
        // A policy decision, not a failure of the gateway: no exception, status left unset.
        status = 'denied';
      } else {
        status = 'error';
        errorType = errorTypeOf(error);
        recordScrubbedError(span, error);
        safely(() => span.setAttribute(ATTR.ERROR_TYPE, errorType as string));
      }
      throw error;
    } finally {
      safely(() => span.setAttribute(ATTR.FLEET_REQUEST_STATUS, status));
      span.end();
      telemetry.recordRequest(method, status, performance.now() - started, errorType);
    }
  }

  async #pipeline(
    session: ClientSession,
    method: string,
    params: Record<string, unknown> | undefined,
    extra: Extra,
    principal: Principal,
    target: string | undefined,
    span: Span,
    scope: CallScope,
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
    // Refused before any interceptor sees it, like params too deep.
    if (method === 'resources/subscribe' && target !== undefined)
      admitSubscription(session, target);
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
      let tool: ToolInfo | undefined;
      try {
        tool = await this.#toolOf(route.backend, route.name);
      } catch (error) {
        this.#observeBackendError(method, target, route.backend.id, context, error);
        throw error;
      }
      const rejected = this.#toolCache(route.backend).rejected.get(route.name);
      if (rejected !== undefined) {
        throw new ProtocolError(
          JsonRpcCode.INVALID_PARAMS,
          `Unknown tool: ${target} (not offered: ${rejected})`,
          { name: target, reason: rejected },
        );
      }
      if (tool?.inputSchema !== undefined) {
        const errors = this.#validators.validate(target, tool.inputSchema, params?.arguments ?? {});
        if (errors) throw invalidArguments(target, errors);
      }
      // A stateless client mirrors annotated arguments into headers that intermediaries in
      // front of the gateway may have acted on: they must say what the body says.
      if (session.stateless && tool && tool.paramHeaders.length > 0)
        checkParamHeaders(tool.paramHeaders, params?.arguments, extra.requestInfo?.headers ?? {});
    }

    const request = await this.#runPhase(
      'request',
      method,
      params ?? {},
      context,
      extra,
      target,
      route?.backend.id,
      scope,
    );
    if ('denied' in request) return request.denied;
    const forwardParams = request.payload as Record<string, unknown>;

    let result: Result;
    try {
      result = await this.#dispatch(session, method, forwardParams, extra, scope);
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
      scope,
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
      cache = { schemas: new Map(), rejected: new Map(), complete: false, generation: 0 };
      this.#toolSchemas.set(backend, cache);
    }
    return cache;
  }

  /**
   * Take in tools of the backend's `tools/list` (see {@link screenTools}): a tool whose
   * `x-mcp-header` annotations are invalid is dropped (logged once per listing generation),
   * the others' schemas and mirrored parameters recorded when `generation` is current.
   * Returns the tools to offer.
   */
  #ingestTools(backend: Backend, screened: readonly ScreenedTool[], generation: number): unknown[] {
    const cache = this.#toolCache(backend);
    const current = cache.generation === generation;
    for (const { name, info, rejected } of screened) {
      if (name === undefined) continue;
      if (rejected !== undefined) {
        if (!cache.rejected.has(name))
          this.#deps.log.warn(
            { backend: backend.id, tool: name, reason: rejected },
            'tool dropped from tools/list: invalid x-mcp-header annotations',
          );
        if (current) cache.rejected.set(name, rejected);
      } else if (current && info) {
        cache.rejected.delete(name);
        cache.schemas.set(name, info);
      }
    }
    return offeredTools(screened);
  }

  /**
   * What `backend` declares for the tool `name` (the backend's own name): from the cache,
   * else from one full listing of the backend's tools. Undefined when the backend does not
   * list the tool or cannot be listed (the backend's own answer then reaches the client).
   */
  async #toolOf(backend: Backend, name: string): Promise<ToolInfo | undefined> {
    const cache = this.#toolCache(backend);
    if (cache.confirming) await cache.confirming;
    if (cache.schemas.has(name) || cache.rejected.has(name) || cache.complete)
      return cache.schemas.get(name);
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
    // A backend without tools/list has no schemas to check against; any other failure fails
    // the call (closed) rather than letting unchecked arguments through.
    const complete = await this.#eachPage(backend, 'tools/list', (tools) => {
      this.#ingestTools(backend, screenTools(tools), generation);
    });
    if (cache.generation === generation) cache.complete = complete;
  }

  /**
   * Read every page of `method` at `backend` for the gateway itself, handing each page's
   * items to `take`; a backend without the method lists nothing. Resolves false when it has
   * more than {@link MAX_LIST_PAGES} pages (the rest are not read).
   * @throws {ProtocolError} the backend's failure (any but -32601).
   */
  async #eachPage(
    backend: Backend,
    method: ListMethod,
    take: (items: unknown) => void,
  ): Promise<boolean> {
    let cursor: string | undefined;
    try {
      for (let pages = 0; pages < MAX_LIST_PAGES; pages++) {
        const page = await backend.request(method, cursor === undefined ? undefined : { cursor }, {
          idempotent: true,
        });
        take(page[LIST_METHODS[method].items]);
        cursor = typeof page.nextCursor === 'string' ? page.nextCursor : undefined;
        if (cursor === undefined) return true;
      }
      return false;
    } catch (error) {
      if ((error as { code?: unknown }).code !== JsonRpcCode.METHOD_NOT_FOUND) throw error;
      return true;
    }
  }

  /**
   * Read what sessions get of `kind` from `backend` on its connection: the {@link listDigest}
   * of every page of its list methods, prefixed, without the tools the gateway does not offer
   * (invalid `x-mcp-header` annotations) and through the operator's tool view; for tools,
   * also the tools as the backend sent them, for the schema cache. Nothing when the backend
   * does not serve `kind`; the digest is undefined when a list has too many pages to read.
   * @throws {ProtocolError} a listing failed.
   */
  async #readList(backend: Backend, kind: ListKind): Promise<ListReading> {
    const items: Partial<Record<ListMethod, unknown[]>> = {};
    if (backend.capabilities?.[kind] === undefined) return { digest: listDigest(items) };
    let tools: ListReading['tools'];
    for (const method of listMethodsOf(kind)) {
      const pages: unknown[] = [];
      const complete = await this.#eachPage(backend, method, (page) => {
        if (Array.isArray(page)) for (const item of page) pages.push(item);
      });
      let list = pages;
      if (method === 'tools/list') {
        tools = { screened: screenTools(pages), complete };
        list = offeredTools(tools.screened);
      }
      if (!complete) return { digest: undefined, tools };
      list = list.map((item) =>
        prefixItem(method, item as Record<string, unknown>, backend.prefix),
      );
      items[method] =
        method === 'tools/list' ? this.#tools.applyToList({ tools: list }).tools : list;
    }
    return { digest: listDigest(items), tools };
  }

  #knownList(backend: Backend, kind: ListKind): KnownList {
    let known = this.#known.get(backend);
    if (!known) {
      known = {
        tools: { digest: undefined, generation: 0 },
        prompts: { digest: undefined, generation: 0 },
        resources: { digest: undefined, generation: 0 },
      };
      this.#known.set(backend, known);
    }
    return known[kind];
  }

  /**
   * Sessions may now hold another `kind` list of `backend` than the gateway last read (the
   * backend said it changed, or a session's listing of it failed): the next connection's is
   * not compared with it, and a reading under way is not recorded.
   */
  #forgetList(backend: Backend, kind: ListKind): void {
    const known = this.#knownList(backend, kind);
    known.digest = undefined;
    known.generation += 1;
  }

  /**
   * Read what sessions get of `kind` from `backend`'s connection, which has just been made,
   * and record it. On a connection that replaced a lost one (`again`), sessions are told the
   * list changed when it differs from what the old connection gave, when that is not known,
   * when the reading fails, or when another connection or change came meanwhile (never a
   * change lost); the tools' cached schemas are then dropped. The tools read then fill the
   * schema cache (after it was dropped), unless anything changed meanwhile: so a call needs
   * no listing of its own. Resolves true when sessions were told; never rejects.
   */
  async #checkList(backend: Backend, kind: ListKind, again: boolean): Promise<boolean> {
    const known = this.#knownList(backend, kind);
    const generation = known.generation;
    const cache = this.#toolCache(backend);
    const toolGeneration = cache.generation;
    let reading: ListReading | undefined;
    try {
      reading = await this.#readList(backend, kind);
    } catch (error) {
      this.#deps.log.warn(
        { backend: backend.id, list: kind, err: String(error) },
        'reading a backend list after connecting failed',
      );
    }
    const digest = reading?.digest;
    const current = known.generation === generation;
    const changed = !current || digest === undefined || digest !== known.digest;
    if (current) known.digest = digest;
    // Read before anything else changed the tools (the backend's own list_changed, a
    // session's failed listing, another connection): the pages are the connection's list.
    const fresh = current && cache.generation === toolGeneration;
    if (kind === 'tools' && again && changed) this.#forgetTools(backend);
    if (fresh && reading?.tools) {
      this.#ingestTools(backend, reading.tools.screened, cache.generation);
      if (reading.tools.complete) cache.complete = true;
    }
    if (!again || !changed) return false;
    this.#notifyListChanged(kind);
    return true;
  }

  /** Tell every session its `kind` list changed. */
  #notifyListChanged(kind: ListKind): void {
    const notification: Notification = { method: `notifications/${kind}/list_changed` };
    for (const session of this.sessions) void notify(session, notification);
  }

  async #runPhase(
    phase: Phase,
    method: string,
    payload: unknown,
    context: InvocationContext,
    extra: Extra,
    target: string | undefined,
    backend: string | undefined,
    scope: CallScope,
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
    // The chain's verdict on each invocation ends its span (see OpenInvocations); made only
    // when spans are recorded (nothing to hold otherwise).
    let open: OpenInvocations | undefined;
    const onOutcome = (o: InvocationOutcome) => {
      open?.settle(o);
      telemetry.recordInvocation(o);
      if (o.error?.reason === AUDIT_OVERLOADED && o.mode === 'audit') this.#skippedAudit(o);
      // The service was redeployed without an interceptor the registry lists: follow it now
      // rather than at the next health check (in the background, once per burst).
      else if (o.error?.reason === InvokeErrorReason.UNKNOWN_INTERCEPTOR)
        registry.rediscoverSoon(o.serviceId);
    };
    const result = await runChain(
      plan,
      { payload, context },
      {
        timeoutMs: config.chain.timeoutMs,
        signal: extra.signal,
        validatePayload: resultValidator(method),
        onOutcome,
        onAuditOutcome: onOutcome,
        deferAudit: this.#audits.defer,
        auditLimit: this.#auditLimit,
        coalesce: config.chain.coalesceInvocations,
        speculativeMutators: config.chain.speculativeMutators,
        wrapStage: async (stage, run) => {
          const stageSpan = telemetry.tracer.startSpan(
            chainStageSpanName(phase, stage.kind),
            {
              attributes: {
                [ATTR.FLEET_CHAIN_PHASE]: phase,
                [ATTR.FLEET_CHAIN_STAGE]: stage.kind,
                [ATTR.FLEET_CHAIN_EVENT]: spanMethod(method),
              },
            },
            scope.trace,
          );
          try {
            // The stage's context reaches each invocation (tracedInvoker makes it the parent).
            const stageScope = trace.setSpan(scope.trace, stageSpan);
            if (stageSpan.isRecording()) open ??= new OpenInvocations();
            await run(open ? open.scope(stageScope) : stageScope);
          } finally {
            stageSpan.end();
          }
        },
      },
    );
    telemetry.recordChain(result);
    this.#observe({ result, method, target, backend, context });
    if (result.status === 'success') return { payload: result.finalPayload };
    if (chainStatusOf(result) === 'validation_failed') scope.denied = true;
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
    scope: CallScope,
  ): Promise<Result> {
    if (isListMethod(method)) {
      const page = await this.router.list(method, params, async (backend, p) => {
        const generation = this.#toolCache(backend).generation;
        const answer = await this.#call(session, backend, method, p, extra, scope).catch(
          (error: unknown) => {
            // This session's list now lacks the backend's items (the router passes over it):
            // its next connection must not be found unchanged.
            if ((error as { code?: unknown }).code !== JsonRpcCode.METHOD_NOT_FOUND)
              this.#forgetList(backend, LIST_METHODS[method].capability);
            throw error;
          },
        );
        // Every tools/list page feeds the schema cache before the response chain filters it,
        // and loses the tools whose x-mcp-header annotations are invalid.
        if (method !== 'tools/list' || !Array.isArray(answer.tools)) return answer;
        return {
          ...answer,
          tools: this.#ingestTools(backend, screenTools(answer.tools), generation),
        };
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
      if (method === 'resources/unsubscribe' && this.#heldByOthers(session, name)) {
        // The backend's subscription serves other sessions too: it stays.
        this.#drop(session, name);
        return {};
      }
      // Held while the backend answers, so concurrent subscribes cannot pass the limit together.
      const subscribing = method === 'resources/subscribe' && !session.subscriptions.has(name);
      // Held by another session already: the backend holds it, for them.
      const heldBefore = subscribing && this.#subscribers.has(name);
      if (subscribing) {
        admitSubscription(session, name);
        session.subscriptions.add(name);
        this.#subscribers.set(name, (this.#subscribers.get(name) ?? 0) + 1);
      }
      const headers =
        method === 'tools/call' && route.backend.http
          ? await this.#paramHeaders(route.backend, route.name, params.arguments)
          : undefined;
      const forward = () =>
        this.#call(
          session,
          route.backend,
          method,
          { ...params, [field]: route.name },
          extra,
          scope,
          headers,
        );
      let result: Result;
      try {
        result = await (method === 'resources/subscribe' || method === 'resources/unsubscribe'
          ? this.#inOrder(`resource ${name}`, forward)
          : forward());
      } catch (error) {
        // The backend's subscription of a session that unsubscribed meanwhile (this one held
        // it for them) is now nobody's: released as a closed session's would be.
        if (subscribing && this.#drop(session, name) <= 0 && heldBefore) this.#release(name);
        throw error;
      }
      if (method === 'resources/unsubscribe') this.#drop(session, name);
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
      if (!route) throw unknownTarget(method, value, ref?.type);
      return this.#call(
        session,
        route.backend,
        method,
        { ...params, ref: { ...ref, [key]: route.name } },
        extra,
        scope,
      );
    }
    if (method === 'logging/setLevel') {
      // A level that is not an MCP level was refused (-32602) with the request's schema.
      session.logLevel = params.level as LoggingLevel;
      // One backend connection serves every session: it sends what the most verbose of them
      // wants, and each session gets the lines at its own level and above.
      const verbose = this.#mostVerboseLevel() ?? session.logLevel;
      this.#backendLogLevel = verbose;
      const forwarded = { ...params, level: verbose };
      await this.#inOrder('logging', () =>
        Promise.all(
          this.#deps.backends
            .filter((b) => b.capabilities?.logging)
            .map((b) =>
              this.#call(session, b, method, forwarded, extra, scope).catch(() => undefined),
            ),
        ),
      );
      return {};
    }
    if (this.#deps.backends.length === 1)
      return this.#call(session, this.#deps.backends[0] as Backend, method, params, extra, scope);
    throw new ProtocolError(
      JsonRpcCode.METHOD_NOT_FOUND,
      `Method not found: ${shownMethod(method)}`,
    );
  }

  /**
   * Run `call` (a call that changes what the backends hold for every session, `key`) once the
   * one before it for `key` is done, whatever its outcome.
   */
  #inOrder<T>(key: string, call: () => Promise<T>): Promise<T> {
    const previous = this.#shared.get(key);
    const result = previous === undefined ? call() : previous.then(call, call);
    const settled = result.then(noop, noop);
    this.#shared.set(key, settled);
    void settled.then(() => {
      if (this.#shared.get(key) === settled) this.#shared.delete(key);
    });
    return result;
  }

  /**
   * An audit-mode invocation was not started: its service had `chain.maxAuditInFlight` in
   * flight (it hangs, or is far slower than the calls come). Said at most once a minute.
   */
  #skippedAudit(o: InvocationOutcome): void {
    if (!this.#auditSkipped.due()) return;
    this.#deps.log.warn(
      {
        service: o.serviceId,
        interceptor: o.interceptor,
        max: this.#auditLimit.max,
        times: this.#auditSkipped.count,
      },
      'skipped audit-mode invocations: their service has chain.maxAuditInFlight in flight',
    );
  }

  /** Drop what the gateway knows of `backend`'s tools (their list changed). */
  #forgetTools(backend: Backend): void {
    const cache = this.#toolCache(backend);
    cache.generation += 1;
    cache.schemas.clear();
    cache.rejected.clear();
    cache.complete = false;
    cache.loading = undefined;
  }

  /** The gateway's instruments (the ingress counts its refusals there too). */
  get telemetry(): GatewayTelemetry {
    return this.#deps.telemetry;
  }

  /** True when a session other than `session` is subscribed to `uri`. */
  #heldByOthers(session: ClientSession, uri: string): boolean {
    return (this.#subscribers.get(uri) ?? 0) > (session.subscriptions.has(uri) ? 1 : 0);
  }

  /** `session` no longer holds `uri`; returns how many sessions still do. */
  #drop(session: ClientSession, uri: string): number {
    const held = this.#subscribers.get(uri) ?? 0;
    if (!session.subscriptions.delete(uri)) return held;
    if (held > 1) this.#subscribers.set(uri, held - 1);
    else this.#subscribers.delete(uri);
    return held - 1;
  }

  /**
   * A session ended: it is forgotten, and its subscriptions that no other session holds are
   * dropped at their backends, which would otherwise keep them (and send their updates) for
   * as long as the gateway's connection lives.
   */
  closeSession(session: ClientSession): void {
    this.sessions.delete(session);
    for (const uri of session.subscriptions) if (this.#drop(session, uri) <= 0) this.#release(uri);
    if (session.logLevel !== undefined) this.#relaxLogLevel();
  }

  /** The most verbose log level a session set, if any did. */
  #mostVerboseLevel(): LoggingLevel | undefined {
    let verbose: LoggingLevel | undefined;
    for (const { logLevel } of this.sessions)
      if (logLevel !== undefined)
        verbose = verbose === undefined ? logLevel : moreVerbose(verbose, logLevel);
    return verbose;
  }

  /**
   * A session that had set a log level ended: when the backends were asked for a level more
   * verbose than any live session wants, they are asked for the one that is (the `debug` of a
   * session that has gone would otherwise go on for as long as the connections live). With
   * no live session holding a level, the backends keep the last one.
   */
  #relaxLogLevel(): void {
    const level = this.#mostVerboseLevel();
    if (level === undefined || level === this.#backendLogLevel) return;
    this.#backendLogLevel = level;
    void this.#sendLogLevel(this.#deps.backends);
  }

  /**
   * Ask `backends` (those connected that log) for the level the backends were last asked for
   * ({@link #backendLogLevel}, read in turn), after any earlier call that set it.
   */
  #sendLogLevel(backends: readonly Backend[]): Promise<void> {
    return this.#inOrder('logging', async () => {
      const level = this.#backendLogLevel;
      if (level === undefined) return;
      await Promise.all(
        backends
          .filter((b) => b.capabilities?.logging && b.connected)
          .map((b) =>
            b
              .request('logging/setLevel', { level })
              .catch((error: unknown) =>
                this.#deps.log.warn(
                  { backend: b.id, err: String(error) },
                  'asking a backend for the log level failed',
                ),
              ),
          ),
      );
    });
  }

  /** Unsubscribe from `uri` at its backend, which no session holds any more. */
  #release(uri: string): void {
    this.#orphaned.push(uri);
    if (!this.#releasing) void this.#releaseOrphaned();
  }

  /** Unsubscribe from the orphaned URIs, one request at a time (never a burst at a backend). */
  async #releaseOrphaned(): Promise<void> {
    this.#releasing = true;
    try {
      while (this.#orphaned.length > 0) {
        const batch = this.#orphaned;
        this.#orphaned = [];
        for (const uri of batch) {
          const route = this.router.route(uri);
          // Subscribed again meanwhile; or a connection that is gone took its subscriptions along.
          if (this.#subscribers.has(uri) || !route?.backend.connected) continue;
          await this.#inOrder(`resource ${uri}`, async () => {
            // A session may have subscribed again while this waited its turn: it stays.
            if (!this.#subscribers.has(uri))
              await route.backend.request('resources/unsubscribe', { uri: route.name });
          }).catch((error: unknown) =>
            this.#deps.log.debug(
              { backend: route.backend.id, err: String(error) },
              'releasing a subscription of a closed session failed',
            ),
          );
        }
      }
    } finally {
      this.#releasing = false;
    }
  }

  /**
   * The `Mcp-Param-*` headers of a call to `name` on an HTTP backend, from the arguments as
   * forwarded (after the request chain), so that they mirror what the backend receives.
   * @throws {ProtocolError} -32602 for an argument that cannot travel in a header.
   */
  async #paramHeaders(
    backend: Backend,
    name: string,
    args: unknown,
  ): Promise<Record<string, string> | undefined> {
    const tool = await this.#toolOf(backend, name);
    if (!tool || tool.paramHeaders.length === 0) return undefined;
    return paramHeaderValues(tool.paramHeaders, args);
  }

  async #call(
    session: ClientSession,
    backend: Backend,
    method: string,
    params: Record<string, unknown> | undefined,
    extra: Extra,
    scope: CallScope,
    headers?: Record<string, string>,
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
                params: { ...withoutReservedMeta(progress), progressToken: clientToken },
              } as ServerNotification)
              .catch(() => undefined);
          };
    const forwarded = params && clientToken !== undefined ? withoutProgressToken(params) : params;
    const flight: InFlight = { session, extra };
    // A stateless client's call can be failed from outside (see onServerRequest): the
    // backend call is then cancelled and the failure answers the client at once.
    let signal = extra.signal;
    let failed: Promise<never> | undefined;
    let unlink = () => {};
    if (session.stateless) {
      const controller = new AbortController();
      const follow = () => controller.abort(extra.signal.reason);
      if (extra.signal.aborted) follow();
      else extra.signal.addEventListener('abort', follow, { once: true });
      unlink = () => extra.signal.removeEventListener('abort', follow);
      signal = controller.signal;
      failed = new Promise<never>((_resolve, reject) => {
        flight.fail = (error) => {
          reject(error);
          controller.abort(error);
        };
      });
      failed.catch(() => undefined);
    }
    const list = this.#inFlight.get(backend) ?? [];
    list.push(flight);
    this.#inFlight.set(backend, list);
    const started = performance.now();
    const parent = scope.trace;
    const span = telemetry.tracer.startSpan(
      `${spanMethod(method)} ${backend.id}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [ATTR.MCP_METHOD_NAME]: spanMethod(method),
          [ATTR.FLEET_BACKEND_ID]: backend.id,
        },
      },
      parent,
    );
    let errorType: string | undefined;
    try {
      const callTrace = trace.setSpan(parent, span);
      const answer = backend.request(method, withTraceMeta(forwarded, callTrace), {
        signal,
        onprogress,
        idempotent: IDEMPOTENT.has(method),
        headers,
        trace: callTrace,
        // A saturated backend serves its waiting calls per principal in turn.
        fairness: fairnessKeyOf(principalOf(extra, session), session.id),
      });
      // A backend's reserved _meta keys never reach the client as the gateway's word.
      return withoutReservedMeta(await (failed ? Promise.race([answer, failed]) : answer));
    } catch (error) {
      errorType = errorTypeOf(error);
      // A backend's error text may quote the arguments it was sent.
      safely(() => {
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: scrubText((error as Error).message),
        });
        span.setAttribute(ATTR.ERROR_TYPE, errorType as string);
      });
      throw error;
    } finally {
      span.end();
      unlink();
      telemetry.recordBackend(backend.id, method, performance.now() - started, errorType);
      const i = list.indexOf(flight);
      if (i >= 0) list.splice(i, 1);
    }
  }

  /**
   * `backend` is connected, and its tools, prompts and resources are read (every page) to know
   * what sessions get from it; the tools read fill the schema cache, so calls, which wait for
   * them, need no listing of their own. On its first connection, sessions that started
   * before (it came up late) hold lists without its items: each is told its tools, prompts
   * and resources changed (those the backend serves). A connection that replaces a lost one
   * (it came back) is compared with the old one: sessions are told only of the lists that
   * differ (see {@link #checkList}), and the tools' cached schemas, which calls wait on until
   * then, are replaced by those read only when the tools differ. That connection also lost
   * what the backend held for every session: the resource subscriptions sessions still hold
   * there are made again (one at a time, in turn with the sessions' own subscribes and
   * unsubscribes) and the log level is asked for again.
   */
  onBackendConnected(backend: Backend, again: boolean): void {
    const caps = backend.capabilities;
    if (!again && caps !== undefined && this.sessions.size > 0)
      for (const kind of LISTS) if (caps[kind] !== undefined) this.#notifyListChanged(kind);
    // Readings of an older connection still under way are not recorded.
    for (const kind of LISTS) this.#knownList(backend, kind).generation += 1;
    // One list at a time: the gateway's own reads take one of the backend's slots, not three
    // (with a small resilience.maxConcurrent they were refused as overloaded, and so could the
    // first calls of clients be). Tools first: calls wait for them only.
    const tools = this.#checkList(backend, 'tools', again);
    const checks = tools.then(async (toolsChanged) => {
      const changed: ListKind[] = toolsChanged ? ['tools'] : [];
      for (const kind of LISTS)
        if (kind !== 'tools' && (await this.#checkList(backend, kind, again))) changed.push(kind);
      return changed;
    });
    // Calls wait for the tools: their reading fills the schema cache (no listing of a call's
    // own), and on a connection that replaced a lost one the cache holds the old tools until
    // they are compared.
    const cache = this.#toolCache(backend);
    const confirming = tools.then(() => {
      if (cache.confirming === confirming) cache.confirming = undefined;
    });
    cache.confirming = confirming;
    if (!again) return;
    void checks.then((changed) =>
      this.#deps.log.info(
        { backend: backend.id, changed },
        'backend lists compared with those of the lost connection',
      ),
    );
    // The URIs sessions hold there, with their names at the backend (routes never change).
    const held: Array<[uri: string, name: string]> = [];
    for (const uri of this.#subscribers.keys()) {
      const route = this.router.route(uri);
      if (route?.backend === backend) held.push([uri, route.name]);
    }
    void (async () => {
      await this.#sendLogLevel([backend]);
      for (const [uri, name] of held) {
        await this.#inOrder(`resource ${uri}`, async () => {
          // Unsubscribed by every session meanwhile: nothing to restore.
          if (this.#subscribers.has(uri))
            await backend.request('resources/subscribe', { uri: name });
        }).catch((error: unknown) =>
          this.#deps.log.warn(
            { backend: backend.id, err: String(error) },
            'subscribing a reconnected backend again failed',
          ),
        );
      }
    })();
  }

  /**
   * A backend notification: a log line goes to the call in flight on that backend (every
   * session when none is), list changes to every session, resource updates to subscribers.
   */
  onBackendNotification(backend: Backend, received: Notification): void {
    const params = withoutReservedMeta(received.params as Record<string, unknown> | undefined);
    const notification: Notification =
      params === received.params ? received : { method: received.method, params };
    for (const kind of LISTS)
      if (notification.method === `notifications/${kind}/list_changed`) {
        // Relayed below. What the gateway read before is stale: a later connection is not
        // compared with it (sessions are told).
        this.#forgetList(backend, kind);
        if (kind === 'tools') this.#forgetTools(backend);
      }
    if (notification.method === 'notifications/resources/updated') {
      const uri = `${backend.prefix}${String(params?.uri)}`;
      if (!this.#subscribers.has(uri)) return;
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
        if (wantsLogLine(flight.session, params))
          void flight.extra
            .sendNotification(notification as ServerNotification)
            .catch(() => undefined);
        return;
      }
      for (const session of this.sessions)
        if (wantsLogLine(session, params)) void notify(session, notification);
      return;
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

  /**
   * A backend asks its client for something: relay it to the session whose call caused it.
   * A stateless (2026-07-28) request has no channel for server-to-client requests (the
   * revision replaced them with multi round-trip results, which the gateway does not
   * translate to): the backend gets an error, and when the client did not even declare the
   * capability the request needs, the client's call fails at once with -32021.
   */
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
    const stateless = flight.session.stateless;
    if (stateless) {
      const capability = CAPABILITY_OF[request.method];
      if (capability !== undefined && stateless.clientCapabilities[capability] === undefined) {
        flight.fail?.(
          new ProtocolError(
            JsonRpcCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
            `Missing required client capability "${capability}": a backend asked for ${request.method}`,
            { requiredCapabilities: { [capability]: {} } },
          ),
        );
      }
      throw new ProtocolError(
        JsonRpcCode.INTERNAL_ERROR,
        `${request.method} cannot be relayed to a stateless (${stateless.protocolVersion}) client`,
        { reason: 'stateless_client' },
      );
    }
    const answer = await flight.extra.sendRequest(
      { method: request.method, params: withoutReservedMeta(request.params) } as ServerRequest,
      ResultSchema,
      { signal },
    );
    return withoutReservedMeta(answer);
  }

  /** A client notification (roots changed, ...): forwarded to every backend. */
  async onClientNotification(notification: Notification): Promise<void> {
    if (notification.method === 'notifications/roots/list_changed') {
      const params = withoutReservedMeta(
        notification.params as Record<string, unknown> | undefined,
      );
      const forwarded = { method: notification.method, ...(params ? { params } : {}) };
      await Promise.all(this.#deps.backends.map((b) => this.#rootsChanged(b, forwarded)));
    }
  }

  /**
   * Tell `backend` that roots changed, one notification at a time: those arriving while one is
   * on its way collapse into one more (the latest), sent when it is done. A client answered 202
   * at once could otherwise pile up a POST per notification, per backend, in the gateway.
   */
  async #rootsChanged(backend: Backend, notification: Notification): Promise<void> {
    const sending = this.#rootsChanges.get(backend);
    if (sending) {
      sending.next = notification;
      return;
    }
    const state: { next: Notification | undefined } = { next: notification };
    this.#rootsChanges.set(backend, state);
    try {
      for (let next = state.next; next !== undefined; next = state.next) {
        state.next = undefined;
        await backend.notify(next);
      }
    } finally {
      this.#rootsChanges.delete(backend);
    }
  }
}

/** Whether `session` takes a log line with these params (its level or above, once it set one). */
function wantsLogLine(
  session: ClientSession,
  params: Record<string, unknown> | undefined,
): boolean {
  return session.logLevel === undefined || reachesLogLevel(params?.level, session.logLevel);
}

async function notify(session: ClientSession, notification: Notification): Promise<void> {
  try {
    await session.server?.notification(notification as ServerNotification);
  } catch {
    // A gone client or an undeclared capability: nothing to deliver.
  }
}

/**
 * Refuse a subscription to `uri` that would take `session` past its bounds: more than
 * {@link MAX_SUBSCRIPTIONS_PER_SESSION} resources, a URI longer than
 * {@link MAX_SUBSCRIPTION_URI_LENGTH}, or URIs longer than {@link MAX_SUBSCRIBED_URI_CHARACTERS}
 * in all. Subscribing again to a URI it holds is always fine.
 * @throws {ProtocolError} -32602 `{reason: "limit_exceeded", limit, max}`.
 */
function admitSubscription(session: ClientSession, uri: string): void {
  const { subscriptions } = session;
  if (subscriptions.has(uri)) return;
  if (uri.length > MAX_SUBSCRIPTION_URI_LENGTH)
    throw overLimit(
      'subscriptionUriLength',
      MAX_SUBSCRIPTION_URI_LENGTH,
      `a subscribed resource URI may have at most ${MAX_SUBSCRIPTION_URI_LENGTH} characters`,
      { field: 'uri' },
    );
  if (subscriptions.size >= MAX_SUBSCRIPTIONS_PER_SESSION)
    throw overLimit(
      'subscriptionsPerSession',
      MAX_SUBSCRIPTIONS_PER_SESSION,
      `a session may subscribe to at most ${MAX_SUBSCRIPTIONS_PER_SESSION} resources (unsubscribe from one first)`,
    );
  let characters = uri.length;
  for (const held of subscriptions) characters += held.length;
  if (characters > MAX_SUBSCRIBED_URI_CHARACTERS)
    throw overLimit(
      'subscribedUriCharacters',
      MAX_SUBSCRIBED_URI_CHARACTERS,
      `the URIs a session subscribes to may have at most ${MAX_SUBSCRIBED_URI_CHARACTERS} characters in all (unsubscribe from one first)`,
    );
}

/** -32602 for params past one of the gateway's fixed bounds: `{reason: "limit_exceeded", limit, max, ...data}`. */
function overLimit(
  limit: string,
  max: number,
  text: string,
  data: Record<string, unknown> = {},
): ProtocolError {
  return new ProtocolError(JsonRpcCode.INVALID_PARAMS, `Invalid params: ${text}`, {
    reason: 'limit_exceeded',
    limit,
    max,
    ...data,
  });
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

/**
 * `params` whose `_meta.traceparent`, when the client sent one, names the span of `ctx` (the
 * gateway's backend call), like the `traceparent` header of the same hop: the client's own
 * value would make the backend a sibling of the gateway's spans. Without a propagator
 * (no tracing set up) `params` pass unchanged.
 */
function withTraceMeta(
  params: Record<string, unknown> | undefined,
  ctx: Context,
): Record<string, unknown> | undefined {
  const meta = params?._meta as Record<string, unknown> | undefined;
  if (params === undefined || typeof meta?.traceparent !== 'string') return params;
  const carrier: Record<string, string> = {};
  safely(() => propagation.inject(ctx, carrier));
  if (carrier.traceparent === undefined) return params;
  const traced: Record<string, unknown> = { ...meta, traceparent: carrier.traceparent };
  if (carrier.tracestate !== undefined) traced.tracestate = carrier.tracestate;
  return { ...params, _meta: traced };
}

function withoutProgressToken(params: Record<string, unknown>): Record<string, unknown> {
  const meta = { ...(params._meta as Record<string, unknown>) };
  delete meta.progressToken;
  const out = { ...params };
  if (Object.keys(meta).length > 0) out._meta = meta;
  else delete out._meta;
  return out;
}

/** -32602 naming what `method` (or a completion's `ref.type`) could not find. */
function unknownTarget(method: string, name: string, refType?: string): ProtocolError {
  const what = method.startsWith('tools/')
    ? 'tool'
    : method.startsWith('prompts/') || refType === 'ref/prompt'
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
