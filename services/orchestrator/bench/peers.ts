/**
 * Starting the processes a benchmark measures (gateway.bench.ts, ab.ts, soak.ts): each peer is
 * its own process, found through the fleet's start-up line, and every one started is stopped
 * at the end.
 */
import { type ServiceProcess, startServiceProcess } from '@fleet/test-fixtures';
import { Redis } from 'ioredis';

/**
 * How a fleet process runs: with the images' node flags (deploy/docker/Dockerfile; V8's memory
 * reducer off for the request-path services), compiled (`.js`) or under tsx.
 */
export function fleetCommand(
  script: string,
  rest: readonly string[] = [],
  flags: readonly string[] = [],
): { command: string; args: string[] } {
  return {
    command: process.execPath,
    args: [
      '--no-memory-reducer',
      ...flags,
      ...(script.endsWith('.js') ? [] : ['--import', 'tsx']),
      script,
      ...rest,
    ],
  };
}

export interface PeerOptions {
  env?: Record<string, string>;
  cwd?: string;
  /** Each chunk the process writes to stderr. */
  onStderr?: (chunk: string) => void;
}

/** The processes one benchmark started, and how it starts one more. */
export interface Peers {
  readonly started: readonly ServiceProcess[];
  start(
    command: { command: string; args: string[] },
    options?: PeerOptions,
  ): Promise<ServiceProcess>;
  /**
   * Stop every process started, newest first, then delete the run's keys in the local Redis
   * (those containing `redisPrefix`: its gateways' audit queues, which no worker reads, and
   * registries).
   */
  stopAll(redisPrefix?: string): Promise<void>;
}

export function peers(): Peers {
  const started: ServiceProcess[] = [];
  return {
    started,
    async start(command, { env = {}, cwd, onStderr } = {}) {
      const peer = await startServiceProcess({
        ...command,
        // Quiet, with no trace export, on a port the OS picks (read off the start-up line).
        env: { PORT: '0', LOG_LEVEL: 'warn', OTEL_TRACES_EXPORTER: 'none', ...env },
        ...(cwd ? { cwd } : {}),
        ...(onStderr ? { onStderr } : {}),
        readyTimeoutMs: 30_000,
      });
      started.push(peer);
      return peer;
    },
    async stopAll(redisPrefix) {
      for (const peer of [...started].reverse()) await peer.stop().catch(() => undefined);
      if (redisPrefix === undefined) return;
      const redis = new Redis({ host: '127.0.0.1', port: 6379 });
      const keys = await redis.keys(`*${redisPrefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    },
  };
}
