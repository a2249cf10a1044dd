/**
 * The worker's payload scrubber: the PII engine (`@fleet/pii`) with every entity type
 * detected and redacted, so no payload preview, abort reason or validator message reaches
 * the store with a raw value in it.
 */
import type { PayloadScrubber } from '@fleet/audit';
import { createTextRedactor } from '@fleet/pii';

/** A scrubber that redacts every PII and secret type `@fleet/pii` detects. */
export function createPiiScrubber(): PayloadScrubber {
  return createTextRedactor();
}
