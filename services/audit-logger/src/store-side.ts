/**
 * The store side of the audit pipeline, started the same way by the audit-logger (unless
 * AUDIT_WORKER=false) and by the standalone audit-worker: the audit store, the worker that
 * drains the queue into it (PII scrubbed on the way) and the retention schedule.
 */
import {
  type AuditRetention,
  type AuditStore,
  type AuditWorker,
  createAuditWorker,
  openAuditStore,
  startAuditRetention,
} from '@fleet/audit';
import type { AuditWorkerConfig } from './config.ts';
import { auditLoggerOf, type Logger } from './logger.ts';
import { createPiiScrubber } from './scrubber.ts';

/** The settings both processes read (the audit-logger's config has them all too). */
export type StoreConfig = Pick<
  AuditWorkerConfig,
  'DATABASE_URL' | 'AUDIT_PGLITE_DIR' | 'AUDIT_DB_SCHEMA'
>;
export type DrainConfig = Pick<
  AuditWorkerConfig,
  | 'REDIS_URL'
  | 'AUDIT_QUEUE'
  | 'AUDIT_PREFIX'
  | 'AUDIT_RETENTION_DAYS'
  | 'AUDIT_BATCH_SIZE'
  | 'AUDIT_WORKER_CONCURRENCY'
>;

/** Open the audit store (PostgreSQL when DATABASE_URL is set, else PGlite) and log which. */
export async function openStore(config: StoreConfig, log: Logger): Promise<AuditStore> {
  const store = await openAuditStore({
    databaseUrl: config.DATABASE_URL,
    pgliteDir: config.AUDIT_PGLITE_DIR,
    schema: config.AUDIT_DB_SCHEMA,
    logger: auditLoggerOf(log),
  });
  log.info({ engine: store.engine }, 'audit store open');
  return store;
}

/** The running worker and retention schedule. */
export interface Drain {
  worker: AuditWorker;
  retention: AuditRetention;
  /** Stop the schedule, then let the worker store its current batch. */
  close(): Promise<void>;
}

/** Start draining the audit queue into `store`, with the retention schedule. */
export function startDrain(config: DrainConfig, store: AuditStore, log: Logger): Drain {
  const logger = auditLoggerOf(log);
  const prefix = config.AUDIT_PREFIX ? { prefix: config.AUDIT_PREFIX } : {};
  const worker = createAuditWorker({
    connection: config.REDIS_URL,
    queue: config.AUDIT_QUEUE,
    ...prefix,
    store,
    scrub: createPiiScrubber(),
    logger,
    ...(config.AUDIT_BATCH_SIZE ? { batchSize: config.AUDIT_BATCH_SIZE } : {}),
    ...(config.AUDIT_WORKER_CONCURRENCY ? { concurrency: config.AUDIT_WORKER_CONCURRENCY } : {}),
  });
  const retention = startAuditRetention({
    connection: config.REDIS_URL,
    queue: `${config.AUDIT_QUEUE}-retention`,
    ...prefix,
    store,
    retentionDays: config.AUDIT_RETENTION_DAYS,
    logger,
  });
  return {
    worker,
    retention,
    async close() {
      await retention.close();
      await worker.close();
    },
  };
}
