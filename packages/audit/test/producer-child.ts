/**
 * An audit producer in a child process, for the crash tests: it enqueues COUNT records that
 * wait in memory (a flush interval of a minute), prints their ids on stdout and waits to be
 * SIGKILLed.
 *
 * Env: REDIS_URL, PREFIX, JOURNAL, COUNT, WRITE_AHEAD (`1` on).
 */
import { createAuditProducer, createAuditRecord } from '../src/index.ts';

const env = process.env;
const producer = createAuditProducer({
  connection: env.REDIS_URL,
  prefix: env.PREFIX,
  journalPath: env.JOURNAL,
  writeAhead: env.WRITE_AHEAD === '1',
  flushIntervalMs: 60_000,
});
// Not helpers.ts's makeRecords: the helpers load vitest, which runs only under vitest.
const records = Array.from({ length: Number(env.COUNT ?? 10) }, (_, i) =>
  createAuditRecord({
    kind: 'chain',
    event: 'tools/call',
    phase: 'request',
    method: 'tools/call',
    target: `tool-${i}`,
    decision: 'allowed',
    status: 'success',
    durationMs: 1,
  }),
);
for (const record of records) producer.enqueue(record);
process.stdout.write(
  `${JSON.stringify({ enqueued: records.map((r) => r.id), metrics: producer.metrics() })}\n`,
);
setInterval(() => undefined, 60_000);
