/**
 * The orchestrator's configuration (`FLEET_CONFIG`, YAML, `${VAR}` expansion), parsed once
 * at the edge with zod. Defaults are documented on the schema. Unknown keys are errors
 * (with a "did you mean"): a misspelt `intercepters:` must not start a gateway that runs
 * no interceptors.
 */
import {
  expandVariables,
  parseServiceOverrides,
  type ServiceOverrides,
  withKeyHints,
} from '@fleet/core';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

const ResilienceSchema = z
  .strictObject({
    /** Budget for one backend call. */
    timeoutMs: z.number().int().positive().default(30_000),
    /** Retries for idempotent methods (lists, reads, gets); never for tools/call. */
    retries: z.number().int().min(0).max(10).default(0),
    breaker: z
      .strictObject({
        /** Consecutive failures that open the breaker. */
        failures: z.number().int().positive().default(5),
        /** How long the breaker stays open before a trial call. */
        resetMs: z.number().int().positive().default(10_000),
      })
      .prefault({}),
    /**
     * Most concurrent calls to this backend; as many more may wait, queued per principal and
     * served in turn; past that, the principal with the most waiting is refused (`FairGate`).
     */
    maxConcurrent: z.number().int().positive().default(64),
  })
  .prefault({});

const BackendSchema = z
  .strictObject({
    id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'letters, digits, ".", "_" and "-" only'),
    url: z.url().optional(),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    /**
     * A stdio backend's environment beyond the few variables every child gets (the MCP SDK's
     * default set: HOME, LOGNAME, PATH, SHELL, TERM, USER). The gateway's own environment
     * holds its secrets (FLEET_ADMIN_TOKEN, DATABASE_URL, PII_HMAC_KEY, ...), so a
     * third-party server gets nothing else of it unless named here or in `inheritEnv`.
     */
    env: z.record(z.string(), z.string()).default({}),
    /** Names of the gateway's environment variables a stdio backend also gets, when set. */
    inheritEnv: z.array(z.string().regex(/^[^=\0]+$/, 'an environment variable name')).default([]),
    cwd: z.string().optional(),
    headers: z.record(z.string(), z.string()).default({}),
    /** Namespace for this backend's tools, prompts and resources ("" = none). */
    prefix: z.string().default(''),
    resilience: ResilienceSchema,
  })
  .refine((b) => (b.url === undefined) !== (b.command === undefined), {
    message: 'a backend needs exactly one of "url" (Streamable HTTP) or "command" (stdio)',
  });

/** Whether a URL carries no user name or password (they would end up in logs). */
const withoutCredentials = (u: string) => {
  const url = new URL(u);
  return url.username === '' && url.password === '';
};

const InterceptorServiceSchema = z.strictObject({
  url: z.url().refine(withoutCredentials, {
    message: 'must not carry credentials: pass them as "token"',
  }),
  token: z.string().optional(),
  overrides: z.unknown().optional(),
});

const PrincipalSchema = z.strictObject({
  type: z.enum(['user', 'service', 'anonymous']).default('user'),
  id: z.string().min(1),
  claims: z.record(z.string(), z.unknown()).default({}),
});

/** RFC 6749 §3.3 scope-token: printable ASCII but space, `"` and `\`. */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

const ScopesSchema = z.array(
  z.string().regex(SCOPE_TOKEN, 'a scope is printable ASCII without spaces, " or \\'),
);

const AuthSchema = z
  .discriminatedUnion('mode', [
    z.strictObject({ mode: z.literal('none') }),
    z.strictObject({
      mode: z.literal('tokens'),
      tokens: z
        .array(z.strictObject({ token: z.string().min(8), principal: PrincipalSchema }))
        .min(1),
    }),
    z.strictObject({
      mode: z.literal('jwt'),
      issuer: z.string().min(1),
      /**
       * An `aud` the gateway accepts besides `resource` (e.g. a client id an identity
       * provider puts there).
       */
      audience: z.string().min(1).optional(),
      jwksUrl: z.url().refine(withoutCredentials, {
        message: 'must not carry credentials (a key set is public)',
      }),
      /** Claims copied into `principal.claims` (default: all). */
      claims: z.array(z.string()).optional(),
      /**
       * The gateway's MCP endpoint as clients reach it (`https://gw.example.com/mcp`): the
       * `resource` of its OAuth protected resource metadata (RFC 9728), which MCP clients
       * request tokens for (RFC 8707); a token whose `aud` is it is accepted. Default:
       * `http://<Host of the request>/mcp`; set it when clients reach the gateway through
       * another URL (TLS at a proxy, another path).
       */
      resource: z
        .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
        .refine((u) => !u.includes('#'), { message: 'must not have a fragment' })
        .optional(),
      /** Where clients get tokens (the metadata's `authorization_servers`); default: `[issuer]`. */
      authorizationServers: z
        .array(z.url({ protocol: /^https?$/ }))
        .min(1)
        .optional(),
      /**
       * Scopes every token must carry (its `scope` or `scp` claim): a token without them
       * gets HTTP 403 `insufficient_scope`. Advertised in the metadata and in challenges.
       */
      scopes: ScopesSchema.optional(),
      /**
       * With these, the admin API also admits a JWT (same issuer, keys and audience) that
       * carries every one of them, besides FLEET_ADMIN_TOKEN when set: e.g. `[fleet:admin]`.
       */
      adminScopes: ScopesSchema.min(1).optional(),
    }),
  ])
  .default({ mode: 'none' });

/** The whole configuration file. */
export const OrchestratorConfigSchema = z
  .strictObject({
    backends: z.array(BackendSchema).default([]),
    interceptors: z.array(InterceptorServiceSchema).default([]),
    chain: z
      .strictObject({
        /** Budget of one phase of the chain. */
        timeoutMs: z.number().int().positive().default(2000),
        /** How an abort of `tools/call` reaches the client. */
        denyAs: z.enum(['error', 'toolResult']).default('error'),
        /**
         * Audit-mode invocations start in batches at most this many ms after their call
         * (0: each at once). They never delay a call; batching wakes observers less often.
         */
        auditBatchMs: z.number().int().min(0).max(1000).default(50),
        /**
         * Most audit-mode invocations of one interceptor service in flight at once (waiting
         * for their batch or sent and not yet over), over every call of this gateway; each
         * holds its payload. Past it an audit-mode invocation is not started and is counted
         * `failed` (reason `overloaded`), so a hung observer cannot fill the gateway's memory.
         */
        maxAuditInFlight: z.number().int().min(1).default(1000),
        /**
         * Invocations of concurrent calls that reach one interceptor service in the same
         * event-loop turn travel as one `fleet/interceptor/invokeBatch` (to services that
         * declare it) while the service has one in flight; one that finds it idle goes at
         * once. Much cheaper under load; a slow item delays the answers of its batch.
         */
        coalesceInvocations: z.boolean().default(true),
        /**
         * Request phase: start the mutators together with the validators (one round trip
         * less per call). Same outcome; mutator services also see requests that end up
         * denied, which is why it is off by default.
         */
        speculativeMutators: z.boolean().default(false),
      })
      .prefault({}),
    audit: z
      .strictObject({
        queue: z.string().min(1).default('fleet-audit'),
        enabled: z.boolean().default(true),
      })
      .prefault({}),
    auth: AuthSchema,
    limits: z
      .strictObject({
        maxBodyBytes: z
          .number()
          .int()
          .positive()
          .default(4 * 1024 * 1024),
        maxResponseBytes: z
          .number()
          .int()
          .positive()
          .default(1024 * 1024),
        /**
         * Most bytes one message from a backend may take (an HTTP JSON body or one event of
         * its stream, a stdio line); past it the gateway stops reading that message, so a
         * runaway backend cannot exhaust its memory, and the call fails with -32603 naming
         * this limit.
         */
        maxBackendMessageBytes: z
          .number()
          .int()
          .min(1024)
          .default(64 * 1024 * 1024),
        /**
         * Most bytes written to one client's SSE stream and not yet read by it. Past it the
         * client is not reading: its standalone (GET) stream is closed (it may open another)
         * and notifications for its requests' streams are dropped until it catches up, so one
         * stalled client cannot grow the gateway's memory with what others cause.
         */
        maxClientBacklogBytes: z
          .number()
          .int()
          .min(65_536)
          .default(8 * 1024 * 1024),
        /**
         * How often the gateway writes an SSE comment on a session's quiet streams: its
         * standalone (GET) stream, and a request not answered within one to two intervals
         * (its answer then comes as SSE). Proxies and load balancers close a response quiet
         * for their idle timeout (often 60 s), which would cut long tool calls and the GET
         * stream; 0 turns it off.
         */
        sseKeepAliveMs: z.number().int().min(0).default(15_000),
        /**
         * Longest time a client may take to send a whole request; a slower one (a slow-loris
         * body) gets HTTP 408 and its connection closed. Also the longest a client may take
         * none of a long answer (over 64 KiB, sent in pieces): past it the connection is
         * closed, so a client that does not read cannot hold the answer in the gateway's
         * memory. How long streams last is not limited by it.
         */
        requestTimeoutMs: z.number().int().min(100).default(30_000),
        /**
         * Deepest nesting of a request's params (`{}` is 1 deep); deeper gets -32602 naming
         * the path. Below the limits of the fleet's interceptor services (the PII engine's 64,
         * the kit's 256), so they never refuse what the gateway let through.
         */
        maxDepth: z.number().int().min(8).max(200).default(60),
        /**
         * A session with no request for this long, nothing in flight and no open stream is
         * closed (its client then gets 404 and starts a new one, as the MCP transport says).
         */
        sessionIdleMs: z
          .number()
          .int()
          .min(1000)
          .default(30 * 60 * 1000),
        /** Longest time a client may take to send the request headers. */
        headersTimeoutMs: z.number().int().min(100).default(10_000),
        /**
         * Most requests one session may have in flight (sent, not yet answered, cancelled or
         * dropped by a closed connection); `ping`, notifications and responses to the
         * gateway's requests do not count. One more is answered at once with -32603
         * `{reason: "overloaded", limit, max}` and never forwarded, and the session goes on:
         * every session shares each backend's `resilience.maxConcurrent` slots, which one
         * client must not fill. A stateless (2026-07-28) principal with an id has the same
         * budget over all its requests; anonymous stateless requests have none.
         */
        maxInFlightPerSession: z.number().int().min(1).max(100_000).default(32),
        /**
         * Most sessions one principal with an id (`auth.mode` tokens or jwt) may hold at once;
         * one more `initialize` gets HTTP 429 + -32600 `{reason: "limit_exceeded", limit, max}`.
         * Ending a session (DELETE, idle expiry) frees its slot. Anonymous clients (`auth.mode:
         * none`, a JWT without `sub`) are one principal, so it does not apply to them; the
         * gateway's 10,000-session cap does.
         */
        maxSessionsPerPrincipal: z.number().int().min(1).max(10_000).default(100),
      })
      .prefault({}),
    security: z
      .strictObject({
        /** Host header values accepted besides loopback (DNS-rebinding protection). */
        allowedHosts: z.array(z.string()).default([]),
        /** Origin header values accepted besides loopback ones. */
        allowedOrigins: z.array(z.string()).default([]),
      })
      .prefault({}),
    tools: z
      .strictObject({
        /** Globs on the tool names clients see; absent = every tool. */
        allow: z.array(z.string().min(1)).optional(),
        /** Aggregated tool name → the name clients see and call. */
        rename: z.record(z.string().min(1), z.string().min(1)).default({}),
        /** Name clients see → the description they see. */
        describe: z.record(z.string().min(1), z.string()).default({}),
      })
      .prefault({}),
    registry: z
      .strictObject({
        /** Redis key prefix for registrations and their pub/sub channel. */
        prefix: z.string().min(1).default('fleet'),
        /** How often unhealthy services are retried. */
        healthIntervalMs: z.number().int().positive().default(5000),
      })
      .prefault({}),
  })
  .superRefine((config, ctx) => {
    const ids = new Set<string>();
    const prefixes = new Set<string>();
    config.backends.forEach((backend, index) => {
      if (ids.has(backend.id))
        ctx.addIssue({
          code: 'custom',
          path: ['backends', index, 'id'],
          message: `duplicate backend id "${backend.id}"`,
        });
      ids.add(backend.id);
      if (config.backends.length > 1 && prefixes.has(backend.prefix)) {
        ctx.addIssue({
          code: 'custom',
          path: ['backends', index, 'prefix'],
          message: `prefix "${backend.prefix}" must be unique when there is more than one backend`,
        });
      }
      prefixes.add(backend.prefix);
    });
    config.interceptors.forEach((service, index) => {
      try {
        parseServiceOverrides(service.overrides);
      } catch (error) {
        ctx.addIssue({
          code: 'custom',
          path: ['interceptors', index, 'overrides'],
          message: (error as Error).message,
        });
      }
    });
  });

/** A parsed configuration. */
export type OrchestratorConfig = z.output<typeof OrchestratorConfigSchema>;
/** One backend's configuration. */
export type BackendConfig = OrchestratorConfig['backends'][number];
/** The auth section. */
export type AuthConfig = OrchestratorConfig['auth'];

/** A configuration that could not be used; `message` is ready to print. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/**
 * Replace `${VAR}` and `${VAR:-default}` in every string of a parsed YAML document. An
 * unset variable without a default becomes the empty string.
 */
export function expandEnv(
  value: unknown,
  env: Readonly<Record<string, string | undefined>>,
): unknown {
  if (typeof value === 'string') return expandVariables(value, env);
  if (Array.isArray(value)) return value.map((v) => expandEnv(v, env));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expandEnv(v, env)]));
  }
  return value;
}

/** `${VAR}` without a default, as `expandVariables` reads it. */
const BARE_VARIABLE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * The variables that expanded to nothing (unset or empty, no default), by the JSON of the
 * path of the string that named them: a field they left empty and invalid is reported
 * with their names, not as a bare `Invalid URL`.
 */
function unsetVariables(
  value: unknown,
  env: Readonly<Record<string, string | undefined>>,
  path: PropertyKey[] = [],
  found = new Map<string, string[]>(),
): Map<string, string[]> {
  if (typeof value === 'string') {
    const names = [...value.matchAll(BARE_VARIABLE)]
      .map((m) => m[1] as string)
      .filter((name) => env[name] === undefined || env[name] === '');
    if (names.length > 0) found.set(JSON.stringify(path), [...new Set(names)]);
  } else if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) unsetVariables(v, env, [...path, i], found);
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) unsetVariables(v, env, [...path, k], found);
  }
  return found;
}

/** A string that is one `${VAR}` or `${VAR:-default}` and nothing else. */
const WHOLE_VARIABLE = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$/;

/**
 * `expanded` with the number and boolean fields that are one `${VAR}` in `raw` converted
 * from the strings expansion made of them (`timeoutMs: ${CHAIN_TIMEOUT_MS}`): expansion
 * happens after YAML parsing, so `500` arrives as a string. Undefined when there is none.
 */
function typedVariables(raw: unknown, expanded: unknown, error: z.ZodError): unknown {
  let copy: unknown;
  for (const issue of error.issues) {
    if (
      issue.code !== 'invalid_type' ||
      (issue.expected !== 'number' && issue.expected !== 'boolean')
    )
      continue;
    const at = (root: unknown) =>
      issue.path.reduce<unknown>(
        (v, key) => (v as Record<PropertyKey, unknown> | undefined)?.[key],
        root,
      );
    const source = at(raw);
    if (typeof source !== 'string' || !WHOLE_VARIABLE.test(source)) continue;
    const text = at(expanded);
    if (typeof text !== 'string') continue;
    const value =
      issue.expected === 'number'
        ? /^-?\d+(\.\d+)?$/.test(text)
          ? Number(text)
          : undefined
        : text === 'true'
          ? true
          : text === 'false'
            ? false
            : undefined;
    if (value === undefined) continue;
    copy ??= structuredClone(expanded);
    let parent = copy as Record<PropertyKey, unknown>;
    for (const key of issue.path.slice(0, -1)) parent = parent[key] as Record<PropertyKey, unknown>;
    parent[issue.path[issue.path.length - 1] as PropertyKey] = value;
  }
  return copy;
}

/** Parse a configuration document (already-loaded YAML text). @throws {ConfigError} */
export function parseConfig(
  text: string,
  env: Readonly<Record<string, string | undefined>> = {},
): OrchestratorConfig {
  let raw: unknown;
  try {
    raw = text.trim() === '' ? {} : parseYaml(text);
  } catch (error) {
    throw new ConfigError(`FLEET_CONFIG is not valid YAML: ${(error as Error).message}`);
  }
  const expanded = expandEnv(raw ?? {}, env);
  let parsed = OrchestratorConfigSchema.safeParse(expanded);
  const typed = parsed.success ? undefined : typedVariables(raw, expanded, parsed.error);
  if (typed !== undefined) parsed = OrchestratorConfigSchema.safeParse(typed);
  if (parsed.success) return parsed.data;
  const unset = unsetVariables(raw, env);
  const error = new z.ZodError(
    withKeyHints(OrchestratorConfigSchema, parsed.error).issues.map((issue) => {
      const names = unset.get(JSON.stringify(issue.path));
      if (names === undefined) return issue;
      const list = names.map((name) => `\${${name}}`).join(', ');
      return {
        ...issue,
        message: `${issue.message} (${list} ${names.length === 1 ? 'is' : 'are'} not set)`,
      };
    }),
  );
  throw new ConfigError(`invalid FLEET_CONFIG:\n${z.prettifyError(error)}`);
}

/** The overrides of a configured interceptor service, parsed. */
export function overridesOf(service: OrchestratorConfig['interceptors'][number]): ServiceOverrides {
  return parseServiceOverrides(service.overrides);
}
