/** Redis for the service tests: an unreachable one. */
import { Redis } from 'ioredis';

/**
 * A client of a port nothing listens on that fails every command at once (no offline queue,
 * no retries): a Redis outage. Disconnect it after the test.
 */
export function unreachableRedis(): Redis {
  const dead = new Redis({
    host: '127.0.0.1',
    port: 9,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  dead.on('error', () => undefined);
  return dead;
}
