/** whenConnected against real ioredis clients: a live Redis, and a port nothing answers on. */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { whenConnected } from '../src/index.ts';

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

describe('whenConnected', () => {
  it('resolves true once the client is ready, and at once when it already is', async () => {
    const redis = new Redis(REDIS_URL, { enableOfflineQueue: false });
    try {
      expect(redis.status).not.toBe('ready');
      expect(await whenConnected(redis, 5_000)).toBe(true);
      expect(redis.status).toBe('ready');
      expect(await whenConnected(redis, 0)).toBe(true);
    } finally {
      redis.disconnect();
    }
  });

  it('resolves false after the timeout when nothing answers, and leaves no listener behind', async () => {
    const redis = new Redis('redis://127.0.0.1:9', {
      enableOfflineQueue: false,
      retryStrategy: () => 50,
    });
    redis.on('error', () => undefined);
    try {
      expect(await whenConnected(redis, 200)).toBe(false);
      expect(redis.listenerCount('ready')).toBe(0);
    } finally {
      redis.disconnect();
    }
  });
});
