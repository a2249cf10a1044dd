/** Pins the public surface: a change here is a change of the package's contract. */
import { expect, it } from 'vitest';
import * as api from './index.ts';
import * as testing from './testing/index.ts';

it('exports exactly the curated runtime names', () => {
  expect(Object.keys(api).sort()).toEqual([
    'ATTR',
    'DEFAULT_OTLP_TRACES_URL',
    'DURATION_BUCKETS_MS',
    'FLEET_NAMES',
    'GC_DURATION_BUCKETS_S',
    'METRIC',
    'QUEUE',
    'RUNTIME_METRIC',
    'SPAN',
    'chainStageSpanName',
    'createFleetMetrics',
    'currentTraceIds',
    'extractTraceContext',
    'injectTraceHeaders',
    'interceptorInvokeSpanName',
    'mcpSpanName',
    'recordSpanError',
    'safeSetAttributes',
    'startTelemetry',
    'telemetryOptionsFromEnv',
    'withSpan',
  ]);
  expect(Object.keys(testing).sort()).toEqual(['startOtlpReceiver']);
});
