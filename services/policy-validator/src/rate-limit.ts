/**
 * Sliding-window rate limits in Redis, shared by every replica: one sorted set per key,
 * trimmed, counted and extended in a single Lua script that reads Redis's own clock, so the
 * check is atomic and replicas with skewed clocks agree. The set is named by a SHA-256 of
 * the key, so no argument value (PII included) reaches Redis and key names stay short.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

const SCRIPT = `
local key = KEYS[1]
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local member = ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
if count >= limit then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local retry = window
  if oldest[2] then retry = tonumber(oldest[2]) + window - now end
  return {0, count, retry}
end
redis.call('ZADD', key, now, member)
redis.call('PEXPIRE', key, window)
return {1, count + 1, 0}
`;

/** The outcome of one hit. */
export interface RateLimitDecision {
  allowed: boolean;
  /** Hits in the window, this one included when allowed. */
  count: number;
  /** When refused: milliseconds until a slot frees up. */
  retryAfterMs: number;
}

/** Counts hits per key in Redis. */
export class RedisRateLimiter {
  readonly #redis: Redis;
  readonly #prefix: string;
  #sha: string | undefined;

  constructor(redis: Redis, prefix = 'fleet:ratelimit') {
    this.#redis = redis;
    this.#prefix = prefix;
  }

  /**
   * Record one hit of `key` against `limit` per `windowMs`. A refused hit is not counted.
   * The Redis key is `<prefix>:<ruleId>:<sha256 hex of key>`.
   * @throws when Redis cannot be reached (the caller applies the rule's failOpen).
   */
  async hit(
    ruleId: string,
    key: string,
    limit: number,
    windowMs: number,
  ): Promise<RateLimitDecision> {
    const redisKey = `${this.#prefix}:${ruleId}:${createHash('sha256').update(key).digest('hex')}`;
    const args = [String(windowMs), String(limit), randomUUID()];
    let result: unknown;
    try {
      this.#sha ??= (await this.#redis.script('LOAD', SCRIPT)) as string;
      result = await this.#redis.evalsha(this.#sha, 1, redisKey, ...args);
    } catch (error) {
      if (!String((error as Error).message).includes('NOSCRIPT')) throw error;
      this.#sha = undefined;
      result = await this.#redis.eval(SCRIPT, 1, redisKey, ...args);
    }
    const [allowed, count, retry] = result as [number, number, number];
    return { allowed: allowed === 1, count, retryAfterMs: Math.max(0, retry) };
  }
}
