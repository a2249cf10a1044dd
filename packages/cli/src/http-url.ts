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
