/**
 * Waiting, at start-up, for a client that connects in the background (an ioredis client):
 * a service that answers before its store is connected treats its first requests as "store
 * unavailable" (fail-open pins or rate limits, or refusals), though the store is merely
 * still connecting.
 */

/** What {@link whenConnected} needs of a client: ioredis's `status` and events. */
export interface ConnectingClient {
  readonly status: string;
  once(event: 'ready', listener: () => void): unknown;
  off(event: 'ready', listener: () => void): unknown;
}

/**
 * Resolves `true` once `client` is ready (at once if it is), `false` after `timeoutMs`
 * without it: the caller then starts anyway and says so; the client keeps reconnecting.
 */
export function whenConnected(client: ConnectingClient, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const ready = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      client.off('ready', ready);
      resolve(false);
    }, timeoutMs);
    timer.unref();
    client.once('ready', ready);
  });
}
