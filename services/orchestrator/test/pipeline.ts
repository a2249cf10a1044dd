/**
 * This process's telemetry pipeline for one test file, started before its tests and shut
 * down after them: spans exported over OTLP/HTTP to an in-test receiver (when asked for) and
 * metrics read with a real Prometheus scrape.
 */
import { createServer } from 'node:http';
import { startTelemetry, type Telemetry } from '@fleet/telemetry';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '@fleet/telemetry/testing';
import { afterAll, beforeAll } from 'vitest';
import { listenLoopback } from './harness.ts';

/** The file's pipeline; read its fields inside tests (they exist from `beforeAll` on). */
export interface TestPipeline {
  readonly receiver: OtlpReceiver;
  readonly telemetry: Telemetry;
  /** `/metrics` of the pipeline (Prometheus text). */
  scrape(): Promise<string>;
}

/** Register the file's pipeline; `traces` also starts the receiver and exports spans to it. */
export function pipelineForFile(options: { traces?: boolean } = {}): TestPipeline {
  let receiver: OtlpReceiver | undefined;
  let telemetry: Telemetry | undefined;
  beforeAll(async () => {
    if (options.traces) receiver = await startOtlpReceiver();
    telemetry = startTelemetry({
      serviceName: 'orchestrator',
      ...(receiver
        ? {
            traces: { exporters: ['otlp'], endpoint: receiver.tracesUrl, scheduledDelayMs: 20 },
          }
        : {}),
      diagnostics: false,
    });
  });
  afterAll(async () => {
    await telemetry?.shutdown();
    await receiver?.close();
  });
  const started = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is used before the file's tests start`);
    return value;
  };
  return {
    get receiver() {
      return started(receiver, 'the OTLP receiver (pipelineForFile({traces: true}))');
    },
    get telemetry() {
      return started(telemetry, 'the telemetry pipeline');
    },
    async scrape() {
      const base = await listenLoopback(createServer(this.telemetry.metricsHandler));
      return (await fetch(`${base}/metrics`)).text();
    },
  };
}

/** The orchestrator's CLIENT spans of the invocations of `interceptor`. */
export function invocationSpans(
  spans: readonly ReceivedSpan[],
  interceptor: string,
): ReceivedSpan[] {
  return spans.filter(
    (s) =>
      s.kind === 3 &&
      s.scopeName === '@fleet/orchestrator' &&
      s.attributes['fleet.interceptor.name'] === interceptor,
  );
}
