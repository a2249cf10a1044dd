/**
 * The URLs the CLI is given: a service's MCP endpoint (`fleet register`) and the base URLs of
 * the orchestrator and the audit API (`--orchestrator`, `--audit`). Checked here, before
 * anything is sent, so a bad one is a usage error (exit 2) in one line.
 */
import { CliError } from './errors.ts';

/**
 * `raw` as a URL if it is an absolute http(s) URL with a host (the WHATWG parser also
 * refuses spaces in the host, an unclosed IPv6 bracket and ports above 65535).
 * @throws {CliError} `USAGE` naming `what` and an example.
 */
export function parseHttpUrl(raw: string, what: string, example: string): URL {
  let url: URL;
  try {
    // `http:host` parses too (as http://host/); ask for the usual spelling.
    if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(raw)) throw new TypeError('no scheme://');
    url = new URL(raw);
  } catch {
    throw new CliError('USAGE', `${what} "${raw}" is not a valid URL (e.g. ${example})`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CliError('USAGE', `${what} "${raw}" must be an http(s) URL (e.g. ${example})`);
  if (url.hostname === '')
    throw new CliError('USAGE', `${what} "${raw}" has no host (e.g. ${example})`);
  return url;
}

/**
 * The ports `fetch` will not connect to (the Fetch standard's "bad port" list, as Node's
 * undici has it): no `fleet` command could reach a service there.
 */
const FETCH_BAD_PORTS: ReadonlySet<number> = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102,
  103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465,
  512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993,
  995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668,
  6669, 6679, 6697, 10080,
]);

/**
 * Why `fetch` (so the CLI, and browsers) cannot reach `port`, or undefined when it can. A
 * URL on such a port is not refused when given (tests and scripts use port 1 for "never
 * asked"); a request that fails there says why instead of "is the fleet running?".
 */
export function fetchRefusesPort(port: number): string | undefined {
  return FETCH_BAD_PORTS.has(port)
    ? `port ${port} is one fetch refuses to connect to (a "bad port" in the Fetch standard)`
    : undefined;
}

/**
 * A service's base URL from `raw`, without a trailing slash. The MCP endpoint `fleet up`
 * prints (`<base>/mcp`) is taken for its base, since that is the URL users have at hand.
 * @throws {CliError} `USAGE` for anything but an http(s) URL with a host, or one with a query.
 */
export function parseBaseUrl(raw: string, option: string, example: string): string {
  const url = parseHttpUrl(raw, option, example);
  if (url.search !== '' || url.hash !== '')
    throw new CliError(
      'USAGE',
      `${option} "${raw}" must be a base URL, without ?query or #fragment (e.g. ${example})`,
    );
  return url.href.replace(/\/+$/, '').replace(/\/mcp$/, '');
}
