/** Redis for the service tests: an unreachable one, and a private one. */
import { spawn } from 'node:child_process';
import { freePort } from '@fleet/test-fixtures';
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

/**
 * A `redis-server` of this test's own (no persistence) on a free port: a store no other test
 * shares, for a process that uses the default key names. Killed on dispose.
 */
export async function privateRedis(): Promise<{ url: string } & AsyncDisposable> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const dispose = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 5_000;
  for (;;) {
    const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null });
    probe.on('error', () => undefined);
    const up = await probe.connect().then(
      () => probe.ping(),
      () => undefined,
    );
    probe.disconnect();
    if (up === 'PONG') break;
    if (Date.now() > deadline) {
      await dispose();
      throw new Error(`redis-server on port ${port} did not answer within 5 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { url, [Symbol.asyncDispose]: dispose };
}
