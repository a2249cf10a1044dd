/**
 * An audit producer in a child process, for the crash tests: it enqueues COUNT records that
 * wait in memory (a flush interval of a minute, and a REDIS_URL the test makes unreachable),
 * prints their ids on stdout and waits to be SIGKILLed.
 *
 * Env: REDIS_URL, PREFIX, JOURNAL, COUNT, WRITE_AHEAD (`1` on).
 */
import { createAuditProducer } from '../src/index.ts';
import { makeRecords } from './records.ts';

const env = process.env;
const producer = createAuditProducer({
  connection: env.REDIS_URL,
  prefix: env.PREFIX,
  journalPath: env.JOURNAL,
  writeAhead: env.WRITE_AHEAD === '1',
  flushIntervalMs: 60_000,
});
const records = makeRecords(Number(env.COUNT ?? 10));
for (const record of records) producer.enqueue(record);
process.stdout.write(
  `${JSON.stringify({ enqueued: records.map((r) => r.id), metrics: producer.metrics() })}\n`,
);
setInterval(() => undefined, 60_000);
