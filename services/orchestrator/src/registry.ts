/**
 * The interceptor service registry: static services from the config plus runtime
 * registrations through the admin API, persisted in Redis and propagated to every replica
 * over pub/sub. Chain plans per (event, phase) are computed once per registry change.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  type ChainInterceptor,
  type ChainPlan,
  FleetError,
  type InterceptorInfo,
  type Invoker,
  JsonRpcCode,
  type Phase,
  ProtocolError,
  parseServiceOverrides,
  planChain,
  resolveService,
  type ServiceOverrides,
  WireParseError,
} from '@fleet/core';
import { createRemoteService, type RemoteService } from '@fleet/interceptor-kit';
import type { Redis } from 'ioredis';
import type { Logger } from './logger.ts';

/** Where a registration came from. */
export type ServiceSource = 'config' | 'admin';

/** A registered interceptor service as the admin API shows it. */
export interface ServiceView {
  id: string;
  url: string;
  source: ServiceSource;
  status: 'healthy' | 'unhealthy' | 'pending';
  interceptors: InterceptorInfo[];
  overrides: ServiceOverrides;
  /** Whether a bearer token is stored for the service (never the token itself). */
  hasToken: boolean;
  lastError?: string;
  registeredAt?: string;
  refreshedAt?: string;
}

/** A registration request. */
export interface Registration {
  url: string;
  token?: string | undefined;
  overrides?: unknown;
}

/**
 * What defines a persisted registration (URL, token, overrides, when), without the last known
 * descriptors that refreshes rewrite: equal for an unchanged registration.
 */
function registrationOf(json: string): string {
  try {
    const p = JSON.parse(json) as Partial<Persisted>;
    return JSON.stringify([p.url, p.token ?? null, p.overrides ?? {}, p.registeredAt]);
  } catch {
    return json;
  }
}

/**
 * Writes a rediscovered or refreshed registration (ARGV[3]) to field ARGV[1] of hash KEYS[1]
 * only if the field still holds ARGV[2], the registration as this replica last read or wrote
 * it, and returns what the field held (nil when absent). The check and the write must be one
 * step: an admin DELETE or a re-registration on another replica can land between a read and a
 * write, and a plain HSET would bring the registration back or put back its old token and
 * overrides. HEXISTS alone would still allow the latter; WATCH/MULTI holds its state on the
 * connection, which the registry's concurrent rediscoveries share.
 */
const REPLACE_IF_HELD = `
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held == ARGV[2] then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
return held`;

/** The name the invoke probe asks for: no interceptor server has it. */
const PROBE_NAME = 'fleet.registry/probe-not-an-interceptor';

/**
 * Whether a service serves `interceptor/invoke`: asked for an interceptor it does not have,
 * an interceptor server refuses the params (-32602); a server without the method answers
 * -32601. Any other outcome (a transport failure included) counts as serving it, so a
 * flaky answer never turns a real interceptor server away here.
 */
async function servesInvoke(remote: RemoteService): Promise<boolean> {
  try {
    await remote.invoke(
      { name: PROBE_NAME, event: 'tools/call', phase: 'request', payload: {} },
      { signal: AbortSignal.timeout(10_000) },
    );
    return true;
  } catch (error) {
    return !(error instanceof ProtocolError && error.code === JsonRpcCode.METHOD_NOT_FOUND);
  }
}

/**
 * How the orchestrator connects to Redis (registry, pub/sub): a Redis that accepts
 * connections but never answers must not hang start-up or requests, so each command gives
 * up after `commandTimeout` (registrations then load when Redis is back).
 */
export const REDIS_CLIENT_OPTIONS = {
  maxRetriesPerRequest: 2,
  lazyConnect: false,
  connectTimeout: 5000,
  commandTimeout: 5000,
} as const;

/** A registry operation that failed, with the HTTP status the admin API answers. */
export class RegistryError extends Error {
  override readonly name = 'RegistryError';
  constructor(
    readonly status: 400 | 404 | 409 | 422 | 502 | 503,
    message: string,
    readonly data: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** The 404 of an id the registry does not hold (any more). */
function unknownService(id: string): RegistryError {
  return new RegistryError(404, `no service with id "${id}"`, { id });
}

interface Entry {
  id: string;
  url: string;
  token: string | undefined;
  overrides: ServiceOverrides;
  source: ServiceSource;
  remote: RemoteService;
  interceptors: InterceptorInfo[];
  resolved: ChainInterceptor[];
  status: ServiceView['status'];
  lastError?: string;
  registeredAt?: string;
  refreshedAt?: string;
  /** What defines an admin registration as persisted (see {@link registrationOf}). */
  registration?: string;
  /**
   * An admin registration as this replica last wrote it to Redis or read it there: a
   * rediscovery that would persist anything else has news for the other replicas.
   */
  persisted?: string;
  /** Whether the service answered the `interceptor/invoke` probe (asked once per entry). */
  servesInvoke?: boolean;
  /** An early rediscovery ({@link Registry.rediscoverSoon}) is in flight. */
  rediscovering?: boolean;
  /** When the last early rediscovery started (`performance.now()`). */
  rediscoveredAt?: number;
}

/**
 * What a compare-and-set store of an admin registration found in Redis
 * ({@link Registry} `#storeIfHeld`): `stored` (and announced); `stale`, the same registration
 * with other descriptors another replica stored since this one last read it; `removed`; or
 * `replaced` by another registration of the same URL (other token, overrides or date), `held`.
 */
type StoreOutcome =
  | { outcome: 'stored' | 'stale' | 'removed' }
  | { outcome: 'replaced'; held: string };

interface Persisted {
  url: string;
  token?: string;
  overrides?: ServiceOverrides;
  registeredAt: string;
  /** Last known descriptors, so a replica that cannot reach the service yet still applies them. */
  interceptors?: InterceptorInfo[];
}

/** Options for {@link Registry}. */
export interface RegistryOptions {
  /** Services from the config file. */
  staticServices: Registration[];
  /** Command connection (registrations). Without Redis, only static services exist. */
  redis?: Redis | undefined;
  /** A second connection in subscriber mode (pub/sub). */
  subscriber?: Redis | undefined;
  /** Wraps each service's invoker (tracing). */
  wrapInvoker?: (invoker: Invoker, serviceId: string) => Invoker;
  /** Key prefix. Default `fleet`. */
  prefix?: string;
  healthIntervalMs?: number;
  log: Logger;
}

/** Normalise a service URL so the same endpoint always gets the same id. */
export function normaliseUrl(raw: string): string {
  const url = new URL(raw);
  if (url.username || url.password)
    throw new RegistryError(400, 'the URL must not carry credentials: pass them as "token"', {
      field: 'url',
    });
  url.hash = '';
  const path = url.pathname.replace(/\/+$/, '') || '/';
  const port = url.port ? `:${url.port}` : '';
  return `${url.protocol}//${url.hostname.toLowerCase()}${port}${path}${url.search}`;
}

/** The registry id of a URL: readable, and the same on every replica. */
export function serviceIdOf(raw: string): string {
  const normal = normaliseUrl(raw);
  const url = new URL(normal);
  const slug =
    `${url.hostname}-${url.port || (url.protocol === 'https:' ? '443' : '80')}${url.pathname}`
      .replace(/[^A-Za-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 48);
  const hash = createHash('sha256').update(normal).digest('hex').slice(0, 8);
  return `${slug}-${hash}`;
}

const MAX_PLANS = 1024;

/**
 * Least time between two early rediscoveries of one service ({@link Registry.rediscoverSoon}):
 * a service that keeps refusing an interceptor it still lists must not be asked for its list
 * on every call.
 */
const REDISCOVER_MIN_GAP_MS = 1000;

/** Make `close` idempotent and quiet: a replaced service may be closed from two paths. */
function closeOnce(remote: RemoteService): RemoteService {
  let closing: Promise<void> | undefined;
  return Object.assign(Object.create(remote) as RemoteService, {
    close: () => {
      closing ??= remote.close().catch(() => undefined);
      return closing;
    },
  });
}

/** The registry of interceptor services. */
export class Registry {
  readonly #entries = new Map<string, Entry>();
  readonly #plans = new Map<string, ChainPlan>();
  readonly #options: RegistryOptions;
  readonly #hashKey: string;
  readonly #channel: string;
  readonly #listeners = new Set<() => void>();
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Whether the last reload of persisted registrations failed (logged once per outage). */
  #reconcileFailing = false;
  /** Bumped by every registration and removal on this replica (see #loadAllPersisted). */
  #mutations = 0;
  /** A health check is running. */
  #checking = false;
  /** Listeners on the Redis connections, removed on close. */
  readonly #redisListeners: Array<[Redis, () => void]> = [];
  /** Tags this replica's own pub/sub events so it does not apply them twice. */
  readonly #origin = randomUUID();
  #chain: ChainInterceptor[] = [];

  constructor(options: RegistryOptions) {
    this.#options = options;
    const prefix = options.prefix ?? 'fleet';
    this.#hashKey = `${prefix}:registry:services`;
    this.#channel = `${prefix}:registry:events`;
  }

  /** Discover static services, load persisted registrations and follow other replicas. */
  async start(): Promise<void> {
    for (const service of this.#options.staticServices) {
      const entry = this.#newEntry(service, 'config', parseServiceOverrides(service.overrides));
      this.#entries.set(entry.id, entry);
    }
    await Promise.all([...this.#entries.values()].map((e) => this.#discover(e)));
    const { redis, subscriber } = this.#options;
    if (redis) {
      await this.#loadAllPersisted(redis);
      // After an outage, registrations made or removed meanwhile (their events are lost).
      const reload = () =>
        void this.#loadAllPersisted(redis).then((changed) => changed && this.#rebuild());
      redis.on('ready', reload);
      this.#redisListeners.push([redis, reload]);
    }
    if (subscriber) {
      subscriber.on('message', (channel: string, message: string) => {
        if (channel === this.#channel) void this.#onEvent(message);
      });
      // Redis down at start-up must not stop the gateway: it serves the config's chain, and
      // subscribes (ioredis re-subscribes after reconnects) once Redis answers.
      const subscribe = () =>
        subscriber.subscribe(this.#channel).catch((error: unknown) => {
          this.#options.log.warn(
            { err: String(error) },
            'could not subscribe to registry changes; retrying when Redis is back',
          );
        });
      const resubscribe = () => void subscribe();
      subscriber.on('ready', resubscribe);
      this.#redisListeners.push([subscriber, resubscribe]);
      await subscribe();
    }
    this.#rebuild();
    const interval = this.#options.healthIntervalMs ?? 5000;
    this.#timer = setInterval(() => void this.#healthCheck(), interval);
    this.#timer.unref();
  }

  /** Called after every change of the effective chain. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** True when every static service has been discovered at least once. */
  ready(): boolean {
    return this.undiscovered().length === 0;
  }

  /** Static services never discovered: the chain cannot be trusted while any exists. */
  undiscovered(): string[] {
    return [...this.#entries.values()]
      .filter((e) => e.source === 'config' && e.status === 'pending')
      .map((e) => e.id);
  }

  #newEntry(service: Registration, source: ServiceSource, overrides: ServiceOverrides): Entry {
    const url = normaliseUrl(service.url);
    return {
      id: serviceIdOf(url),
      url,
      token: service.token || undefined,
      overrides,
      source,
      remote: closeOnce(
        createRemoteService({
          url,
          token: service.token || undefined,
          clientInfo: { name: 'interceptor-fleet-orchestrator', version: '0.1.0' },
        }),
      ),
      interceptors: [],
      resolved: [],
      status: 'pending',
    };
  }

  #invoker(entry: Entry): Invoker {
    return this.#options.wrapInvoker
      ? this.#options.wrapInvoker(entry.remote, entry.id)
      : entry.remote;
  }

  /** Discover an entry's interceptors; returns the failure as a RegistryError, if any. */
  async #discover(entry: Entry): Promise<RegistryError | undefined> {
    try {
      const handshake = await entry.remote.connect();
      const { interceptors, rejected } = await entry.remote.list();
      if (!handshake.interceptorsCapability && interceptors.length === 0) {
        throw new RegistryError(422, `${entry.url} is an MCP server but declares no interceptors`, {
          url: entry.url,
        });
      }
      // Probed once per entry: health checks would otherwise send it every few seconds.
      if (!entry.servesInvoke && !(await servesInvoke(entry.remote))) {
        // Another gateway (this one included) lists its chain's interceptors too, but
        // refuses to run them: registering it would fail every intercepted call.
        throw new RegistryError(
          422,
          `${entry.url} lists interceptors but does not serve interceptor/invoke (is it a gateway?)`,
          { url: entry.url },
        );
      }
      entry.servesInvoke = true;
      for (const r of rejected) {
        this.#options.log.warn(
          { service: entry.id, index: r.index, name: r.name, issues: r.issues },
          'ignoring a malformed interceptor descriptor',
        );
      }
      entry.resolved = resolveService(
        entry.id,
        interceptors,
        this.#invoker(entry),
        entry.overrides,
      );
      entry.interceptors = interceptors;
      entry.status = 'healthy';
      entry.refreshedAt = new Date().toISOString();
      delete entry.lastError;
      return undefined;
    } catch (error) {
      const failure = this.#classify(entry, error);
      // A service seen before keeps its last descriptors (their failOpen settings govern);
      // one never seen stays pending.
      if (entry.status !== 'pending') entry.status = 'unhealthy';
      entry.lastError = failure.message;
      return failure;
    }
  }

  #classify(entry: Entry, error: unknown): RegistryError {
    if (error instanceof RegistryError) return error;
    if (error instanceof FleetError) {
      switch (error.code) {
        case 'OVERRIDE_WIDENS_HOOKS':
          return new RegistryError(400, error.message, error.data ?? {});
        case 'NOT_AN_INTERCEPTOR_SERVER':
        case 'INVALID_WIRE_SHAPE':
          return new RegistryError(
            422,
            `${entry.url} is not an interceptor server: ${error.message}`,
            { url: entry.url },
          );
        case 'UNAUTHORIZED':
          return new RegistryError(502, `${entry.url} refused the credentials`, {
            url: entry.url,
            reason: 'unauthorized',
          });
        default:
          return new RegistryError(502, `${entry.url} cannot be reached: ${error.message}`, {
            url: entry.url,
          });
      }
    }
    if (error instanceof WireParseError)
      return new RegistryError(422, error.message, { url: entry.url });
    if (error instanceof ProtocolError) {
      return new RegistryError(
        422,
        `${entry.url} is not an interceptor server: interceptors/list failed with ${error.code} ${error.message}`,
        { url: entry.url },
      );
    }
    return new RegistryError(502, `${entry.url} cannot be reached`, { url: entry.url });
  }

  /**
   * Make this replica's admin registrations those persisted in Redis: load new or changed
   * ones, drop removed ones. Runs at start, when Redis reconnects and with every health check,
   * so a replica that missed a pub/sub event (cut off from Redis for a while, or never sent:
   * see {@link Registry} `#publish`) catches up.
   * Returns whether anything changed; a failure is logged once per outage.
   */
  async #loadAllPersisted(redis: Redis): Promise<boolean> {
    // A registration or removal on this replica while the snapshot is read makes it stale:
    // skip the round (the next health check reconciles).
    const mutations = this.#mutations;
    let all: Record<string, string>;
    try {
      all = await redis.hgetall(this.#hashKey);
    } catch (error) {
      if (!this.#reconcileFailing)
        this.#options.log.warn({ err: String(error) }, 'could not load registrations from Redis');
      this.#reconcileFailing = true;
      return false;
    }
    this.#reconcileFailing = false;
    if (mutations !== this.#mutations) return false;
    let changed = false;
    await Promise.all(
      Object.entries(all).map(async ([id, json]) => {
        const held = this.#entries.get(id);
        if (held?.source === 'config') return; // the config file wins over Redis
        // A healthy entry's descriptors are what the service lists (its own rediscoveries keep
        // them). Any other plans from the last known ones, or none: another replica that
        // reaches the service may have stored newer ones since, its upsert lost.
        if (
          held &&
          held.registration === registrationOf(json) &&
          (held.status === 'healthy' || held.persisted === json)
        )
          return;
        changed = true;
        await this.#loadPersisted(id, json);
      }),
    );
    const removed: Entry[] = [];
    for (const [id, entry] of this.#entries)
      if (entry.source === 'admin' && !(id in all)) {
        removed.push(entry);
        this.#entries.delete(id);
      }
    if (removed.length > 0) {
      // Out of the chain before their connections close (as #onEvent does).
      this.#rebuild();
      changed = true;
      await Promise.all(removed.map((e) => e.remote.close()));
    }
    return changed;
  }

  async #loadPersisted(id: string, json: string): Promise<void> {
    let persisted: Persisted;
    try {
      persisted = JSON.parse(json) as Persisted;
    } catch {
      this.#options.log.warn({ service: id }, 'ignoring an unreadable registration in Redis');
      return;
    }
    if (this.#entries.get(id)?.source === 'config') return;
    const entry = this.#newEntry(
      { url: persisted.url, token: persisted.token },
      'admin',
      persisted.overrides ?? {},
    );
    entry.registeredAt = persisted.registeredAt;
    entry.registration = registrationOf(json);
    entry.persisted = json;
    const failure = await this.#discover(entry);
    if (failure && persisted.interceptors && persisted.interceptors.length > 0) {
      // Unreachable from here right now: apply the last known descriptors so their
      // failOpen settings govern (fail-closed by default) instead of silently dropping them.
      entry.interceptors = persisted.interceptors;
      entry.resolved = resolveService(
        entry.id,
        persisted.interceptors,
        this.#invoker(entry),
        entry.overrides,
      );
      entry.status = 'unhealthy';
    }
    await this.#replace(entry);
  }

  /**
   * Put `entry` in force, then close the one it replaces: the chain never points at a
   * closed connection, and requests still running on the old one finish first.
   */
  async #replace(entry: Entry): Promise<void> {
    const old = this.#entries.get(entry.id);
    this.#entries.set(entry.id, entry);
    this.#rebuild();
    if (old && old !== entry) await old.remote.close();
  }

  async #onEvent(message: string): Promise<void> {
    try {
      const event = JSON.parse(message) as { op: 'upsert' | 'delete'; id: string; origin?: string };
      if (event.origin === this.#origin) return;
      if (event.op === 'delete') {
        const entry = this.#entries.get(event.id);
        if (entry && entry.source === 'admin') await this.#drop(entry);
      } else {
        const json = await this.#options.redis?.hget(this.#hashKey, event.id);
        if (json) await this.#loadPersisted(event.id, json);
      }
    } catch (error) {
      this.#options.log.warn({ err: String(error) }, 'could not apply a registry event');
    }
  }

  /**
   * Take admin registration `entry`, removed from Redis, out of force: out of the chain before
   * its connection closes, so the chain never points at a closed connection.
   */
  async #drop(entry: Entry): Promise<void> {
    this.#entries.delete(entry.id);
    this.#rebuild();
    await entry.remote.close();
  }

  /** An admin registration as stored in Redis, with its last known descriptors. */
  #serialise(entry: Entry): string {
    const persisted: Persisted = {
      url: entry.url,
      overrides: entry.overrides,
      registeredAt: entry.registeredAt ?? new Date().toISOString(),
      interceptors: entry.interceptors,
    };
    if (entry.token) persisted.token = entry.token;
    return JSON.stringify(persisted);
  }

  /** Store an admin registration (with its last known descriptors) and tell the other replicas. */
  async #persist(redis: Redis, entry: Entry): Promise<void> {
    const json = this.#serialise(entry);
    entry.registration = registrationOf(json);
    await redis.hset(this.#hashKey, entry.id, json);
    entry.persisted = json;
    await this.#publish('upsert', entry.id);
  }

  /**
   * After a rediscovery of `entry`: when it is an admin registration still in force whose
   * service listed other descriptors than those in Redis, store them and tell the other
   * replicas, whose chains then follow at once instead of at their own health checks (and a
   * replica starting while the service is unreachable plans from them). When nothing changed
   * nothing is sent, so health checks cost Redis nothing, and a replica applying an upsert
   * starts from the registration it read, so it does not store it again. A Redis failure is
   * logged and the next health check tries again: this replica's chain follows the service
   * already.
   */
  async #shareRediscovered(entry: Entry): Promise<void> {
    const { redis } = this.#options;
    const expected = entry.persisted;
    // Healthy: the descriptors are what the service listed, not the last known ones kept
    // through a failure. In force: a removed or replaced registration is not written back.
    if (
      !redis ||
      expected === undefined ||
      entry.status !== 'healthy' ||
      this.#entries.get(entry.id) !== entry
    )
      return;
    const json = this.#serialise(entry);
    if (json === expected) return;
    try {
      // Not stored when stale: another replica stored other descriptors of this registration
      // (its upsert is on its way, or was lost), and this one compares with those from now
      // on. Nor when removed or registered again meanwhile: its event, or the next reload of
      // persisted registrations, replaces this entry.
      if ((await this.#storeIfHeld(redis, entry, expected, json)).outcome === 'stored')
        this.#options.log.info(
          { service: entry.id, interceptors: entry.interceptors.map((i) => i.name) },
          'saved the changed interceptors of a service for the other replicas',
        );
    } catch (error) {
      // Never the registration itself: it holds the service's token.
      this.#options.log.warn(
        { service: entry.id, err: String(error) },
        'could not share the changed interceptors of a service with the other replicas',
      );
    }
  }

  /**
   * Store `entry` as it is now (with its current descriptors) only if Redis still holds
   * `expected`, the registration as this replica last read or wrote it ({@link REPLACE_IF_HELD}),
   * and announce it when stored. After `stale`, `entry.persisted` is what Redis holds. `json`
   * is the entry serialised, when the caller has it already.
   * @throws what Redis throws.
   */
  async #storeIfHeld(
    redis: Redis,
    entry: Entry,
    expected: string,
    json = this.#serialise(entry),
  ): Promise<StoreOutcome> {
    const held = await redis.eval(REPLACE_IF_HELD, 1, this.#hashKey, entry.id, expected, json);
    if (held === expected) {
      entry.persisted = json;
      // A registration stored by a version that recorded no date got one now: it is this
      // registration's from here on, so the next store keeps it instead of writing another.
      if (entry.registeredAt === undefined) {
        entry.registeredAt = (JSON.parse(json) as Persisted).registeredAt;
        entry.registration = registrationOf(json);
      }
      await this.#publish('upsert', entry.id);
      return { outcome: 'stored' };
    }
    if (typeof held !== 'string') return { outcome: 'removed' };
    if (registrationOf(held) !== entry.registration) return { outcome: 'replaced', held };
    entry.persisted = held;
    return { outcome: 'stale' };
  }

  /**
   * Tell the other replicas that registration `id` changed in Redis, so they apply it now.
   * Best effort, and not retried: a failure (Redis lost between the write and this) is logged,
   * never thrown, since the change itself is stored and every replica reloads what Redis holds
   * at each health check (`#loadAllPersisted`), so it reaches them at their next one anyway,
   * no later than an announcement re-sent at this replica's next one would. Failing the admin
   * change instead would say that a change Redis took was not made.
   */
  async #publish(op: 'upsert' | 'delete', id: string): Promise<void> {
    try {
      await this.#options.redis?.publish(
        this.#channel,
        JSON.stringify({ op, id, origin: this.#origin }),
      );
    } catch (error) {
      this.#options.log.warn(
        { service: id, op, err: String(error) },
        'could not announce a registry change; the other replicas load it at their next health check',
      );
    }
  }

  /**
   * Register a service at runtime.
   * @throws {RegistryError} 400 bad overrides, 422 not an interceptor server, 502 unreachable, 503 no Redis.
   */
  async register(registration: Registration): Promise<{ created: boolean; service: ServiceView }> {
    let overrides: ServiceOverrides;
    try {
      overrides = parseServiceOverrides(registration.overrides);
    } catch (error) {
      throw new RegistryError(400, (error as Error).message, { field: 'overrides' });
    }
    const redis = this.#options.redis;
    if (!redis) throw new RegistryError(503, 'runtime registration needs Redis (REDIS_URL)');
    const id = serviceIdOf(registration.url);
    const existing = this.#entries.get(id);
    if (existing?.source === 'config') return { created: false, service: this.#view(existing) };
    this.#mutations++;
    const entry = this.#newEntry(registration, 'admin', overrides);
    const failure = await this.#discover(entry);
    if (failure) {
      await entry.remote.close();
      throw failure;
    }
    const names = new Set(entry.interceptors.map((i) => i.name));
    const unknown = Object.keys(overrides).filter((name) => !names.has(name));
    if (unknown.length > 0) {
      // An override that matches nothing is a typo the operator would never notice.
      await entry.remote.close();
      throw new RegistryError(
        400,
        `overrides name interceptors ${entry.url} does not have: ${unknown.join(', ')} (it has: ${[...names].join(', ')})`,
        { field: 'overrides', unknown },
      );
    }
    entry.registeredAt = existing?.registeredAt ?? new Date().toISOString();
    try {
      await this.#persist(redis, entry);
    } catch (error) {
      await entry.remote.close();
      throw this.#redisFailed(error, id, 'the registry could not save the registration');
    }
    await this.#replace(entry);
    this.#mutations++;
    this.#options.log.info(
      { service: entry.id, url: entry.url, interceptors: entry.interceptors.map((i) => i.name) },
      existing === undefined
        ? 'registered an interceptor service'
        : 're-registered an interceptor service',
    );
    return { created: existing === undefined, service: this.#view(entry) };
  }

  /** @throws {RegistryError} 404 unknown, 409 from config. */
  async unregister(id: string): Promise<void> {
    const entry = this.#entries.get(id);
    if (!entry) throw unknownService(id);
    if (entry.source === 'config')
      throw new RegistryError(
        409,
        `service "${id}" comes from the config file and cannot be removed at runtime`,
        { id },
      );
    this.#mutations++;
    try {
      await this.#options.redis?.hdel(this.#hashKey, id);
      await this.#publish('delete', id);
    } catch (error) {
      throw this.#redisFailed(error, id, 'the registry could not remove the registration', {
        id,
      });
    }
    this.#entries.delete(id);
    this.#mutations++;
    this.#rebuild();
    this.#options.log.info({ service: id, url: entry.url }, 'unregistered an interceptor service');
    await entry.remote.close();
  }

  /**
   * Re-discover one service now. An admin registration is stored again, with what was found,
   * only if Redis still holds it as this replica last saw it: a removal or a re-registration
   * on another replica while the service was being listed is never undone, and this replica
   * follows it before answering.
   * @throws {RegistryError} 404 unknown (or removed meanwhile), 409 registered again meanwhile,
   *   422/502 from discovery, 503 when Redis does not take it.
   */
  async refresh(id: string): Promise<ServiceView> {
    const entry = this.#entries.get(id);
    if (!entry) throw unknownService(id);
    const failure = await this.#discover(entry);
    this.#rebuild();
    if (failure) throw failure;
    const { redis } = this.#options;
    // Only admin registrations are in Redis; a config-file service is refreshed here alone.
    if (!redis || entry.persisted === undefined) return this.#view(entry);
    let store: StoreOutcome;
    try {
      store = await this.#storeIfHeld(redis, entry, entry.persisted);
      // Another replica's rediscovery stored other descriptors of this same registration since
      // this one last read it: what this refresh just listed is at least as recent.
      if (store.outcome === 'stale') store = await this.#storeIfHeld(redis, entry, entry.persisted);
    } catch (error) {
      // In force on this replica already; Redis keeps the previous registration.
      throw this.#redisFailed(
        error,
        id,
        'refreshed, but the registry could not save the registration',
        { id },
      );
    }
    // Nothing is written. This replica's view (its services, its chain) follows what Redis
    // holds before the answer, as the removal's or the re-registration's event would, instead
    // of showing and running the old registration until that event or this replica's next
    // reload of persisted registrations. Not when that event or reload has replaced or removed
    // this entry already, while the refresh was under way: it read Redis itself.
    const inForce = this.#entries.get(id) === entry;
    if (store.outcome === 'removed') {
      if (inForce) await this.#drop(entry);
      throw unknownService(id);
    }
    if (store.outcome === 'replaced') {
      if (inForce) await this.#loadPersisted(id, store.held);
      throw new RegistryError(
        409,
        `service "${id}" was registered again while it was being refreshed; refresh it again`,
        { id },
      );
    }
    // Still stale: yet another replica stored what it found a moment ago, and announced it.
    return this.#view(entry);
  }

  /**
   * The 503 of an admin change Redis did not take: the caller gets what failed and a fixed
   * cause (a driver's error names internals: addresses, timeouts, retry settings), the log
   * the error itself.
   */
  #redisFailed(
    error: unknown,
    id: string,
    failed: string,
    data: Record<string, unknown> = {},
  ): RegistryError {
    this.#options.log.warn({ service: id, err: String(error) }, failed);
    return new RegistryError(503, `${failed}: Redis is unavailable`, data);
  }

  /** Every registered service. */
  list(): ServiceView[] {
    return [...this.#entries.values()].map((e) => this.#view(e));
  }

  #view(entry: Entry): ServiceView {
    const view: ServiceView = {
      id: entry.id,
      url: entry.url,
      source: entry.source,
      status: entry.status,
      interceptors: entry.interceptors,
      overrides: entry.overrides,
      // Whether a token is stored, never the token.
      hasToken: entry.token !== undefined,
    };
    if (entry.lastError) view.lastError = entry.lastError;
    if (entry.registeredAt) view.registeredAt = entry.registeredAt;
    if (entry.refreshedAt) view.refreshedAt = entry.refreshedAt;
    return view;
  }

  /** The plan for (event, phase), cached until the registry changes. */
  plan(event: string, phase: Phase, protocolVersion?: string): ChainPlan {
    const key = `${event}\u0000${phase}\u0000${protocolVersion ?? ''}`;
    let plan = this.#plans.get(key);
    if (!plan) {
      if (this.#plans.size >= MAX_PLANS) this.#plans.clear();
      plan = planChain(
        this.#chain,
        event,
        phase,
        protocolVersion === undefined ? {} : { protocolVersion },
      );
      this.#plans.set(key, plan);
    }
    return plan;
  }

  /** Every interceptor in the effective chain (for tests and the admin API). */
  interceptors(): readonly ChainInterceptor[] {
    return this.#chain;
  }

  #rebuild(): void {
    const chain: ChainInterceptor[] = [];
    for (const entry of this.#entries.values()) chain.push(...entry.resolved);
    this.#chain = chain;
    this.#plans.clear();
    for (const listener of this.#listeners) {
      try {
        listener();
      } catch {
        // A listener never breaks the registry.
      }
    }
  }

  async #healthCheck(): Promise<void> {
    // Slow discoveries must not stack up checks (the timer keeps ticking).
    if (this.#checking) return;
    this.#checking = true;
    try {
      await this.#checkAll();
    } finally {
      this.#checking = false;
    }
  }

  async #checkAll(): Promise<void> {
    const { redis } = this.#options;
    let changed = redis ? await this.#loadAllPersisted(redis) : false;
    for (const entry of this.#entries.values()) {
      if (await this.#rediscover(entry)) changed = true;
    }
    if (changed) this.#rebuild();
    // After the rebuild: this replica's chain never waits for Redis.
    for (const entry of this.#entries.values()) await this.#shareRediscovered(entry);
  }

  /** Discover `entry` again; true when its status or its interceptors changed. */
  async #rediscover(entry: Entry): Promise<boolean> {
    const before = JSON.stringify([entry.status, entry.interceptors]);
    await this.#discover(entry);
    return JSON.stringify([entry.status, entry.interceptors]) !== before;
  }

  /**
   * Discover service `id` again without waiting for the next health check, in the background:
   * an invocation found it without an interceptor the chain still lists (the service was
   * redeployed without it), and every call that reaches that interceptor fails until the chain
   * follows the service. At most one such discovery per service is in flight and none starts
   * within {@link REDISCOVER_MIN_GAP_MS} of the previous one, so a burst of failing calls
   * makes one; the caller never waits for it. Unknown ids are ignored.
   */
  rediscoverSoon(id: string): void {
    const entry = this.#entries.get(id);
    if (entry === undefined || entry.rediscovering) return;
    const now = performance.now();
    if (entry.rediscoveredAt !== undefined && now - entry.rediscoveredAt < REDISCOVER_MIN_GAP_MS)
      return;
    entry.rediscovering = true;
    entry.rediscoveredAt = now;
    this.#options.log.warn(
      { service: id, url: entry.url },
      'an interceptor service no longer has an interceptor the chain lists; rediscovering it now',
    );
    void this.#rediscover(entry)
      .then(async (changed) => {
        // A replaced or removed entry is no longer in force: its news changes nothing.
        if (changed && this.#entries.get(id) === entry) this.#rebuild();
        await this.#shareRediscovered(entry);
      })
      .catch((error: unknown) => {
        this.#options.log.warn({ service: id, err: String(error) }, 'rediscovery failed');
      })
      .finally(() => {
        entry.rediscovering = false;
      });
  }

  /** Stop background work and close every connection. */
  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    for (const [connection, listener] of this.#redisListeners) connection.off('ready', listener);
    await Promise.all([...this.#entries.values()].map((e) => e.remote.close()));
  }
}
