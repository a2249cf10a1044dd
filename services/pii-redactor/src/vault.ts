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
 * Most live tokens one principal with an id holds over all its sessions: each session is a
 * scope of its own, so without it one principal opening sessions held 4 MB of Redis per
 * session. Principals without an id (anonymous) are told apart by session only.
 */
export const MAX_VAULT_ENTRIES_PER_PRINCIPAL = 50_000;

/**
 * Stores entries only when every index given, with the entries it already holds, stays within
 * its cap. KEYS[1..n] are the indexes (sorted sets of the entries' 40-hex MACs by expiry,
 * trimmed here with Redis's own clock, expiring with their last entry), KEYS[n+1..] the
 * entries; ARGV: ttl (s), n, the n caps, then the entries' values. Returns {1} when stored,
 * {0, j, live} when index j's cap refused it (nothing stored).
 */
const STORE_SCRIPT = `
local ttl = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for j = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[j], '-inf', now)
  local live = redis.call('ZCARD', KEYS[j])
  local fresh = 0
  for i = n + 1, #KEYS do
    if not redis.call('ZSCORE', KEYS[j], string.sub(KEYS[i], -40)) then fresh = fresh + 1 end
  end
  if live + fresh > tonumber(ARGV[2 + j]) then return {0, j, live} end
end
local expiry = now + ttl * 1000
for i = n + 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[2 + i], 'EX', ttl)
  for j = 1, n do redis.call('ZADD', KEYS[j], expiry, string.sub(KEYS[i], -40)) end
end
for j = 1, n do redis.call('EXPIRE', KEYS[j], ttl) end
return {1}
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
  /** Most live tokens per principal id. Default {@link MAX_VAULT_ENTRIES_PER_PRINCIPAL}. */
  maxEntriesPerPrincipal?: number;
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
 * Storing would leave a scope, or a principal over its sessions, with more live tokens than
 * the vault lets it hold: the payload carries more distinct tokenized values than the caller
 * may keep. Nothing is stored.
 */
export class VaultFullError extends Error {
  override readonly name = 'VaultFullError';

  constructor(
    readonly limit: 'vaultEntriesPerScope' | 'vaultEntriesPerPrincipal',
    readonly max: number,
    readonly adding: number,
    readonly live?: number,
  ) {
    super(
      `${limit}: ${limit === 'vaultEntriesPerScope' ? 'a caller (principal, and session when there is one)' : 'a principal, over all its sessions,'} holds at most ${max} tokens at once; this payload has ${adding} distinct tokenized values${live === undefined ? '' : ` and ${live} are held`}`,
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
  readonly #maxPerPrincipal: number;
  #sha: string | undefined;

  constructor(redis: Redis, options: TokenVaultOptions) {
    this.#redis = redis;
    this.#ttl = options.ttlSeconds ?? 3600;
    this.#prefix = options.prefix ?? 'fleet:pii:vault';
    this.#max = options.maxEntriesPerScope ?? MAX_VAULT_ENTRIES_PER_SCOPE;
    this.#maxPerPrincipal = options.maxEntriesPerPrincipal ?? MAX_VAULT_ENTRIES_PER_PRINCIPAL;
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
   * @throws VaultFullError when the scope, or its principal over all its sessions, would hold
   * more than its cap of live tokens.
   * @throws VaultUnavailableError when Redis cannot be reached.
   */
  async store(entries: ReadonlyMap<string, string>, scope: VaultScope): Promise<void> {
    if (entries.size === 0) return;
    const limits: Array<[VaultFullError['limit'], number, string]> = [
      ['vaultEntriesPerScope', this.#max, `${this.#prefix}:scope:${this.#scopeId(scope)}`],
    ];
    // A session's scope is one of its principal's; one without an id is told apart by session.
    if (scope.session !== undefined && !scope.principal.endsWith(':'))
      limits.push([
        'vaultEntriesPerPrincipal',
        this.#maxPerPrincipal,
        `${this.#prefix}:principal:${this.#scopeId({ principal: scope.principal })}`,
      ]);
    for (const [limit, max] of limits)
      if (entries.size > max) throw new VaultFullError(limit, max, entries.size);
    const keys = limits.map(([, , index]) => index);
    const args = [
      String(this.#ttl),
      String(limits.length),
      ...limits.map(([, max]) => String(max)),
    ];
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
    const [stored, index, live] = result as [number, number?, number?];
    const refused = stored === 1 ? undefined : limits[(index ?? 1) - 1];
    if (refused) throw new VaultFullError(refused[0], refused[1], entries.size, live);
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
