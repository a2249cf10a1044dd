/**
 * The MCP request methods a fleet process knows by name. Telemetry shows a method (a metric
 * label, a span attribute, a log field) as it is only when it is one of these: a client can
 * send any method name, and a label value per made-up name would grow `/metrics` without bound
 * or put the client's text (a 1 MiB string, an e-mail address) where nobody scrubs it.
 *
 * Written out by hand because this package depends on zod only. It is the union of the request
 * methods of both directions in every revision the fleet serves and the interceptor
 * extension's methods; `@fleet/interceptor-kit`'s `test/labels.test.ts` checks that every
 * request method the MCP SDK's schemas name is here, so an SDK upgrade that adds one fails
 * there until it is added.
 */
import { InterceptorMethod } from './wire.ts';

/** The MCP request methods, both directions, every served revision, plus the interceptor extension's. */
export const KNOWN_MCP_METHODS: ReadonlySet<string> = new Set([
  // Client to server, every revision.
  'initialize',
  'ping',
  'tools/list',
  'tools/call',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'completion/complete',
  'logging/setLevel',
  // Tasks (either direction).
  'tasks/get',
  'tasks/result',
  'tasks/list',
  'tasks/cancel',
  // Client to server, 2026-07-28.
  'server/discover',
  'subscriptions/listen',
  // Server to client.
  'sampling/createMessage',
  'elicitation/create',
  'roots/list',
  // The interceptor extension (`fleet/interceptor/invokeBatch` is the gateway's own call to a
  // service, never a client's).
  InterceptorMethod.LIST,
  InterceptorMethod.INVOKE,
]);

/** True when `method` is one of {@link KNOWN_MCP_METHODS}, so telemetry may show it as it is. */
export function isKnownMcpMethod(method: string): boolean {
  return KNOWN_MCP_METHODS.has(method);
}
