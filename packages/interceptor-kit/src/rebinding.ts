/**
 * The DNS-rebinding check (MCP Streamable HTTP: a server must refuse a foreign `Origin` with
 * 403), one rule for kit services and the orchestrator: a web page whose name was rebound to
 * 127.0.0.1 must not reach a loopback service through a browser.
 */
import type { IncomingMessage } from 'node:http';

/**
 * Whether `name` (a host name or listen address: `localhost`, `127.x.y.z`, `::1` bare or in
 * brackets, any case) names this machine's loopback interface.
 */
export function isLoopbackName(name: string): boolean {
  const bare = name.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return bare === 'localhost' || bare === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare);
}

/** The host name of a Host header (`[::1]:8081` → `[::1]`, `localhost:8081` → `localhost`). */
function hostnameOf(host: string): string {
  if (host.startsWith('[')) return host.slice(0, host.indexOf(']') + 1);
  return host.split(':')[0] ?? '';
}

/** Whether a socket's local address is loopback (IPv4-mapped included, as dual-stack gives it). */
function isLoopbackSocket(address: string | undefined): boolean {
  return (
    address !== undefined &&
    (address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.'))
  );
}

function isLoopbackOrigin(origin: string): boolean {
  try {
    return isLoopbackName(new URL(origin).hostname);
  } catch {
    return false;
  }
}

/** `items` as a set of lower-cased strings (an origin without its trailing slash). */
function lowerSet(items: readonly string[]): ReadonlySet<string> {
  return new Set(items.map((item) => item.toLowerCase().replace(/\/+$/, '')));
}

/** Options for {@link rebindingGuard}. */
export interface RebindingGuardOptions {
  /** Hosts served besides loopback ones: a host name (`gw.internal`) or a `host:port`, any case. */
  allowedHosts?: readonly string[];
  /** Origins (`https://console.example.com`) served besides loopback ones, any case. */
  allowedOrigins?: readonly string[];
  /**
   * Which requests must name an allowed `Host`: `always`, or only those on a connection that
   * arrived on a loopback address (`loopback-connections`; elsewhere, a pod IP or
   * `HOST=0.0.0.0`, callers reach the service by names of their own, and a request without a
   * `Host` passes).
   */
  hostCheck: 'always' | 'loopback-connections';
  /** Whether the `Origin` is checked too (default true; not for documents any origin may read). */
  checkOrigin?: boolean;
}

/**
 * A check of a request's `Host` and `Origin` (browsers send one; the orchestrator and SDK
 * clients do not): the reason to refuse it with 403, or undefined. Loopback names and the
 * allowed hosts and origins pass.
 */
export function rebindingGuard(
  options: RebindingGuardOptions,
): (req: IncomingMessage) => string | undefined {
  const { hostCheck, checkOrigin = true } = options;
  const allowedHosts = lowerSet(options.allowedHosts ?? []);
  const allowedOrigins = lowerSet(options.allowedOrigins ?? []);

  const hostAllowed = (host: string): boolean => {
    const lower = host.toLowerCase();
    const name = hostnameOf(lower);
    return isLoopbackName(name) || allowedHosts.has(lower) || allowedHosts.has(name);
  };

  return (req) => {
    const { host, origin } = req.headers;
    const checkHost =
      hostCheck === 'always' || (host !== undefined && isLoopbackSocket(req.socket.localAddress));
    if (checkHost && !hostAllowed(host ?? ''))
      return `Forbidden: Host "${host ?? ''}" is not allowed`;
    if (
      checkOrigin &&
      origin !== undefined &&
      !allowedOrigins.has(origin.toLowerCase()) &&
      !isLoopbackOrigin(origin)
    )
      return `Forbidden: Origin "${origin}" is not allowed`;
    return undefined;
  };
}
