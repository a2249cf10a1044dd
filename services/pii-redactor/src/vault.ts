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

/** Stores and restores tokenized values. */
export class RedisTokenVault {
  readonly #redis: Redis;
  readonly #ttl: number;
  readonly #prefix: string;
  readonly #macKey: Buffer;
  readonly #encKey: Buffer;

  constructor(redis: Redis, options: TokenVaultOptions) {
    this.#redis = redis;
    this.#ttl = options.ttlSeconds ?? 3600;
    this.#prefix = options.prefix ?? 'fleet:pii:vault';
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

  /** Store `entries` (token → value) for `scope`, refreshing their TTL. */
  async store(entries: ReadonlyMap<string, string>, scope: VaultScope): Promise<void> {
    if (entries.size === 0) return;
    const pipeline = this.#redis.pipeline();
    for (const [token, value] of entries)
      pipeline.set(this.#key(scope, token), this.#seal(value), 'EX', this.#ttl);
    const results = await pipeline.exec().catch((error: unknown) => {
      throw new VaultUnavailableError('store', error);
    });
    const failed = results?.find(([error]) => error);
    if (failed?.[0]) throw new VaultUnavailableError('store', failed[0]);
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
