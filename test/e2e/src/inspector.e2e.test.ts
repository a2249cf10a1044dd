/**
 * The running fleet driven by the official MCP Inspector CLI as a child process
 * (`mcp-inspector --cli <url> --method ... --header "Authorization: Bearer ..." --format
 * json`): per-principal tools/list, PII redaction, policy denials and the CLI's exit codes.
 * The Inspector's output is captured, never printed; it runs with a temporary HOME so its
 * `~/.mcp-inspector` state stays out of the real one.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { freePort } from '@fleet/test-fixtures';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALICE_TOKEN, BOB_TOKEN, type E2eFleet, startE2eFleet } from './fleet.ts';

const require = createRequire(import.meta.url);
const INSPECTOR = join(
  dirname(require.resolve('@modelcontextprotocol/inspector/package.json')),
  'clients/launcher/build/index.js',
);

let e2e: E2eFleet;
let home: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'fleet-e2e-inspector-home-'));
  e2e = await startE2eFleet();
}, 180_000);

afterAll(async () => {
  await e2e?.stop();
  if (home) await rm(home, { recursive: true, force: true });
}, 60_000);

/** How one Inspector CLI run ended. */
interface InspectorRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `mcp-inspector --cli <url> ...args --format json`, output captured. */
function inspector(url: string, args: readonly string[]): Promise<InspectorRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, NO_COLOR: '1' };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [INSPECTOR, '--cli', url, ...args, '--format', 'json'],
      { env, cwd: home, timeout: 45_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const bearer = (token: string) => ['--header', `Authorization: Bearer ${token}`];

/** The result object of a successful `--format json` run. */
function resultOf(run: InspectorRun): Record<string, unknown> {
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
  return (JSON.parse(run.stdout) as { result: Record<string, unknown> }).result;
}

/** The error envelope a failed run prints on stderr. */
function errorOf(run: InspectorRun): { code: string; message: string } {
  return (JSON.parse(run.stderr) as { error: { code: string; message: string } }).error;
}

async function toolNames(token: string): Promise<string[]> {
  const run = await inspector(e2e.fleet.mcpUrl, ['--method', 'tools/list', ...bearer(token)]);
  const { tools } = resultOf(run) as { tools: Array<{ name: string }> };
  return tools.map((t) => t.name);
}

describe('the fleet through the MCP Inspector CLI', { timeout: 60_000 }, () => {
  it('lists the tools each principal may use: the guest does not see delete_record', async () => {
    const [guest, admin] = await Promise.all([toolNames(BOB_TOKEN), toolNames(ALICE_TOKEN)]);
    expect(guest).toEqual(
      expect.arrayContaining(['lookup_customer', 'send_email', 'bank_transfer', 'get_weather']),
    );
    expect(guest).not.toContain('delete_record');
    expect(admin).toContain('delete_record');
  });

  it('returns lookup_customer with the PII redacted', async () => {
    const run = await inspector(e2e.fleet.mcpUrl, [
      '--method',
      'tools/call',
      '--tool-name',
      'lookup_customer',
      '--tool-args-json',
      JSON.stringify({ id: '42' }),
      ...bearer(BOB_TOKEN),
    ]);
    const result = resultOf(run) as { content: Array<{ text?: string }>; isError?: boolean };
    expect(result.isError).not.toBe(true);
    const text = result.content.map((c) => c.text ?? '').join(' ');
    expect(text).toContain('Ada Lovelace');
    expect(text).toMatch(/<<EMAIL_ADDRESS:tok_[0-9a-z]{12}>>/);
    expect(text).toContain('1111');
    expect(run.stdout).not.toContain('ada.lovelace@example.com');
    expect(run.stdout).not.toContain('4111 1111 1111 1111');
  });

  it('fails a policy denial with the rule id, and cannot even call a tool hidden from the guest', async () => {
    // A call the guest may see but not make: denied by the policy-validator (JSON-RPC
    // -32602 with validationErrors, DESIGN.md §2), and the Inspector exits non-zero (1, a
    // JSON-RPC error) with the gateway's reason, naming the rule.
    const denied = await inspector(e2e.fleet.mcpUrl, [
      '--method',
      'tools/call',
      '--tool-name',
      'bank_transfer',
      '--tool-args-json',
      JSON.stringify({ amount: 20_000, to: 'DE89370400440532013000' }),
      ...bearer(BOB_TOKEN),
    ]);
    expect(denied.code).toBe(1);
    expect(denied.stdout).toBe('');
    expect(errorOf(denied)).toMatchObject({ code: 'error' });
    expect(errorOf(denied).message).toMatch(
      /Blocked by interceptor "policy-validator": denied by rule "big-transfers"/,
    );

    // delete_record is filtered out of the guest's tools/list by the same rule
    // (admins-only-delete), and the Inspector resolves the tool from tools/list before it
    // calls: it refuses with tool_not_found (exit 5) and the call never reaches the gateway.
    const hidden = await inspector(e2e.fleet.mcpUrl, [
      '--method',
      'tools/call',
      '--tool-name',
      'delete_record',
      '--tool-args-json',
      JSON.stringify({ id: '42' }),
      ...bearer(BOB_TOKEN),
    ]);
    expect(hidden.code).toBe(5);
    expect(errorOf(hidden)).toMatchObject({ code: 'tool_not_found' });
    expect(errorOf(hidden).message).toContain('delete_record');

    // The admin may: admins-only-delete does not apply to her.
    const deleted = resultOf(
      await inspector(e2e.fleet.mcpUrl, [
        '--method',
        'tools/call',
        '--tool-name',
        'delete_record',
        '--tool-args-json',
        JSON.stringify({ id: '7' }),
        ...bearer(ALICE_TOKEN),
      ]),
    ) as { content: Array<{ text?: string }> };
    expect(deleted.content.map((c) => c.text).join(' ')).toContain('Deleted');
  });

  it('exits 3 for an unknown bearer token and 4 for an unreachable URL', async () => {
    const unauthorized = await inspector(e2e.fleet.mcpUrl, [
      '--method',
      'tools/list',
      '--stored-auth-only',
      ...bearer('not-a-fleet-token'),
    ]);
    expect(unauthorized.code).toBe(3);
    expect(errorOf(unauthorized).code).toBe('auth_required');

    const port = await freePort();
    const unreachable = await inspector(`http://127.0.0.1:${port}/mcp`, [
      '--method',
      'tools/list',
      '--connect-timeout',
      '5000',
    ]);
    expect(unreachable.code).toBe(4);
    expect(errorOf(unreachable).code).toBe('unreachable');
  });
});
