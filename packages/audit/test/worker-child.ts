/**
 * An audit worker in a child process, for the crash test: it consumes like the real one but
 * stops dead at one point of its first batch and says so on stdout, so the parent can
 * SIGKILL it there.
 *
 * Env: REDIS_URL, QUEUE, PREFIX, DATABASE_URL, SCHEMA, BATCH_SIZE, FREEZE (`beforeInsert`:
 * jobs taken, nothing committed | `afterInsert`: batch committed, jobs not acknowledged).
 */
import { createAuditWorker, openAuditStore } from '../src/index.ts';

const env = process.env;
const freeze = env.FREEZE === 'afterInsert' ? 'afterInsert' : 'beforeInsert';
const store = await openAuditStore({ databaseUrl: env.DATABASE_URL, schema: env.SCHEMA });
const hang = (records: readonly unknown[]): Promise<never> => {
  process.stdout.write(`${JSON.stringify({ frozen: freeze, records: records.length })}\n`);
  return new Promise<never>(() => undefined);
};
createAuditWorker({
  store,
  connection: env.REDIS_URL,
  ...(env.QUEUE ? { queue: env.QUEUE } : {}),
  ...(env.PREFIX ? { prefix: env.PREFIX } : {}),
  batchSize: Number(env.BATCH_SIZE ?? 10),
  flushIntervalMs: 20,
  // Short locks: the parent's worker takes over soon after the kill.
  lockDurationMs: 1000,
  stalledIntervalMs: 500,
  hooks:
    freeze === 'beforeInsert'
      ? { beforeInsert: (records) => hang(records) }
      : { afterInsert: (records) => hang(records) },
});
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
