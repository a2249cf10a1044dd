/**
 * An OTLP/HTTP trace receiver for tests: a plain node HTTP server on 127.0.0.1 that accepts
 * `POST /v1/traces` with OTLP JSON bodies (what `@opentelemetry/exporter-trace-otlp-http`
 * sends; gzip accepted) and keeps the spans, flattened. Protobuf bodies are refused with 415:
 * point an `http/protobuf` exporter at a real collector instead.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';

const gunzipAsync = promisify(gunzip);

/** A span attribute value as received. */
export type ReceivedAttributeValue =
  | string
  | number
  | boolean
  | ReadonlyArray<string | number | boolean | null>
  | null;

/** One span as received, flattened out of `resourceSpans[].scopeSpans[].spans[]`. */
export interface ReceivedSpan {
  /** 32 lowercase hex digits. */
  traceId: string;
  /** 16 lowercase hex digits. */
  spanId: string;
  /** Undefined for a root span. */
  parentSpanId: string | undefined;
  name: string;
  /** OTLP span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  /** The resource's `service.name`. */
  serviceName: string | undefined;
  /** The instrumentation scope's name. */
  scopeName: string | undefined;
  attributes: Record<string, ReceivedAttributeValue>;
  resourceAttributes: Record<string, ReceivedAttributeValue>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string };
  events: Array<{ name: string; attributes: Record<string, ReceivedAttributeValue> }>;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
}

/** One export request as received. */
export interface ReceivedRequest {
  headers: IncomingHttpHeaders;
  spanCount: number;
}

/** A running receiver. */
export interface OtlpReceiver extends AsyncDisposable {
  /** Base URL (`http://127.0.0.1:<port>`), for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly url: string;
  /** The traces URL (`<url>/v1/traces`), for `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`. */
  readonly tracesUrl: string;
  /** Every span received so far, in arrival order. */
  spans(): ReceivedSpan[];
  /** Every export request received so far. */
  requests(): ReceivedRequest[];
  /**
   * Resolve with all spans once `predicate` holds for them; reject after `timeoutMs`
   * (default 5000) with the names of what did arrive.
   */
  waitFor(
    predicate: (spans: readonly ReceivedSpan[]) => boolean,
    timeoutMs?: number,
  ): Promise<ReceivedSpan[]>;
  /** Forget what was received. */
  clear(): void;
  /** Stop listening and drop open connections. */
  close(): Promise<void>;
}

interface OtlpKeyValue {
  key?: string;
  value?: OtlpAnyValue;
}
interface OtlpAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number | string;
  bytesValue?: string;
  arrayValue?: { values?: OtlpAnyValue[] };
  kvlistValue?: { values?: OtlpKeyValue[] };
}
interface OtlpSpan {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
  name?: string;
  kind?: number;
  startTimeUnixNano?: string | number;
  endTimeUnixNano?: string | number;
  attributes?: OtlpKeyValue[];
  status?: { code?: number; message?: string };
  events?: Array<{ name?: string; attributes?: OtlpKeyValue[] }>;
}
interface OtlpTraceRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: Array<{ scope?: { name?: string }; spans?: OtlpSpan[] }>;
  }>;
}

function scalar(value: OtlpAnyValue | undefined): ReceivedAttributeValue {
  if (!value) return null;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  // OTLP JSON may carry int64 as a string.
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return Number(value.doubleValue);
  if (value.bytesValue !== undefined) return value.bytesValue;
  if (value.arrayValue)
    return (value.arrayValue.values ?? []).map((item) => {
      const converted = scalar(item);
      return typeof converted === 'object' && converted !== null
        ? JSON.stringify(converted)
        : converted;
    });
  if (value.kvlistValue) return JSON.stringify(attributesOf(value.kvlistValue.values));
  return null;
}

function attributesOf(list: OtlpKeyValue[] | undefined): Record<string, ReceivedAttributeValue> {
  const result: Record<string, ReceivedAttributeValue> = {};
  for (const entry of list ?? []) if (entry.key) result[entry.key] = scalar(entry.value);
  return result;
}

/** OTLP JSON ids are hex; some encoders send base64. Normalise both to lowercase hex. */
function hexId(value: string | undefined, bytes: number): string | undefined {
  if (!value) return undefined;
  if (value.length === bytes * 2 && /^[0-9a-f]+$/i.test(value)) {
    const hex = value.toLowerCase();
    return /^0+$/.test(hex) ? undefined : hex;
  }
  const decoded = Buffer.from(value, 'base64');
  if (decoded.length !== bytes) return value;
  const hex = decoded.toString('hex');
  return /^0+$/.test(hex) ? undefined : hex;
}

function flatten(body: OtlpTraceRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of body.resourceSpans ?? []) {
    const resourceAttributes = attributesOf(resourceSpans.resource?.attributes);
    const serviceName = resourceAttributes['service.name'];
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        const status: ReceivedSpan['status'] = { code: span.status?.code ?? 0 };
        if (span.status?.message) status.message = span.status.message;
        spans.push({
          traceId: hexId(span.traceId, 16) ?? '',
          spanId: hexId(span.spanId, 8) ?? '',
          parentSpanId: hexId(span.parentSpanId, 8),
          name: span.name ?? '',
          kind: span.kind ?? 0,
          serviceName: typeof serviceName === 'string' ? serviceName : undefined,
          scopeName: scopeSpans.scope?.name,
          attributes: attributesOf(span.attributes),
          resourceAttributes,
          status,
          events: (span.events ?? []).map((event) => ({
            name: event.name ?? '',
            attributes: attributesOf(event.attributes),
          })),
          startTimeUnixNano: String(span.startTimeUnixNano ?? '0'),
          endTimeUnixNano: String(span.endTimeUnixNano ?? '0'),
        });
      }
    }
  }
  return spans;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers['content-encoding'] === 'gzip' ? gunzipAsync(raw) : raw;
}

/** Start a receiver on 127.0.0.1 and a free port. Close it (or `await using` it) after the test. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  let received: ReceivedSpan[] = [];
  let requests: ReceivedRequest[] = [];
  const listeners = new Set<() => void>();

  const server = createServer((req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'POST' || path !== '/v1/traces') {
      reply(404, { error: `only POST /v1/traces is served (got ${req.method} ${path})` });
      return;
    }
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim();
    if (contentType !== 'application/json') {
      req.resume();
      reply(415, { error: `only application/json is accepted (got ${contentType || 'none'})` });
      return;
    }
    readBody(req).then(
      (body) => {
        let spans: ReceivedSpan[];
        try {
          spans = flatten(JSON.parse(body.toString('utf8')) as OtlpTraceRequest);
        } catch (error) {
          reply(400, { error: `malformed OTLP JSON: ${String(error)}` });
          return;
        }
        received = [...received, ...spans];
        requests = [...requests, { headers: req.headers, spanCount: spans.length }];
        reply(200, {});
        for (const listener of [...listeners]) listener();
      },
      (error: unknown) => reply(400, { error: `unreadable body: ${String(error)}` }),
    );
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });

  return {
    url,
    tracesUrl: `${url}/v1/traces`,
    spans: () => [...received],
    requests: () => [...requests],
    clear: () => {
      received = [];
      requests = [];
    },
    waitFor: (predicate, timeoutMs = 5000) =>
      new Promise<ReceivedSpan[]>((resolve, reject) => {
        const check = () => {
          if (!predicate(received)) return;
          done();
          resolve([...received]);
        };
        const timer = setTimeout(() => {
          done();
          const names = received.map((span) => span.name).join(', ') || 'none';
          reject(
            new Error(`OTLP receiver: condition not met within ${timeoutMs} ms (spans: ${names})`),
          );
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      }),
    close,
    [Symbol.asyncDispose]: close,
  };
}
