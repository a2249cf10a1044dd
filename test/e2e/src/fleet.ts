/**
 * The shared set-up of the end-to-end files: the real fleet as processes (`startLocalFleet`
 * from `@fleet/cli`) on real Redis with a unique audit queue and registry prefix, optionally
 * a real PostgreSQL database per run (else PGlite under the temp state directory), an
 * in-test OTLP receiver, a stdio fixture backend and server-everything. `stop()` removes
 * everything it created, also after a start that failed half-way.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CliIO, type LocalFleet, runProgram, startLocalFleet } from '@fleet/cli';
import { type OtlpReceiver, startOtlpReceiver } from '@fleet/telemetry/testing';
import {
  cleanupStack,
  deleteKeys,
  type EverythingServer,
  startEverything,
  stdioBackendCommand,
} from '@fleet/test-fixtures';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Redis } from 'ioredis';
import pg from 'pg';

/** The PostgreSQL server the suite creates its per-run databases on. */
export const ADMIN_DB = 'postgres://postgres@127.0.0.1:5432/test';

/** Bearer tokens of the `auth: tokens` section {@link TOKENS_AUTH}. */
export const ALICE_TOKEN = 'alice-e2e-token-1';
/** Bob has no roles: a guest for the demo policy (no `delete_record`). */
export const BOB_TOKEN = 'bob-e2e-token-123';

/** An orchestrator `auth` section: Alice is an admin, Bob a guest. */
export const TOKENS_AUTH = `auth:
  mode: tokens
  tokens:
    - {token: ${ALICE_TOKEN}, principal: {type: user, id: alice, claims: {roles: [admin]}}}
    - {token: ${BOB_TOKEN}, principal: {type: user, id: bob, claims: {roles: []}}}`;

/** What to start besides the fleet itself. */
export interface E2eFleetOptions {
  /** A fresh PostgreSQL database for the audit store (else PGlite in the state directory). */
  postgres?: boolean;
  /** The audit store's PostgreSQL URL, a database the test owns (e.g. a private server it stops). */
  databaseUrl?: string;
  /** An in-test OTLP receiver the services export their traces to. */
  otlp?: boolean;
  /** The stdio fixture backend (`fx_`) and server-everything (`ev_`) as more backends. */
  extraBackends?: boolean;
  /** Top-level YAML for the orchestrator config. Default {@link TOKENS_AUTH}. */
  extraConfig?: string;
  /**
   * The fleet's Redis (`REDIS_URL`), e.g. a private `redis-server` a test stops and starts.
   * Default the shared one on 127.0.0.1:6379, whose keys of this run `stop()` removes.
   */
  redisUrl?: string;
  /** The policy-validator's policy (YAML, `POLICY_FILE`). Default the demo policy. */
  policy?: string;
}

/** A running fleet and what was started with it. */
export interface E2eFleet {
  fleet: LocalFleet;
  /** Random id of this run (names of the queue and the database). */
  run: string;
  /** The audit queue (`AUDIT_QUEUE`). */
  queue: string;
  /** The orchestrator's Redis prefix for runtime registrations. */
  registryPrefix: string;
  /** The PostgreSQL URL of the audit store, when `postgres` was asked for. */
  databaseUrl?: string;
  receiver?: OtlpReceiver;
  everything?: EverythingServer;
  /** Stop every process and remove the Redis keys, the database and the state directory. */
  stop(): Promise<void>;
}

/** Start the fleet for one test file. */
export async function startE2eFleet(options: E2eFleetOptions = {}): Promise<E2eFleet> {
  const run = randomBytes(4).toString('hex');
  const queue = `e2e-${run}`;
  const database = `e2e_${run}`;
  const stateDir = mkdtempSync(join(tmpdir(), 'fleet-e2e-'));
  const cleanups = cleanupStack('e2e fleet');
  let registryPrefix = '';

  const stop = () => cleanups.run();

  // Registered first, so it runs last: after every process has stopped.
  cleanups.push(() => rm(stateDir, { recursive: true, force: true }));
  cleanups.push(async () => {
    if (options.redisUrl) return; // a private Redis: its owner removes it
    const redis = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: true });
    try {
      await redis.connect();
      for (const pattern of [`bull:${queue}:*`, `bull:${queue}-retention:*`])
        await deleteKeys(redis, pattern);
      if (registryPrefix) await deleteKeys(redis, `${registryPrefix}:*`);
    } finally {
      redis.disconnect();
    }
  });

  try {
    let databaseUrl = options.databaseUrl;
    if (options.postgres && databaseUrl === undefined) {
      const admin = new pg.Client({ connectionString: ADMIN_DB });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${database}`);
      } finally {
        await admin.end();
      }
      cleanups.push(async () => {
        const again = new pg.Client({ connectionString: ADMIN_DB });
        await again.connect();
        try {
          await again.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
        } finally {
          await again.end();
        }
      });
      databaseUrl = `postgres://postgres@127.0.0.1:5432/${database}`;
    }
    let receiver: OtlpReceiver | undefined;
    if (options.otlp) {
      const started = await startOtlpReceiver();
      receiver = started;
      cleanups.push(() => started.close());
    }
    let everything: EverythingServer | undefined;
    const backends: string[] = [];
    if (options.extraBackends) {
      const started = await startEverything();
      everything = started;
      cleanups.push(() => started.close());
      const stdio = stdioBackendCommand({ name: 'fx' });
      backends.push(
        `  - {id: fx, command: ${JSON.stringify(stdio.command)}, args: ${JSON.stringify(stdio.args)}, prefix: "fx_"}`,
        `  - {id: everything, url: "${started.url}", prefix: "ev_"}`,
      );
    }

    const env: Record<string, string | undefined> = {
      ...process.env,
      AUDIT_QUEUE: queue,
      LOG_LEVEL: 'warn',
      DATABASE_URL: databaseUrl,
      ...(options.redisUrl ? { REDIS_URL: options.redisUrl } : {}),
    };
    if (options.policy !== undefined) {
      env.POLICY_FILE = join(stateDir, 'test-policy.yaml');
      writeFileSync(env.POLICY_FILE, options.policy);
    }
    if (receiver) {
      env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
      env.OTEL_BSP_SCHEDULE_DELAY = '100';
    }
    const fleet = await startLocalFleet({
      port: 0,
      stateDir,
      restart: true,
      env,
      ...(backends.length > 0 ? { extraBackends: backends.join('\n') } : {}),
      extraConfig: options.extraConfig ?? TOKENS_AUTH,
    });
    cleanups.push(() => fleet.stop());
    registryPrefix =
      /registry: \{prefix: "([^"]+)"\}/.exec(
        readFileSync(join(stateDir, 'fleet.yaml'), 'utf8'),
      )?.[1] ?? '';

    return {
      fleet,
      run,
      queue,
      registryPrefix,
      ...(databaseUrl ? { databaseUrl } : {}),
      ...(receiver ? { receiver } : {}),
      ...(everything ? { everything } : {}),
      stop,
    };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

/** What one in-process `fleet` run printed and how it ended. */
export interface FleetRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run the `fleet` command in process with captured output and an empty environment. */
export async function runFleet(argv: readonly string[]): Promise<FleetRun> {
  let stdout = '';
  let stderr = '';
  const io: CliIO = {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    env: {},
    cwd: process.cwd(),
    fetch,
  };
  const code = await runProgram(argv, io);
  return { code, stdout, stderr };
}

/** An official SDK client connected to `mcpUrl` (Streamable HTTP) with `token` as its bearer. */
export async function connectClient(mcpUrl: string, token: string, name = 'e2e'): Promise<Client> {
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(mcpUrl), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** The text of a tool result's content blocks, joined by spaces. */
export const resultText = (result: unknown): string =>
  ((result as { content?: Array<{ text?: string }> }).content ?? [])
    .map((c) => c.text ?? '')
    .join(' ');
