/**
 * @fleet/telemetry/testing: an in-test OTLP/HTTP receiver, so tests assert on the spans a
 * real exporter sends.
 */

export type {
  OtlpReceiver,
  ReceivedAttributeValue,
  ReceivedRequest,
  ReceivedSpan,
} from './otlp-receiver.ts';
export { startOtlpReceiver } from './otlp-receiver.ts';
