/**
 * Every span name, attribute name, metric name and queue name the fleet uses, in one table.
 * Services and libraries refer to these constants, never to string literals, so a dashboard,
 * an alert or a trace query can rely on one spelling. Standard OpenTelemetry names (`mcp.*`,
 * `error.type`, `messaging.*`, ...) follow the semantic conventions; `fleet.*` names are ours.
 */

/**
 * The fleet's telemetry vocabulary. {@link SPAN}, {@link ATTR}, {@link METRIC},
 * {@link RUNTIME_METRIC} and {@link QUEUE} are its sections.
 */
export const FLEET_NAMES = {
  /**
   * Span names. These are all the spans the fleet creates:
   * - `{method} {target}` (SERVER): an MCP request at the orchestrator, named by
   *   {@link mcpSpanName} (`tools/call get_weather`);
   * - `fleet.chain {phase} {stage}` (INTERNAL): one stage of a chain phase in the
   *   orchestrator ({@link chainStageSpanName});
   * - `interceptor/invoke {name}` (CLIENT in the orchestrator, SERVER in an interceptor
   *   service; {@link interceptorInvokeSpanName});
   * - `{method} {backend id}` (CLIENT): the orchestrator's call to an MCP backend;
   * - `process {queue}` (CONSUMER): one insert batch of the audit worker, e.g.
   *   `process fleet-audit`.
   * Discovery (`interceptors/list`) and enqueueing audit records get no span of their own (with
   * the optional `http`/`undici` auto-instrumentation, discovery's HTTP requests get its spans).
   */
  span: {
    /**
     * Prefix of one stage of a chain phase run by the orchestrator (INTERNAL):
     * `fleet.chain {phase} {stage}`, e.g. `fleet.chain request validators` (see
     * {@link chainStageSpanName}).
     */
    CHAIN_STAGE: 'fleet.chain',
    /**
     * Prefix of an interceptor invocation: `interceptor/invoke {name}` (CLIENT in the
     * orchestrator, SERVER in the interceptor service; there `{name}` is `other` when the
     * service has no such interceptor, as the caller may send any name).
     */
    INTERCEPTOR_INVOKE: 'interceptor/invoke',
    /**
     * Prefix of the audit worker's span for one insert batch (CONSUMER): `process {queue}`,
     * e.g. `process fleet-audit` (messaging semconv: `{operation} {destination}`).
     */
    AUDIT_PROCESS: 'process',
  },
  attribute: {
    /** MCP method of the request, e.g. `tools/call` (semconv). */
    MCP_METHOD_NAME: 'mcp.method.name',
    /** Tool named by a `tools/call` request. */
    MCP_TOOL_NAME: 'mcp.tool.name',
    /** Prompt named by a `prompts/get` request. */
    MCP_PROMPT_NAME: 'mcp.prompt.name',
    /** Resource URI of a `resources/read` (or subscribe) request (semconv). */
    MCP_RESOURCE_URI: 'mcp.resource.uri',
    /** The `mcp-session-id` of the client session (semconv). */
    MCP_SESSION_ID: 'mcp.session.id',
    /** Negotiated MCP protocol version (semconv). */
    MCP_PROTOCOL_VERSION: 'mcp.protocol.version',
    /** JSON-RPC request id, as a string (semconv). */
    JSONRPC_REQUEST_ID: 'jsonrpc.request.id',
    /** JSON-RPC error code of a failed request, as a string (semconv). */
    RPC_RESPONSE_STATUS_CODE: 'rpc.response.status_code',
    /** Low-cardinality class of a failure, e.g. a `FleetError` code (semconv). */
    ERROR_TYPE: 'error.type',
    /** Id of the authenticated principal. */
    FLEET_PRINCIPAL_ID: 'fleet.principal.id',
    /** `user` | `service` | `anonymous`. */
    FLEET_PRINCIPAL_TYPE: 'fleet.principal.type',
    /** Id of the MCP backend a request was routed to. */
    FLEET_BACKEND_ID: 'fleet.backend.id',
    /** Interceptor name (unique per service). */
    FLEET_INTERCEPTOR_NAME: 'fleet.interceptor.name',
    /** `validation` | `mutation`. */
    FLEET_INTERCEPTOR_TYPE: 'fleet.interceptor.type',
    /** `active` | `audit`. */
    FLEET_INTERCEPTOR_MODE: 'fleet.interceptor.mode',
    /**
     * One invocation's outcome: `allowed` `warned` `denied` `modified` `unchanged` `failed`
     * `timeout` `rejected` (the service refused the caller's params with -32602; the
     * orchestrator's chain and the service's own span and metric both say so).
     */
    FLEET_INTERCEPTOR_OUTCOME: 'fleet.interceptor.outcome',
    /** Id of the interceptor service (derived from its URL). */
    FLEET_INTERCEPTOR_SERVICE: 'fleet.interceptor.service',
    /** `request` | `response` (`other` on an interceptor service's span for anything else sent). */
    FLEET_CHAIN_PHASE: 'fleet.chain.phase',
    /**
     * The intercepted event (the governed method, e.g. `tools/call`). An interceptor service
     * shows `other` for an event that is neither an MCP method nor named by a hook as it is.
     */
    FLEET_CHAIN_EVENT: 'fleet.chain.event',
    /**
     * How a chain phase ended: `success`, `validation_failed` (a validator denied),
     * `invocation_failed` (a validator's invocation failed, none denied), `mutation_failed`,
     * `timeout`.
     */
    FLEET_CHAIN_STATUS: 'fleet.chain.status',
    /** `validators` | `mutators`. */
    FLEET_CHAIN_STAGE: 'fleet.chain.stage',
    /** Why a chain aborted: `validation` `mutation` `invocation` `timeout`. */
    FLEET_CHAIN_ABORT_TYPE: 'fleet.chain.abort.type',
    /** Why the gateway's MCP ingress refused a request (see `fleet.ingress.rejections`). */
    FLEET_REJECTION_KIND: 'fleet.rejection.kind',
    /**
     * Why the gateway refused a backend call without sending it (see `fleet.backend.refusals`):
     * `overloaded` (every `resilience.maxConcurrent` slot runs and as many calls wait) or
     * `circuit_open` (the backend's circuit breaker is open).
     */
    FLEET_REFUSAL_REASON: 'fleet.refusal.reason',
    /**
     * Whose backend call the gateway refused (see `fleet.backend.refusals`): `client` (a
     * client's request forwarded to the backend, the calls `fleet.backend.duration` counts) or
     * `gateway` (a call the gateway makes itself: reading a backend's lists on connecting or
     * for the tool schema cache, subscribing again after a reconnect, the log level).
     */
    FLEET_CALL_ORIGIN: 'fleet.call.origin',
    /** How the gateway answered a request: `ok` `denied` `error`. */
    FLEET_REQUEST_STATUS: 'fleet.request.status',
    /**
     * What happened to audit records or jobs, on the `fleet.audit.*` counters: producer records
     * `enqueued` `sent` `journaled` `replayed` `dropped` `rejected`; producer batches `sent`
     * `failed`; worker records `processed` `inserted` `duplicate` `malformed` `refused`
     * `scrub_failed`; worker batches `committed` `failed`; worker jobs `completed` `retried`
     * `failed`.
     */
    FLEET_AUDIT_OUTCOME: 'fleet.audit.outcome',
    /**
     * Why the producer lost audit records, beside `fleet.audit.outcome` `dropped`
     * (`journal_write`: the journal could not be written; `journal_read`: a journal line could
     * not be read back) and `rejected` (`invalid_id`: no ULID id; `unserialisable`).
     */
    FLEET_AUDIT_REASON: 'fleet.audit.reason',
    /** State of the jobs in the audit queue: `waiting` (paused included) `active` `delayed` `failed`. */
    FLEET_AUDIT_JOB_STATE: 'fleet.audit.job.state',
    /** Id of an audit record (its idempotency key). */
    FLEET_AUDIT_RECORD_ID: 'fleet.audit.record.id',
    /** Messaging system of the audit queue: `bullmq` (semconv). */
    MESSAGING_SYSTEM: 'messaging.system',
    /** Queue name, e.g. `fleet-audit` (semconv). */
    MESSAGING_DESTINATION_NAME: 'messaging.destination.name',
    /** `process`, on the audit worker's CONSUMER span (semconv). */
    MESSAGING_OPERATION_TYPE: 'messaging.operation.type',
    /**
     * What a recorded tool drift was, on `fleet.pins.drift.detections`: `new` (a pinned tool's
     * definition differs for the first time) or `changed` (a known drift's definition changed
     * again).
     */
    FLEET_PINS_DRIFT_KIND: 'fleet.pins.drift.kind',
    /**
     * What became of a tool the full pin store could not pin, on `fleet.pins.unpinned`:
     * `hidden` (removed from a `tools/list`), `refused` (a call denied), `passed` (let through
     * unverified: `pinning.failOpen`).
     */
    FLEET_PINS_ACTION: 'fleet.pins.action',
    /** Kind of a garbage collection: `minor` `major` `incremental` `weakcb` (semconv). */
    V8JS_GC_TYPE: 'v8js.gc.type',
    /** V8 heap space, e.g. `old_space`, `new_space`; the set is fixed by the V8 version (semconv). */
    V8JS_HEAP_SPACE_NAME: 'v8js.heap.space.name',
    /** `user` | `system` on `process.cpu.time` (semconv). */
    CPU_MODE: 'cpu.mode',
    /** `active` | `idle` on `nodejs.eventloop.time` (semconv). */
    NODEJS_EVENTLOOP_STATE: 'nodejs.eventloop.state',
  },
  metric: {
    /** Histogram (ms): one MCP request at the gateway, by method and request status. */
    REQUEST_DURATION: 'fleet.request.duration',
    /** Histogram (ms): one chain phase, by event, phase and chain status. */
    CHAIN_DURATION: 'fleet.chain.duration',
    /** Histogram (ms): one interceptor invocation, by interceptor and outcome. */
    INTERCEPTOR_DURATION: 'fleet.interceptor.duration',
    /** Counter: chains that aborted, by abort type and the interceptor that caused it. */
    CHAIN_ABORTS: 'fleet.chain.aborts',
    /** Histogram (ms): one call to an MCP backend, by backend, method and status. */
    BACKEND_DURATION: 'fleet.backend.duration',
    /**
     * Counter ({request}): requests the gateway's MCP ingress refused before serving them, by
     * `fleet.rejection.kind` (its error table's entry, e.g. `unauthorized` `forbidden`
     * `payload_too_large` `too_many_requests` `session_not_found`, or `overloaded`: a session
     * over `limits.maxInFlightPerSession`).
     */
    INGRESS_REJECTIONS: 'fleet.ingress.rejections',
    /**
     * Counter ({call}): backend calls the gateway refused without sending them, by
     * `fleet.backend.id`, `fleet.refusal.reason` (`overloaded`, `circuit_open`) and
     * `fleet.call.origin` (`client`, `gateway`). Never by principal: who floods a backend is in
     * the gateway's log, not in a label.
     */
    BACKEND_REFUSALS: 'fleet.backend.refusals',
    /**
     * Counter ({record}): records a process's audit producer handled, by `fleet.audit.outcome`
     * (`enqueued` `sent` `journaled` `replayed`; `dropped` and `rejected` also by
     * `fleet.audit.reason`). Observed from the producer's counters at collection.
     */
    AUDIT_PRODUCER_RECORDS: 'fleet.audit.producer.records',
    /** Counter ({batch}): the producer's sends to Redis (`addBulk`), `fleet.audit.outcome` `sent` | `failed`. */
    AUDIT_PRODUCER_BATCHES: 'fleet.audit.producer.batches',
    /**
     * Gauge ({record}): records waiting in the producer for Redis, by `state` (`memory`,
     * `journal`; an undotted label the chart's queries already use).
     */
    AUDIT_PRODUCER_PENDING: 'fleet.audit.producer.pending',
    /** Gauge: 1 while the producer's Redis connection is up, else 0. */
    AUDIT_PRODUCER_CONNECTED: 'fleet.audit.producer.connected',
    /**
     * Counter ({record}): records a process's audit worker handled, by `fleet.audit.outcome`
     * (`processed`: stored, now or before; `inserted` `duplicate` `malformed` `refused`
     * `scrub_failed`).
     */
    AUDIT_WORKER_RECORDS: 'fleet.audit.worker.records',
    /** Counter ({batch}): the worker's insert statements, `fleet.audit.outcome` `committed` | `failed`. */
    AUDIT_WORKER_BATCHES: 'fleet.audit.worker.batches',
    /**
     * Counter ({job}): queue jobs the worker finished, by `fleet.audit.outcome` (`completed`;
     * `retried`: an attempt failed and BullMQ tries again; `failed`: moved to the failed set).
     */
    AUDIT_WORKER_JOBS: 'fleet.audit.worker.jobs',
    /** Gauge ({record}): records the worker holds (batched, being inserted, or held in an outage). */
    AUDIT_WORKER_PENDING: 'fleet.audit.worker.pending',
    /** Gauge: 1 while the worker holds records because the audit store does not answer, else 0. */
    AUDIT_WORKER_STORE_UNAVAILABLE: 'fleet.audit.worker.store_unavailable',
    /**
     * Gauge ({job}): jobs in the audit queue, by `fleet.audit.job.state`, read from Redis by
     * the worker side at most every few seconds. The same for every process on the queue.
     */
    AUDIT_QUEUE_JOBS: 'fleet.audit.queue.jobs',
    /**
     * Counter ({drift}): tool drifts the policy-validator process recorded (a `tools/list`
     * showed a pinned tool with another definition), by `fleet.pins.drift.kind`. Never by
     * tool: tool names are chosen by backends, unbounded.
     */
    PINS_DRIFT_DETECTIONS: 'fleet.pins.drift.detections',
    /**
     * Gauge ({tool}): tools with an unapproved drift (hidden and refused) in the shared pin
     * store, read from Redis at collection. The same for every policy-validator replica.
     */
    PINS_DRIFTED_TOOLS: 'fleet.pins.drifted_tools',
    /** Gauge ({tool}): tools pinned in the shared pin store, read from Redis at collection. */
    PINS_PINNED_TOOLS: 'fleet.pins.pinned_tools',
    /**
     * Counter ({tool}): never-seen tools the full pin store could not pin, each time one was
     * listed or called, by `fleet.pins.action`.
     */
    PINS_UNPINNED: 'fleet.pins.unpinned',
  },
  /**
   * Node.js runtime and process metrics, observed by every service started with
   * `startTelemetry` (see `runtime.ts`). Names, units and instrument kinds follow the
   * OpenTelemetry semantic conventions (`@opentelemetry/semantic-conventions` 1.45, incubating).
   */
  runtimeMetric: {
    /** Gauge (s): smallest event-loop delay sample since the previous collection. */
    EVENTLOOP_DELAY_MIN: 'nodejs.eventloop.delay.min',
    /** Gauge (s): largest event-loop delay sample since the previous collection. */
    EVENTLOOP_DELAY_MAX: 'nodejs.eventloop.delay.max',
    /** Gauge (s): mean event-loop delay since the previous collection. */
    EVENTLOOP_DELAY_MEAN: 'nodejs.eventloop.delay.mean',
    /** Gauge (s): standard deviation of the event-loop delay since the previous collection. */
    EVENTLOOP_DELAY_STDDEV: 'nodejs.eventloop.delay.stddev',
    /** Gauge (s): median event-loop delay since the previous collection. */
    EVENTLOOP_DELAY_P50: 'nodejs.eventloop.delay.p50',
    /** Gauge (s): 90th percentile event-loop delay since the previous collection. */
    EVENTLOOP_DELAY_P90: 'nodejs.eventloop.delay.p90',
    /** Gauge (s): 99th percentile event-loop delay since the previous collection. */
    EVENTLOOP_DELAY_P99: 'nodejs.eventloop.delay.p99',
    /** Gauge (1): share of time the event loop was busy since the previous collection, 0..1. */
    EVENTLOOP_UTILIZATION: 'nodejs.eventloop.utilization',
    /** Counter (s): time the event loop spent in each `nodejs.eventloop.state`. */
    EVENTLOOP_TIME: 'nodejs.eventloop.time',
    /** Histogram (s): one garbage collection pause, by `v8js.gc.type`. */
    GC_DURATION: 'v8js.gc.duration',
    /** UpDownCounter (By): heap memory in use, by `v8js.heap.space.name`. */
    HEAP_USED: 'v8js.memory.heap.used',
    /** UpDownCounter (By): heap memory reserved for a space (replaces `v8js.memory.heap.limit`). */
    HEAP_SPACE_SIZE: 'v8js.memory.heap.space.size',
    /** UpDownCounter (By): resident set size of the process. */
    PROCESS_MEMORY_USAGE: 'process.memory.usage',
    /** Counter (s): CPU time of the process, by `cpu.mode`. */
    PROCESS_CPU_TIME: 'process.cpu.time',
    /** Gauge (s): time since the process started. */
    PROCESS_UPTIME: 'process.uptime',
  },
  queue: {
    /** The BullMQ queue of audit records (default of `audit.queue`). */
    AUDIT: 'fleet-audit',
  },
} as const;

/** Span names (see {@link FLEET_NAMES}). */
export const SPAN = FLEET_NAMES.span;
/** Attribute names (see {@link FLEET_NAMES}). */
export const ATTR = FLEET_NAMES.attribute;
/** Metric names (see {@link FLEET_NAMES}). */
export const METRIC = FLEET_NAMES.metric;
/** Node.js runtime and process metric names (see {@link FLEET_NAMES}). */
export const RUNTIME_METRIC = FLEET_NAMES.runtimeMetric;
/** Queue names (see {@link FLEET_NAMES}). */
export const QUEUE = FLEET_NAMES.queue;

/** An attribute name from the table. */
export type FleetAttributeName = (typeof ATTR)[keyof typeof ATTR];
/** A metric name from the table. */
export type FleetMetricName = (typeof METRIC)[keyof typeof METRIC];

/**
 * The span name of an MCP request, after the MCP semantic conventions: `{method} {target}`
 * when the request names a tool, prompt or resource, else just the method.
 */
export function mcpSpanName(method: string, target?: string): string {
  return target ? `${method} ${target}` : method;
}

/** The span name of one interceptor invocation: `interceptor/invoke {name}`. */
export function interceptorInvokeSpanName(interceptor: string): string {
  return `${SPAN.INTERCEPTOR_INVOKE} ${interceptor}`;
}

/**
 * The span name of one stage of a chain phase: `fleet.chain {phase} {stage}`, e.g.
 * `fleet.chain request validators`.
 */
export function chainStageSpanName(
  phase: 'request' | 'response',
  stage: 'validators' | 'mutators',
): string {
  return `${SPAN.CHAIN_STAGE} ${phase} ${stage}`;
}
