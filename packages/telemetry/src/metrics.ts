/**
 * The fleet's metric instruments. Built on the `@opentelemetry/api` meter only, so a library
 * can create them from the global meter; with no SDK registered they are no-ops.
 */
import type { Attributes, Counter, Histogram, Meter } from '@opentelemetry/api';
import { ATTR, METRIC } from './names.ts';
import type { FleetMetrics } from './types.ts';

/**
 * Histogram bucket boundaries in milliseconds, from sub-millisecond (an in-process validator)
 * to the 30 s default backend timeout.
 */
export const DURATION_BUCKETS_MS: readonly number[] = [
  0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
];

function attributes(entries: Record<string, string | undefined>): Attributes {
  // for...in, not Object.entries: this runs several times per gateway request.
  const result: Attributes = {};
  for (const key in entries) {
    const value = entries[key];
    if (value !== undefined) result[key] = value;
  }
  return result;
}

function histogram(meter: Meter, name: string, description: string): Histogram {
  return meter.createHistogram(name, {
    description,
    unit: 'ms',
    advice: { explicitBucketBoundaries: [...DURATION_BUCKETS_MS] },
  });
}

/** Run a recording; telemetry never breaks the caller. */
function guarded(record: () => void): void {
  try {
    record();
  } catch {
    // A broken meter must not fail the request that is being measured.
  }
}

/** Create the fleet's instruments (names from {@link METRIC}) on `meter`. */
export function createFleetMetrics(meter: Meter): FleetMetrics {
  const request = histogram(
    meter,
    METRIC.REQUEST_DURATION,
    'Duration of MCP requests at the gateway',
  );
  const chain = histogram(meter, METRIC.CHAIN_DURATION, 'Duration of one interceptor chain phase');
  const interceptor = histogram(
    meter,
    METRIC.INTERCEPTOR_DURATION,
    'Duration of one interceptor invocation',
  );
  const backend = histogram(meter, METRIC.BACKEND_DURATION, 'Duration of calls to MCP backends');
  const aborts: Counter = meter.createCounter(METRIC.CHAIN_ABORTS, {
    description: 'Interceptor chains that aborted',
  });
  const rejections: Counter = meter.createCounter(METRIC.INGRESS_REJECTIONS, {
    description: 'Requests the MCP ingress refused before serving them',
    unit: '{request}',
  });
  const refusals: Counter = meter.createCounter(METRIC.BACKEND_REFUSALS, {
    description: 'Backend calls the gateway refused without sending them',
    unit: '{call}',
  });

  return {
    recordRequest: (durationMs, a) =>
      guarded(() =>
        request.record(
          durationMs,
          attributes({
            [ATTR.MCP_METHOD_NAME]: a.method,
            [ATTR.FLEET_REQUEST_STATUS]: a.status,
            [ATTR.ERROR_TYPE]: a.errorType,
          }),
        ),
      ),
    recordChain: (durationMs, a) =>
      guarded(() =>
        chain.record(
          durationMs,
          attributes({
            [ATTR.FLEET_CHAIN_EVENT]: a.event,
            [ATTR.FLEET_CHAIN_PHASE]: a.phase,
            [ATTR.FLEET_CHAIN_STATUS]: a.status,
          }),
        ),
      ),
    recordInterceptor: (durationMs, a) =>
      guarded(() =>
        interceptor.record(
          durationMs,
          attributes({
            [ATTR.FLEET_INTERCEPTOR_NAME]: a.interceptor,
            [ATTR.FLEET_INTERCEPTOR_OUTCOME]: a.outcome,
            [ATTR.FLEET_INTERCEPTOR_SERVICE]: a.service,
            [ATTR.FLEET_INTERCEPTOR_TYPE]: a.type,
            [ATTR.FLEET_INTERCEPTOR_MODE]: a.mode,
            [ATTR.FLEET_CHAIN_PHASE]: a.phase,
          }),
        ),
      ),
    countAbort: (a) =>
      guarded(() =>
        aborts.add(
          1,
          attributes({
            [ATTR.FLEET_CHAIN_ABORT_TYPE]: a.type,
            [ATTR.FLEET_INTERCEPTOR_NAME]: a.interceptor,
            [ATTR.FLEET_INTERCEPTOR_OUTCOME]: a.outcome,
            [ATTR.FLEET_CHAIN_PHASE]: a.phase,
          }),
        ),
      ),
    countRejection: (kind) =>
      guarded(() => rejections.add(1, { [ATTR.FLEET_REJECTION_KIND]: kind })),
    countBackendRefusal: (backend, reason, origin) =>
      guarded(() =>
        refusals.add(1, {
          [ATTR.FLEET_BACKEND_ID]: backend,
          [ATTR.FLEET_REFUSAL_REASON]: reason,
          [ATTR.FLEET_CALL_ORIGIN]: origin,
        }),
      ),
    recordBackend: (durationMs, a) =>
      guarded(() =>
        backend.record(
          durationMs,
          attributes({
            [ATTR.FLEET_BACKEND_ID]: a.backend,
            [ATTR.MCP_METHOD_NAME]: a.method,
            [ATTR.FLEET_REQUEST_STATUS]: a.status,
            [ATTR.ERROR_TYPE]: a.errorType,
          }),
        ),
      ),
  };
}
