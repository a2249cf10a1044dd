/**
 * The local fleet: the orchestrator, the three interceptor services, the audit worker and
 * the demo MCP backend as supervised child processes on embedded defaults (Redis at
 * REDIS_URL, PGlite under `.fleet/` when there is no DATABASE_URL). Used by `fleet up`,
 * `fleet demo` and the end-to-end tests.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  constants,
  createWriteStream,
  existsSync,
  readFileSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { connect, createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { makeDirectory } from '@fleet/audit/directory';
import { processAlive } from '@fleet/audit/lock';
import { expandVariables } from '@fleet/core';
import { parse as parseYaml } from 'yaml';
import { unlessAborted } from '../abortable.ts';
import { CliError } from '../errors.ts';

/** The repository this CLI belongs to (works from src/ and from dist/). */
export const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const FROM_SOURCE = import.meta.url.endsWith('.ts');

/** The services of the local fleet, in start order. */
export const FLEET_SERVICES = [
  'demo-backend',
  'pii-redactor',
  'policy-validator',
  'audit-logger',
  'audit-worker',
  'orchestrator',
] as const;
/** One of {@link FLEET_SERVICES}. */
export type FleetService = (typeof FLEET_SERVICES)[number];

/** The script a service of the local fleet runs (its build, or its source under tsx). */
export function entry(service: FleetService): string {
  const [dir, file] =
    service === 'demo-backend'
      ? ['packages/cli', FROM_SOURCE ? 'src/demo/main' : 'dist/demo/main']
      : service === 'audit-worker'
        ? ['services/audit-logger', FROM_SOURCE ? 'src/worker' : 'dist/worker']
        : [`services/${service}`, FROM_SOURCE ? 'src/main' : 'dist/main'];
  return join(REPO_ROOT, dir, `${file}.${FROM_SOURCE ? 'ts' : 'js'}`);
}

/**
 * The services on the request path run with V8's memory reducer off, as in the images (see
 * deploy/docker/Dockerfile): its full GCs in lightly loaded processes take CPU from the
 * request path on a small machine.
 */
const REQUEST_PATH: ReadonlySet<FleetService> = new Set([
  'pii-redactor',
  'policy-validator',
  'audit-logger',
  'orchestrator',
]);

/** The node arguments one service of the local fleet is started with. */
export function nodeArgs(service: FleetService): string[] {
  const script = entry(service);
  const flags = REQUEST_PATH.has(service) ? ['--no-memory-reducer'] : [];
  if (!FROM_SOURCE) return [...flags, script];
  const tsx = pathToFileURL(createRequire(join(REPO_ROOT, 'package.json')).resolve('tsx')).href;
  return [...flags, '--import', tsx, '--conditions=@fleet/source', script];
}

/**
 * The audit queue of a standalone service and of an orchestrator config without `audit.queue`
 * (DESIGN.md §3; `AUDIT_QUEUE` of `@fleet/audit`, which a test pins this to).
 */
export const DEFAULT_AUDIT_QUEUE = 'fleet-audit';

/**
 * The audit queue of the local fleet `fleetId`, which every process of that fleet gets as
 * `AUDIT_QUEUE`: an explicit `$AUDIT_QUEUE`, else `fleet-audit-<fleetId>` (a BullMQ queue
 * name: no ':'), so that fleets sharing one Redis do not take each other's records. With
 * `configText` (a `--config` of the user's) it is the queue that config gives the
 * orchestrator, whose word no variable overrides: its `audit.queue` expanded against that
 * environment, or the orchestrator's default `fleet-audit` when it names none.
 */
export function fleetAuditQueue(
  env: Readonly<Record<string, string | undefined>>,
  fleetId: string,
  configText?: string,
): string {
  const queue = env.AUDIT_QUEUE || `${DEFAULT_AUDIT_QUEUE}-${fleetId}`;
  if (configText === undefined) return queue;
  let configured: unknown;
  try {
    configured = (parseYaml(configText) as { audit?: { queue?: unknown } } | null)?.audit?.queue;
  } catch {
    // The orchestrator refuses this config and says why; the queue does not matter then.
    return queue;
  }
  if (typeof configured !== 'string') return DEFAULT_AUDIT_QUEUE;
  return expandVariables(configured, { ...env, AUDIT_QUEUE: queue }) || queue;
}

/** What happens while the fleet starts and runs (for progress display). */
export interface FleetEvents {
  starting?(service: FleetService): void;
  ready?(service: FleetService, url: string, ms: number): void;
  exited?(
    service: FleetService,
    code: number | null,
    signal: string | null,
    restarting: boolean,
  ): void;
}

/** Options for {@link startLocalFleet}. */
export interface LocalFleetOptions {
  /** Orchestrator port (default 8080; 0 = free port). */
  port?: number;
  /** An orchestrator config to use instead of the generated one. */
  configPath?: string;
  /** Top-level YAML appended to the generated orchestrator config (e.g. an `auth` section). */
  extraConfig?: string;
  /** More backends for the generated config: YAML list items (`  - {id: x, url: ..., prefix: x_}`). */
  extraBackends?: string;
  /** The demo backend's prefix in the generated config. Default "" (none). */
  demoPrefix?: string;
  /** Environment the services inherit (REDIS_URL, DATABASE_URL, OTEL_*, FLEET_ADMIN_TOKEN, ...). */
  env: Readonly<Record<string, string | undefined>>;
  /** State directory (logs, generated config, PGlite data). Default `<cwd>/.fleet`. */
  stateDir: string;
  events?: FleetEvents;
  /** Restart a child that dies. Default true. */
  restart?: boolean;
  /** Per-service readiness budget. Default 90 s. */
  readyTimeoutMs?: number;
  /**
   * Aborting it while the fleet starts stops every service started so far and rejects with
   * an `INTERRUPTED` {@link CliError} (`TERMINATED` for SIGTERM; `fleet up` aborts it on Ctrl-C
   * or SIGTERM). No effect once started.
   */
  signal?: AbortSignal;
}

/** A running local fleet. */
export interface LocalFleet {
  urls: Record<FleetService, string>;
  /** The MCP endpoint to give to a client. */
  mcpUrl: string;
  adminUrl: string;
  viewerUrl: string;
  /** The token the interceptor services require (the orchestrator sends it). */
  fleetToken: string;
  /** The BullMQ audit queue of this fleet's processes (see {@link fleetAuditQueue}). */
  auditQueue: string;
  stateDir: string;
  /** Send a signal to one service's process (it is restarted when it dies, unless stopping). */
  kill(service: FleetService, signal?: NodeJS.Signals): boolean;
  stop(): Promise<void>;
}

/** What `fleet up` writes to `<state dir>/fleet.json` for the other commands. */
export interface FleetState {
  urls: Partial<Record<FleetService, string>>;
  /** The token the interceptor services require. */
  fleetToken?: string;
  /** The admin token the orchestrator requires (`FLEET_ADMIN_TOKEN` of `fleet up`), when set. */
  adminToken?: string;
  /** The fleet's audit queue: a process started for this fleet gets it as `AUDIT_QUEUE`. */
  auditQueue?: string;
  /** The orchestrator config the fleet runs: its `--config`, else the generated `fleet.yaml`. */
  configPath?: string;
  /** The pid of the `fleet up` that wrote it. */
  pid?: number;
}

/** The state `fleet up` left in `stateDir`, or undefined when there is none (or it is unreadable). */
export function readFleetState(stateDir: string): FleetState | undefined {
  const file = join(stateDir, 'fleet.json');
  if (!existsSync(file)) return undefined;
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<FleetState> | null;
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    return {
      urls: typeof parsed.urls === 'object' && parsed.urls !== null ? parsed.urls : {},
      ...(typeof parsed.fleetToken === 'string' ? { fleetToken: parsed.fleetToken } : {}),
      ...(typeof parsed.adminToken === 'string' ? { adminToken: parsed.adminToken } : {}),
      ...(typeof parsed.auditQueue === 'string' ? { auditQueue: parsed.auditQueue } : {}),
      ...(typeof parsed.configPath === 'string' ? { configPath: parsed.configPath } : {}),
      ...(typeof parsed.pid === 'number' ? { pid: parsed.pid } : {}),
    };
  } catch {
    return undefined;
  }
}

/**
 * The state of the fleet running from `stateDir`: {@link readFleetState} when the `fleet up`
 * that wrote it is still alive (or the file names no pid), else undefined.
 */
export function liveFleetState(stateDir: string): FleetState | undefined {
  const state = readFleetState(stateDir);
  if (state?.pid !== undefined && !processAlive(state.pid)) return undefined;
  return state;
}

/**
 * Refuse to start a second fleet in `stateDir` while another process's fleet runs from it:
 * its `fleet.json` (which `fleet stdio`, `fleet audit` and the admin commands read) would be
 * overwritten, and its audit store is locked by its audit-logger.
 * @throws {CliError} `FLEET_RUNNING` naming the state directory and the pid.
 */
export function assertNoLiveFleet(stateDir: string): void {
  const state = readFleetState(stateDir);
  if (state?.pid === undefined || state.pid === process.pid || !processAlive(state.pid)) return;
  const orchestrator = state.urls.orchestrator;
  throw new CliError(
    'FLEET_RUNNING',
    `a fleet is already running from ${stateDir} (fleet up, pid ${state.pid}${orchestrator ? `, orchestrator ${orchestrator}` : ''}): use it, stop it, or pass another --state-dir`,
  );
}

/**
 * Resolve with why nothing can listen on 127.0.0.1:`port` (`fleet up`'s `--port`), or
 * undefined when it is free. Worded as the services word their own start-up failure (the
 * kit's `ListenError`), naming `--port` where they name `PORT`: `--port: cannot listen on
 * 127.0.0.1:8080: the port is in use (EADDRINUSE); pass another --port, ...`.
 */
export function checkPortFree(port: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => {
      // Loaded only on this path: the kit's entry pulls in express, pino and more, which
      // every `fleet` command would otherwise pay for at start-up.
      import('@fleet/interceptor-kit').then(({ ListenError }) => {
        const failure = new ListenError('127.0.0.1', port, error);
        resolve(
          failure.setting === 'port'
            ? `--port: ${failure.message}; pass another --port, or --port 0 for a free one`
            : failure.message,
        );
      }, reject);
    });
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () =>
      server.close(() => resolve(undefined)),
    );
  });
}

/** Why the state directory cannot be used, and the error behind it when there is one. */
interface StateDirProblem {
  message: string;
  cause?: unknown;
}

/**
 * Why the fleet cannot keep its state in `stateDir` (created when missing), or undefined: it,
 * or the nearest of its parents that exists, is not a writable directory, or its `logs`
 * directory cannot be created there. That last check creates what is missing and removes it
 * again: access(2) grants root everything, and /proc refuses a new directory whatever it grants.
 */
function checkStateDir(stateDir: string): StateDirProblem | undefined {
  let existing = stateDir;
  while (!existsSync(existing) && dirname(existing) !== existing) existing = dirname(existing);
  const problem = !statSync(existing).isDirectory()
    ? 'is not a directory'
    : !isWritable(existing)
      ? 'is not writable'
      : undefined;
  const fix = ': pass another --state-dir';
  if (problem !== undefined) {
    const which = existing === stateDir ? '' : ` cannot be created: ${existing}`;
    return { message: `the state directory ${stateDir}${which} ${problem}${fix}` };
  }
  try {
    for (const level of makeDirectory(join(stateDir, 'logs')).reverse()) rmdirSync(level);
  } catch (error) {
    const which = existing === stateDir ? 'is not writable' : 'cannot be created';
    return {
      message: `the state directory ${stateDir} ${which} (${(error as Error).message})${fix}`,
      cause: error,
    };
  }
  return undefined;
}

function isWritable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** Where the fleet's Redis is when `REDIS_URL` names none. */
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** Ask Redis for PONG at `url`; resolve with an error message, or undefined when it answers. */
export function checkRedis(url: string, timeoutMs = 2000): Promise<string | undefined> {
  return new Promise((resolve) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      resolve(`REDIS_URL "${url}" is not a URL`);
      return;
    }
    const socket = connect({
      host: target.hostname || '127.0.0.1',
      port: Number(target.port || 6379),
    });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(`Redis at ${url} did not answer within ${timeoutMs} ms`);
    }, timeoutMs);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      clearTimeout(timer);
      socket.end();
      const reply = data.toString();
      resolve(
        reply.startsWith('+PONG') || reply.startsWith('-NOAUTH')
          ? undefined
          : `Redis at ${url} answered ${JSON.stringify(reply.trim())}`,
      );
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      resolve(`Redis is not reachable at ${url} (${error.message})`);
    });
  });
}

interface Child {
  service: FleetService;
  process: ChildProcess;
  url?: string;
}

function readyOf(url: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return (async () => {
    while (!signal?.aborted) {
      try {
        const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) });
        await res.body?.cancel();
        if (res.status === 200) return;
      } catch {
        // not yet
      }
      if (Date.now() > deadline)
        throw new Error(`${url}/readyz did not answer 200 within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
}

/**
 * `work`, unless `signal` aborts first: then an `INTERRUPTED` error (exit 130), or
 * `TERMINATED` (143) when the signal was SIGTERM.
 */
function unlessInterrupted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  return unlessAborted(
    work,
    signal,
    (reason) =>
      new CliError(
        reason === 'SIGTERM' ? 'TERMINATED' : 'INTERRUPTED',
        `${String(reason ?? 'interrupted')} while the fleet was starting; the services started so far are stopped`,
      ),
  );
}

/**
 * What a local fleet needs, checked without starting anything, in this order: no live fleet
 * in the state directory, the `--config` exists, the port (unless 0) is free, Redis answers,
 * every service is built. {@link startLocalFleet} checks it first; `fleet up` checks it before
 * its first line of progress.
 * @throws {CliError} `FLEET_RUNNING` or `FLEET_UNAVAILABLE`, naming the problem.
 */
export async function checkFleetCanStart(
  options: Pick<LocalFleetOptions, 'env' | 'stateDir' | 'configPath' | 'port'>,
): Promise<void> {
  const { env, stateDir, configPath, port = 8080 } = options;
  assertNoLiveFleet(stateDir);
  const stateDirProblem = checkStateDir(stateDir);
  if (stateDirProblem)
    throw new CliError('FLEET_UNAVAILABLE', stateDirProblem.message, {
      cause: stateDirProblem.cause,
    });
  if (configPath !== undefined && !existsSync(configPath))
    throw new CliError(
      'FLEET_UNAVAILABLE',
      `the config ${configPath} does not exist: pass an orchestrator config file as --config, or leave --config out for the generated one`,
    );
  if (port !== 0) {
    const portProblem = await checkPortFree(port);
    if (portProblem) throw new CliError('FLEET_UNAVAILABLE', portProblem);
  }
  const redisUrl = env.REDIS_URL || DEFAULT_REDIS_URL;
  const redisProblem = await checkRedis(redisUrl);
  if (redisProblem) {
    throw new CliError(
      'FLEET_UNAVAILABLE',
      `${redisProblem}. The fleet needs Redis 7: start one with\n  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no\nor point REDIS_URL at yours.`,
    );
  }
  for (const service of FLEET_SERVICES) {
    if (!existsSync(entry(service))) {
      throw new CliError(
        'FLEET_UNAVAILABLE',
        `${service} is not built: ${entry(service)} is missing (run pnpm build)`,
      );
    }
  }
}

/** Where a state directory keeps the id of its fleet. */
const FLEET_ID_FILE = 'fleet-id';
const FLEET_ID = /^[0-9a-f]{8}$/;

/**
 * The id of the fleet of `stateDir`: the one it has kept since its first `fleet up`, or a new
 * one (kept from now on). A fleet started again from one directory therefore finds what it
 * left in Redis: its runtime registrations, tool pins (an approval survives a restart, and so
 * does the detection of a tool changed while the fleet was down), PII tokens, and the audit
 * jobs its worker had not taken yet; another directory's fleet sees none of them.
 */
export function stateDirFleetId(stateDir: string): string {
  const path = join(stateDir, FLEET_ID_FILE);
  try {
    const kept = readFileSync(path, 'utf8').trim();
    if (FLEET_ID.test(kept)) return kept;
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'ENOENT') throw error;
  }
  const id = randomBytes(4).toString('hex');
  writeFileSync(path, `${id}\n`);
  return id;
}

/** Start the whole fleet; resolves once every service is ready. */
export async function startLocalFleet(options: LocalFleetOptions): Promise<LocalFleet> {
  const { env, stateDir, events = {}, readyTimeoutMs = 90_000, signal } = options;
  const restart = options.restart ?? true;
  await checkFleetCanStart(options);
  const port = options.port ?? 8080;
  const redisUrl = env.REDIS_URL || DEFAULT_REDIS_URL;
  try {
    makeDirectory(join(stateDir, 'logs'));
  } catch (error) {
    throw new CliError(
      'FLEET_UNAVAILABLE',
      `the state directory ${stateDir} cannot be used (${(error as Error).message}): pass another --state-dir`,
      { cause: error },
    );
  }
  const fleetToken = randomBytes(24).toString('base64url');
  const adminToken = env.FLEET_ADMIN_TOKEN || undefined;
  // One id per state directory: its Redis keys and audit queue, apart from other fleets on the
  // Redis, and the same at the next start from this directory.
  const fleetId = stateDirFleetId(stateDir);
  // Its services' Redis keys (registry, rate limits, tool pins, token vault) under one prefix.
  const keyPrefix = `fleet-up-${fleetId}`;
  const auditQueue = fleetAuditQueue(
    env,
    fleetId,
    options.configPath === undefined ? undefined : readFileSync(options.configPath, 'utf8'),
  );
  const configPath = options.configPath ?? join(stateDir, 'fleet.yaml');
  const writeState = (urls: FleetState['urls']) => {
    const path = join(stateDir, 'fleet.json');
    writeFileSync(
      path,
      // The interceptor token lets a second orchestrator (e.g. `--stdio` for a desktop
      // client) reach this fleet's interceptor services, the admin token lets the admin
      // commands in; owner-only file.
      `${JSON.stringify({ urls, fleetToken, ...(adminToken ? { adminToken } : {}), auditQueue, configPath, pid: process.pid }, null, 2)}\n`,
      { mode: 0o600 },
    );
    // `mode` applies only when the file is created: an older, looser one is tightened too.
    chmodSync(path, 0o600);
  };
  // Claim the state directory at once: a second `fleet up` on it refuses from now on, not
  // only once this fleet is ready.
  writeState({});
  const children = new Map<FleetService, Child>();
  let stopping = false;
  const baseEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) baseEnv[k] = v;

  const spawnService = (
    service: FleetService,
    serviceEnv: Record<string, string>,
    port: number,
  ): Promise<string> => {
    // A start that failed stops the fleet while other services may still be starting: none
    // is started after that (nor restarted), so none outlives stop().
    if (stopping)
      return Promise.reject(new Error(`${service} was not started: the fleet is stopping`));
    events.starting?.(service);
    const started = Date.now();
    const log = createWriteStream(join(stateDir, 'logs', `${service}.log`), { flags: 'a' });
    const child = spawn(process.execPath, nodeArgs(service), {
      cwd: stateDir,
      env: {
        ...baseEnv,
        REDIS_URL: redisUrl,
        FLEET_TOKEN: fleetToken,
        AUDIT_QUEUE: auditQueue,
        HOST: '127.0.0.1',
        PORT: String(port),
        OTEL_SERVICE_NAME: service,
        ...serviceEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stderr?.pipe(log);
    const record: Child = { service, process: child };
    children.set(service, record);
    const url = new Promise<string>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
      lines.on('line', (line) => {
        try {
          const parsed = JSON.parse(line) as { url?: unknown };
          if (typeof parsed.url === 'string' && record.url === undefined) {
            record.url = parsed.url;
            resolve(parsed.url);
          }
        } catch {
          log.write(`${line}\n`);
        }
      });
      child.once('exit', (code, signal) => {
        if (record.url === undefined)
          reject(
            new Error(
              `${service} exited before it was ready (code ${code}, signal ${signal}); see ${join(stateDir, 'logs', `${service}.log`)}`,
            ),
          );
      });
    });
    child.once('exit', (code, signal) => {
      if (stopping || children.get(service) !== record) return;
      const again = restart && record.url !== undefined;
      events.exited?.(service, code, signal, again);
      if (again) {
        const previous = Number(new URL(record.url as string).port);
        setTimeout(() => {
          if (!stopping) spawnService(service, serviceEnv, previous).catch(() => undefined);
        }, 1000).unref();
      }
    });
    const ready = url.then(async (u) => {
      await readyOf(u, readyTimeoutMs, signal).catch((error: Error) => {
        throw new Error(
          `${service} is not ready: ${error.message}; see ${join(stateDir, 'logs', `${service}.log`)}`,
        );
      });
      if (signal?.aborted) throw new Error(`${service} was interrupted`);
      events.ready?.(service, u, Date.now() - started);
      return u;
    });
    return unlessInterrupted(ready, signal);
  };

  // If this process exits before stop() has finished (an error, or `fleet up` told to stop
  // again while stopping), ask the children that are still running to stop too. (A process
  // killed outright runs no handler: then Ctrl-C reaches the children from the terminal.)
  const orphanGuard = () => {
    for (const { process: child } of children.values())
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', orphanGuard);

  const stop = async () => {
    stopping = true;
    const order = [...FLEET_SERVICES].reverse();
    for (const service of order) {
      const child = children.get(service)?.process;
      if (!child || child.exitCode !== null || child.signalCode !== null) continue;
      await new Promise<void>((resolve) => {
        const kill = setTimeout(() => child.kill('SIGKILL'), 8000);
        child.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        child.kill('SIGTERM');
      });
    }
    process.off('exit', orphanGuard);
  };

  try {
    // Everything but the orchestrator at once (none needs another to start); the
    // orchestrator's config names their URLs, so it comes last.
    const configDir = join(REPO_ROOT, 'packages/cli/demo-config');
    // PGlite (no DATABASE_URL) serves one process: the worker then runs inside the
    // audit-logger; with PostgreSQL it is its own process, as in production, started once
    // the audit-logger has migrated the store.
    const embedded = !env.DATABASE_URL;
    const demoBackendUrl = spawnService('demo-backend', {}, 0);
    const piiUrl = spawnService(
      'pii-redactor',
      {
        PII_CONFIG: env.PII_CONFIG || join(configDir, 'pii.yaml'),
        PII_HMAC_KEY: env.PII_HMAC_KEY || randomBytes(32).toString('base64url'),
        PII_VAULT_PREFIX: env.PII_VAULT_PREFIX || `${keyPrefix}:pii:vault`,
      },
      0,
    );
    const policyUrl = spawnService(
      'policy-validator',
      {
        POLICY_FILE: env.POLICY_FILE || join(configDir, 'policy.yaml'),
        POLICY_KEY_PREFIX: env.POLICY_KEY_PREFIX || keyPrefix,
      },
      0,
    );
    const auditUrl = spawnService(
      'audit-logger',
      {
        AUDIT_WORKER: embedded ? 'true' : 'false',
        AUDIT_JOURNAL: join(stateDir, 'audit-logger-journal.ndjson'),
        AUDIT_PGLITE_DIR: join(stateDir, 'audit-pglite'),
      },
      0,
    );
    const [demoBackend, pii, policy, audit, worker] = await Promise.all([
      demoBackendUrl,
      piiUrl,
      policyUrl,
      auditUrl,
      embedded
        ? auditUrl
        : auditUrl.then(() =>
            spawnService(
              'audit-worker',
              { AUDIT_JOURNAL: join(stateDir, 'audit-worker-journal.ndjson') },
              0,
            ),
          ),
    ]);
    if (options.configPath === undefined) {
      writeFileSync(
        configPath,
        [
          '# Generated by `fleet up`: the local fleet on embedded defaults.',
          'backends:',
          `  - {id: demo, url: "${demoBackend}/mcp", prefix: "${options.demoPrefix ?? ''}"}`,
          ...(options.extraBackends ? [options.extraBackends.trimEnd()] : []),
          'interceptors:',
          ...[pii, policy, audit].map((u) => `  - {url: "${u}/mcp", token: "\${FLEET_TOKEN}"}`),
          'chain: {timeoutMs: 2000, denyAs: error}',
          // The fallback keeps this fleet's queue for `fleet stdio` sessions without AUDIT_QUEUE.
          `audit: {queue: "\${AUDIT_QUEUE:-${auditQueue}}"}`,
          `registry: {prefix: "${keyPrefix}"}`,
          ...(options.extraConfig ? [options.extraConfig.trimEnd()] : []),
          '',
        ].join('\n'),
      );
    }
    const orchestrator = await spawnService(
      'orchestrator',
      { FLEET_CONFIG: configPath, AUDIT_JOURNAL: join(stateDir, 'orchestrator-journal.ndjson') },
      port,
    );
    const urls = {
      'demo-backend': demoBackend,
      'pii-redactor': pii,
      'policy-validator': policy,
      'audit-logger': audit,
      'audit-worker': worker,
      orchestrator,
    };
    writeState(urls);
    return {
      urls,
      mcpUrl: `${orchestrator}/mcp`,
      adminUrl: `${orchestrator}/admin`,
      viewerUrl: `${audit}/`,
      fleetToken,
      auditQueue,
      stateDir,
      kill: (service, signal = 'SIGKILL') => children.get(service)?.process.kill(signal) ?? false,
      stop,
    };
  } catch (error) {
    await stop();
    if (error instanceof CliError) throw error;
    throw new CliError('FLEET_UNAVAILABLE', `the fleet did not start: ${(error as Error).message}`);
  }
}
