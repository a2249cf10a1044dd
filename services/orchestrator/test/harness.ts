/** Test harness: a real orchestrator on 127.0.0.1:0 with real Redis, real clients, cleanup. */

import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type AuditProducer,
  type AuditRecord,
  createAuditProducer,
  parseAuditRecord,
} from '@fleet/audit';
import {
  allow,
  createInterceptorHost,
  createInterceptorHttpApp,
  defineValidator,
  type Interceptor,
  type InterceptorHttpOptions,
  listen,
} from '@fleet/interceptor-kit';
import { defer } from '@fleet/interceptor-kit/testing';
import { deleteKeys, startHttpBackend } from '@fleet/test-fixtures';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import {
  type AdminAction,
  type ChainExecution,
  type ChainObserver,
  createOrchestrator,
  type Logger,
  type Orchestrator,
  parseConfig,
  REDIS_CLIENT_OPTIONS,
  silentLogger,
} from '../src/app.ts';

export { defer };

/** The local Redis the tests use. */
export const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

/** A running orchestrator. */
export interface TestGateway {
  base: string;
  mcpUrl: string;
  /** The gateway's HTTP server (e.g. to count the connections clients hold open). */
  server: Server;
  orchestrator: Orchestrator;
  executions: ChainExecution[];
  prefix: string;
}

/** Options for {@link startGateway}. */
export interface StartGatewayOptions {
  /** Use Redis (registry persistence and pub/sub). Default true. */
  redis?: boolean;
  /**
   * A Redis of the test's own (e.g. a private `redis-server` it stops), connected with the
   * options main.ts uses. Default the shared one on 127.0.0.1:6379.
   */
  redisUrl?: string;
  /** Share a registry prefix with another gateway (replicas). */
  prefix?: string;
  adminToken?: string;
  /** Also receives every chain execution (e.g. the real audit observer). */
  observer?: ChainObserver;
  /** Told of every admin API change and refused attempt. */
  onAdminAction?: (action: AdminAction) => void;
  /** The orchestrator's logger (default: silent). */
  log?: Logger;
  /** `registry.healthIntervalMs` (default 200: tests see registry changes at once). */
  healthIntervalMs?: number;
}

/** One line a {@link recordingLogger} kept. */
export interface LoggedLine {
  obj: unknown;
  msg: unknown;
}

/** A logger that keeps its warnings and its info lines. */
export function recordingLogger(): Logger & { warnings: LoggedLine[]; infos: LoggedLine[] } {
  const warnings: LoggedLine[] = [];
  const infos: LoggedLine[] = [];
  return {
    ...silentLogger,
    warn: (obj: unknown, msg?: unknown) => {
      warnings.push({ obj, msg });
    },
    info: (obj: unknown, msg?: unknown) => {
      infos.push({ obj, msg });
    },
    warnings,
    infos,
  } as Logger & { warnings: LoggedLine[]; infos: LoggedLine[] };
}

/** Start an orchestrator with `configText` (YAML) on a free loopback port. */
export async function startGateway(
  configText: string,
  options: StartGatewayOptions = {},
): Promise<TestGateway> {
  const prefix = options.prefix ?? `test-${randomUUID()}`;
  const config = parseConfig(
    `${configText}\nregistry: {prefix: ${prefix}, healthIntervalMs: ${options.healthIntervalMs ?? 200}}\n`,
  );
  const useRedis = options.redis ?? true;
  const connect = () => {
    if (options.redisUrl === undefined)
      return new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: false });
    const connection = new Redis(options.redisUrl, { ...REDIS_CLIENT_OPTIONS });
    connection.on('error', () => undefined);
    return connection;
  };
  const redis = useRedis ? connect() : undefined;
  const subscriber = useRedis ? connect() : undefined;
  const executions: ChainExecution[] = [];
  const orchestrator = createOrchestrator({
    config,
    log: options.log ?? silentLogger,
    redis,
    subscriber,
    adminToken: options.adminToken,
    onAdminAction: options.onAdminAction,
    observer: {
      chainExecuted: (e) => {
        executions.push(e);
        options.observer?.chainExecuted(e);
      },
    },
  });
  await orchestrator.start();
  const listening = await listen(orchestrator.listener, {
    service: 'orchestrator',
    announce: false,
  });
  defer(async () => {
    await listening.close(100);
    await orchestrator.close();
    if (redis) {
      if (options.prefix === undefined) await deleteKeys(redis, `${prefix}:*`);
      redis.disconnect();
    }
    subscriber?.disconnect();
  });
  return {
    base: listening.url,
    mcpUrl: `${listening.url}/mcp`,
    server: listening.server,
    orchestrator,
    executions,
    prefix,
  };
}

/**
 * Serve kit interceptors on a loopback port (`port`, default a free one, e.g. the port of a
 * stopped service to restart it); returns the `/mcp` URL and a stop function.
 */
export async function serveInterceptors(
  interceptors: Interceptor[],
  { port = 0, ...options }: Partial<InterceptorHttpOptions> & { port?: number } = {},
): Promise<{ url: string; port: number; stop: () => Promise<void>; posts: () => number }> {
  const host = createInterceptorHost(interceptors);
  const { listener } = createInterceptorHttpApp(host, { name: 'test-interceptors', ...options });
  const listening = await listen(listener, { service: 'test', announce: false, port });
  let posts = 0;
  listening.server.on('request', (req: { method?: string }) => {
    if (req.method === 'POST') posts++;
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    listening.server.closeAllConnections();
    await listening.close(0);
  };
  defer(stop);
  return { url: `${listening.url}/mcp`, port: listening.port, stop, posts: () => posts };
}

/**
 * A gateway whose `auth:` is `auth` (a YAML flow mapping), in front of a fixture backend `fx`,
 * with an interceptor service that records the principal of each `tools/call` it sees.
 */
export async function gatewayRecordingPrincipals(
  auth: string,
  options: StartGatewayOptions = {},
): Promise<{ gateway: TestGateway; principals: unknown[] }> {
  const backend = await startHttpBackend({ name: 'fx' });
  defer(() => backend.close());
  const principals: unknown[] = [];
  const recorder = defineValidator({
    name: 'principal-recorder',
    hooks: [{ events: ['tools/call'], phase: 'request' }],
    handler: (_payload, ctx) => {
      principals.push(ctx.context.principal);
      return allow();
    },
  });
  const service = await serveInterceptors([recorder]);
  const gateway = await startGateway(
    `backends:\n  - {id: fx, url: "${backend.url}"}
interceptors:\n  - url: "${service.url}"
auth: ${auth}
`,
    { redis: false, ...options },
  );
  return { gateway, principals };
}

/** An MCP SDK client connected to `url`. */
export async function connectClient(
  url: string,
  options: {
    headers?: Record<string, string>;
    capabilities?: Record<string, unknown>;
    name?: string;
  } = {},
): Promise<Client> {
  const client = new Client(
    { name: options.name ?? 'test-client', version: '1.0.0' },
    { capabilities: options.capabilities ?? {} },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: options.headers ?? {} },
    }),
  );
  defer(() => client.close());
  return client;
}

/** The text of the first text content item of a tool result. */
export function textOf(result: unknown): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? [];
  return content.find((c) => c.type === 'text')?.text ?? '';
}

/** Poll `check` every 25 ms until it holds; fails after `timeoutMs` naming `what`. */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Listen on a loopback port (closed when the test ends); resolves with `http://127.0.0.1:port`. */
export async function listenLoopback(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A real audit producer on a BullMQ queue of its own, and what reached that queue. */
export interface TestAuditQueue {
  producer: AuditProducer;
  /** The queue's key prefix in Redis (everything the producer stored is under it). */
  prefix: string;
  /** Flush the producer, then every record in the queue, oldest job first, parsed as the worker parses them. */
  records(): Promise<AuditRecord[]>;
}

/** Start a {@link TestAuditQueue} on the local Redis; removed (keys, journal) after the test. */
export async function startAuditQueue(): Promise<TestAuditQueue> {
  const queueName = `audit-${randomUUID()}`;
  const prefix = `test-audit-${randomUUID()}`;
  const dir = mkdtempSync(join(tmpdir(), 'fleet-audit-'));
  const producer = createAuditProducer({
    connection: REDIS_URL,
    queue: queueName,
    prefix,
    journalPath: join(dir, 'journal.ndjson'),
    batchJobs: true,
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
  });
  defer(async () => {
    await producer.close();
    const redis = new Redis(REDIS_URL);
    await deleteKeys(redis, `${prefix}:*`);
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    producer,
    prefix,
    async records() {
      await producer.flush();
      const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
      const queue = new Queue(queueName, { connection, prefix });
      try {
        const jobs = await queue.getJobs(
          ['wait', 'active', 'delayed', 'prioritized', 'completed', 'failed'],
          0,
          -1,
          true,
        );
        // The orchestrator writes batch jobs ({records}); the worker's parse must accept each.
        return jobs
          .sort((a, b) => Number(a.timestamp) - Number(b.timestamp))
          .flatMap((job) =>
            ((job.data as { records?: unknown[] }).records ?? [job.data]).map((r) =>
              parseAuditRecord(r),
            ),
          );
      } finally {
        await queue.close();
        connection.disconnect();
      }
    },
  };
}

/** Pids of this process's children whose command line contains every one of `needles`. */
export function childrenMatching(needles: string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (!needles.every((n) => cmdline.some((arg) => arg.includes(n)))) continue;
      // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may contain spaces, so split after ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid) pids.push(Number(entry));
    } catch {
      // the process went away while we looked
    }
  }
  return pids;
}

/** True while a process `pid` exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
