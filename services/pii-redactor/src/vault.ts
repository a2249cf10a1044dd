/**
 * The token vault behind reversible tokenization: a token stands for one value within one
 * scope (a principal, and a session when there is one) and is kept in Redis with a TTL.
 * Values are encrypted at rest (AES-256-GCM, key derived from the service's secret) and
 * keys are HMACs of scope and token, so Redis never holds raw PII or a token → value map
 * that another principal could use.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

const ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/**
 * Most live tokens one scope (principal, and session when there is one) holds in the vault.
 * Every distinct tokenized value is a Redis key for the TTL: without a cap one result of
 * unique e-mail addresses (100,000 in 1.2 MB) left 100,000 keys, +27 MB of Redis, for an hour,
 * and each further such request as much again. 10,000 entries take about 4 MB with their index.
 */
export const MAX_VAULT_ENTRIES_PER_SCOPE = 10_000;

/**
 * Stores a scope's entries only when its live entries, those it already holds included, stay
 * within the cap. KEYS[1] is the scope's index (a sorted set of the entries' 40-hex MACs by
 * expiry, trimmed here with Redis's own clock), KEYS[2..] the entries; ARGV: ttl (s), cap, then the values.
 * Returns {1, live} when stored, {0, live} when the cap refused it (nothing stored).
 */
const STORE_SCRIPT = `
local ttl = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = KEYS[1]
redis.call('ZREMRANGEBYSCORE', index, '-inf', now)
local live = redis.call('ZCARD', index)
local fresh = 0
for i = 2, #KEYS do
  if not redis.call('ZSCORE', index, string.sub(KEYS[i], -40)) then fresh = fresh + 1 end
end
if live + fresh > cap then return {0, live} end
local expiry = now + ttl * 1000
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i + 1], 'EX', ttl)
  redis.call('ZADD', index, expiry, string.sub(KEYS[i], -40))
end
redis.call('EXPIRE', index, ttl)
return {1, live + fresh}
`;

/** Whose tokens these are. */
export interface VaultScope {
  principal: string;
  session?: string | undefined;
}

/** Options for {@link RedisTokenVault}. */
export interface TokenVaultOptions {
  /** The service secret (PII_HMAC_KEY); encryption and key derivation both come from it. */
  secret: string;
  /** How long a token can be restored. Default 3600 s. */
  ttlSeconds?: number;
  /** Redis key prefix. Default `fleet:pii:vault`. */
  prefix?: string;
  /** Most live tokens per scope. Default {@link MAX_VAULT_ENTRIES_PER_SCOPE}. */
  maxEntriesPerScope?: number;
}

/**
 * The vault could not be read or written (Redis down or not answering). Its message is what
 * the caller and the audit trail see as the interceptor's failure `reason`: it names the
 * vault, never Redis's address or the client library's wording (the `cause` keeps that).
 */
export class VaultUnavailableError extends Error {
  override readonly name = 'VaultUnavailableError';

  constructor(operation: 'store' | 'restore', cause: unknown) {
    super(
      operation === 'store'
        ? 'token vault unavailable: tokens could not be stored, so no tokenized value is released'
        : 'token vault unavailable: tokens could not be restored',
      { cause },
    );
  }
}

/**
 * Storing would leave a scope with more live tokens than the vault lets one scope hold: the
 * payload carries more distinct tokenized values than the caller may keep. Nothing is stored.
 */
export class VaultFullError extends Error {
  override readonly name = 'VaultFullError';
  readonly limit = 'vaultEntriesPerScope';

  constructor(
    readonly max: number,
    readonly adding: number,
    readonly live?: number,
  ) {
    super(
      `vaultEntriesPerScope: a caller (principal, and session when there is one) holds at most ${max} tokens at once; this payload has ${adding} distinct tokenized values${live === undefined ? '' : ` and ${live} are held`}`,
    );
  }
}

/** Stores and restores tokenized values. */
export class RedisTokenVault {
  readonly #redis: Redis;
  readonly #ttl: number;
  readonly #prefix: string;
  readonly #macKey: Buffer;
  readonly #encKey: Buffer;
  readonly #max: number;
  #sha: string | undefined;

  constructor(redis: Redis, options: TokenVaultOptions) {
    this.#redis = redis;
    this.#ttl = options.ttlSeconds ?? 3600;
    this.#prefix = options.prefix ?? 'fleet:pii:vault';
    this.#max = options.maxEntriesPerScope ?? MAX_VAULT_ENTRIES_PER_SCOPE;
    this.#macKey = Buffer.from(hkdfSync('sha256', options.secret, 'fleet-pii-vault', 'mac', 32));
    this.#encKey = Buffer.from(hkdfSync('sha256', options.secret, 'fleet-pii-vault', 'enc', 32));
  }

  #scopeId(scope: VaultScope): string {
    return createHmac('sha256', this.#macKey)
      .update(`${scope.principal}\u0000${scope.session ?? ''}`)
      .digest('hex')
      .slice(0, 32);
  }

  #key(scope: VaultScope, token: string): string {
    const mac = createHmac('sha256', this.#macKey)
      .update(`${this.#scopeId(scope)}\u0000${token}`)
      .digest('hex')
      .slice(0, 40);
    return `${this.#prefix}:${mac}`;
  }

  /**
   * The token id (12 characters of `[0-9a-z]`) for `value` in `scope`: deterministic, so the
   * same value gets the same token within a scope (a model sees consistent placeholders)
   * and different scopes get unrelated ids.
   */
  tokenIdFor(type: string, value: string, scope: VaultScope): string {
    const digest = createHmac('sha256', this.#macKey)
      .update(`${this.#scopeId(scope)}\u0000${type}\u0000${value}`)
      .digest();
    let id = '';
    for (let i = 0; id.length < 12; i++) id += ID_ALPHABET[(digest[i] ?? 0) % 36];
    return id;
  }

  #seal(value: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#encKey, iv);
    const data = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64');
  }

  #open(sealed: string): string | undefined {
    try {
      const raw = Buffer.from(sealed, 'base64');
      const decipher = createDecipheriv('aes-256-gcm', this.#encKey, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }

  /**
   * Store `entries` (token → value) for `scope`, refreshing their TTL, all or none: one script
   * that also keeps the scope within its cap.
   * @throws VaultFullError when the scope would hold more than its cap of live tokens.
   * @throws VaultUnavailableError when Redis cannot be reached.
   */
  async store(entries: ReadonlyMap<string, string>, scope: VaultScope): Promise<void> {
    if (entries.size === 0) return;
    if (entries.size > this.#max) throw new VaultFullError(this.#max, entries.size);
    const keys = [`${this.#prefix}:scope:${this.#scopeId(scope)}`];
    const args = [String(this.#ttl), String(this.#max)];
    for (const [token, value] of entries) {
      keys.push(this.#key(scope, token));
      args.push(this.#seal(value));
    }
    let result: unknown;
    try {
      this.#sha ??= (await this.#redis.script('LOAD', STORE_SCRIPT)) as string;
      result = await this.#redis.evalsha(this.#sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!String((error as Error).message).includes('NOSCRIPT'))
        throw new VaultUnavailableError('store', error);
      this.#sha = undefined;
      result = await this.#redis
        .eval(STORE_SCRIPT, keys.length, ...keys, ...args)
        .catch((cause: unknown) => {
          throw new VaultUnavailableError('store', cause);
        });
    }
    const [stored, live] = result as [number, number];
    if (stored !== 1) throw new VaultFullError(this.#max, entries.size, live);
  }

  /** The values of `tokens` that belong to `scope` (tokens of other scopes are absent). */
  async restore(tokens: readonly string[], scope: VaultScope): Promise<Map<string, string>> {
    const unique = [...new Set(tokens)];
    const found = new Map<string, string>();
    if (unique.length === 0) return found;
    const sealed = await this.#redis
      .mget(...unique.map((t) => this.#key(scope, t)))
      .catch((error: unknown) => {
        throw new VaultUnavailableError('restore', error);
      });
    unique.forEach((token, i) => {
      const s = sealed[i];
      const value = s ? this.#open(s) : undefined;
      if (value !== undefined) found.set(token, value);
    });
    return found;
  }
}
