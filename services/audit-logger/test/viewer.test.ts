/**
 * The trace viewer in headless Chromium (Debian's `chromium` driven by playwright-core): the
 * page loads from the service itself, asks for the read token, lists recent records, and for
 * one trace draws the chain as a waterfall with every interceptor and the abort reason.
 * The screenshot lands in test-results/viewer.png.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { AuditRecord, AuditStore } from '@fleet/audit';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuditLoggerApp } from '../src/app.ts';
import {
  largeRecordAt,
  openSchemaStore,
  recordAt,
  serve,
  serveUntilClosed,
  spanId,
  traceId,
} from './helpers.ts';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = fileURLToPath(new URL('../test-results/viewer.png', import.meta.url));
const TOKEN = 'viewer-secret';
const trace = traceId();
const REASON = 'tool "delete_repo" is not allowed for role viewer';

function traceRecords(): AuditRecord[] {
  const context = {
    traceId: trace,
    sessionId: 'session-42',
    principal: { type: 'user' as const, id: 'alice' },
  };
  return [
    recordAt(0, {
      ...context,
      spanId: spanId(),
      event: 'tools/list',
      method: 'tools/list',
      phase: 'response',
      target: undefined,
      interceptors: [
        {
          name: 'tool-filter',
          type: 'mutation',
          mode: 'active',
          outcome: 'modified',
          durationMs: 1.8,
        },
        {
          name: 'pii-guard',
          type: 'validation',
          mode: 'active',
          outcome: 'allowed',
          durationMs: 0.9,
        },
      ],
      durationMs: 3.1,
    }),
    recordAt(40, {
      ...context,
      kind: 'invocation',
      target: 'delete_repo',
      interceptors: [
        {
          name: 'audit-logger',
          type: 'validation',
          mode: 'audit',
          outcome: 'allowed',
          durationMs: 0,
        },
      ],
      durationMs: 0,
    }),
    recordAt(46, {
      ...context,
      spanId: spanId(),
      target: 'delete_repo',
      decision: 'denied',
      status: 'validation_failed',
      interceptors: [
        {
          name: 'pii-guard',
          type: 'validation',
          mode: 'active',
          outcome: 'allowed',
          durationMs: 2.2,
        },
        {
          name: 'policy-validator',
          type: 'validation',
          mode: 'active',
          outcome: 'denied',
          durationMs: 4.5,
          messages: [{ severity: 'error', message: REASON }],
        },
        {
          name: 'audit-logger',
          type: 'validation',
          mode: 'audit',
          outcome: 'allowed',
          durationMs: 0.6,
        },
      ],
      abortReasons: [
        { interceptor: 'policy-validator', reason: REASON, type: 'validation', phase: 'request' },
      ],
      durationMs: 6.0,
    }),
  ];
}

let store: AuditStore;
let drop: () => Promise<void>;
let browser: Browser;
beforeAll(async () => {
  ({ store, drop } = await openSchemaStore());
  const others = Array.from({ length: 12 }, (_, i) =>
    recordAt(-60_000 + i * 1000, {
      traceId: traceId(),
      target: i % 3 === 0 ? 'get_weather' : 'search',
      principal: { type: 'service', id: `bot-${i % 2}` },
      decision: i % 5 === 0 ? 'error' : 'allowed',
      status: i % 5 === 0 ? 'backend_error' : 'success',
    }),
  );
  await store.insertBatch([...traceRecords(), ...others]);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await drop?.();
});

describe('trace viewer in Chromium', () => {
  it('searches a trace and draws its waterfall with every interceptor and the abort reason', async () => {
    const base = await serve(
      createAuditLoggerApp({
        sink: { enqueue: () => undefined },
        store,
        readToken: TOKEN,
        traceUrlTemplate: 'http://jaeger:16686/trace/{traceId}',
      }).listener,
    );
    const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));

    const response = await page.goto(`${base}/`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
    // The API wants a token: the page asks for it, and keeps it for the session.
    await page.locator('#token-form').waitFor({ state: 'visible' });
    await page.fill('#token', TOKEN);
    await page.click('#token-form button[type=submit]');
    await page.locator('#records-body tr[data-id]').first().waitFor();
    expect(await page.locator('#records-body tr[data-id]').count()).toBe(15);
    expect(await page.evaluate("sessionStorage.getItem('fleet-audit-read-token')")).toBe(TOKEN);

    // Filter the table, then open the trace.
    await page.selectOption('#decision', 'denied');
    await page.click('#search-button');
    await expect.poll(() => page.locator('#records-body tr[data-id]').count()).toBe(1);
    await page.selectOption('#decision', '');
    await page.selectOption('#kind', 'invocation');
    await page.click('#search-button');
    await expect.poll(() => page.locator('#records-body tr[data-id]').count()).toBe(1);
    expect(new URL(page.url()).searchParams.get('kind')).toBe('invocation');
    await page.selectOption('#kind', '');
    await page.fill('#traceId', trace);
    await page.click('#search-button');
    await page.locator('#trace:not([hidden])').waitFor();
    await page.locator('#waterfall .wf-row').first().waitFor();

    const rows = await page
      .locator('#waterfall .wf-row')
      .evaluateAll((elements) =>
        elements.map((e) => [e.getAttribute('data-interceptor'), e.getAttribute('data-outcome')]),
      );
    expect(rows).toEqual([
      ['tool-filter', 'modified'],
      ['pii-guard', 'allowed'],
      ['pii-guard', 'allowed'],
      ['policy-validator', 'denied'],
      ['audit-logger', 'allowed'],
    ]);
    expect(await page.locator('#waterfall .wf-group').count()).toBe(3);
    const reason = page.locator(
      '#waterfall .wf-row[data-interceptor="policy-validator"] .abort-reason',
    );
    await expect.poll(() => reason.isVisible()).toBe(true);
    expect(await reason.textContent()).toContain(REASON);
    const deniedColour = await page.evaluate(
      `getComputedStyle(document.querySelector('#waterfall .wf-row[data-interceptor="policy-validator"] .wf-bar')).backgroundColor`,
    );
    expect(deniedColour).toBe('rgb(210, 60, 60)');
    expect(await page.getAttribute('#trace-link', 'href')).toBe(
      `http://jaeger:16686/trace/${trace}`,
    );
    expect(await page.textContent('#trace-summary')).toContain('3 records');
    expect(new URL(page.url()).searchParams.get('traceId')).toBe(trace);

    await mkdir(fileURLToPath(new URL('../test-results/', import.meta.url)), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    const png = await readFile(SCREENSHOT);
    expect(png.length).toBeGreaterThan(10_000);
    expect(png.subarray(0, 8)).toEqual(
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    );
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);

  it('shows a 400 from the API as a message naming the parameter', async () => {
    const base = await serve(
      createAuditLoggerApp({ sink: { enqueue: () => undefined }, store }).listener,
    );
    const page = await browser.newPage();
    await page.goto(`${base}/?since=yesterday`);
    await expect.poll(() => page.textContent('#status')).toContain('since:');
    expect(await page.locator('#status.error').count()).toBe(1);
    expect(await page.locator('#token-form').isHidden()).toBe(true);
    await page.close();
  }, 30_000);
});

describe('trace viewer on a trace the API cuts', () => {
  const NOTICE = 'the first ones only: the trace has more than one answer holds';
  const big = traceId();
  const normal = traceId();
  let base: string;
  const cleanups: Array<() => Promise<void>> = [];
  beforeAll(async () => {
    // One store for both tests: a trace past MAX_TRACE_CHARS (1,000 records of 37 KB, the
    // answer holds about 450), and one of three small records.
    const { store: cut, drop: dropCut } = await openSchemaStore();
    cleanups.push(dropCut);
    for (let b = 0; b < 2; b++)
      await cut.insertBatch(
        Array.from({ length: 500 }, (_, i) => largeRecordAt(b * 500 + i, { traceId: big })),
      );
    await cut.insertBatch(Array.from({ length: 3 }, (_, i) => recordAt(i, { traceId: normal })));
    const server = await serveUntilClosed(
      createAuditLoggerApp({ sink: { enqueue: () => undefined }, store: cut }).listener,
    );
    cleanups.unshift(() => server.close());
    base = server.url;
  }, 60_000);
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  async function summaryOf(trace: string): Promise<string> {
    const page = await browser.newPage();
    try {
      await page.goto(`${base}/?traceId=${trace}`);
      await page.locator('#trace:not([hidden])').waitFor();
      await expect.poll(() => page.textContent('#trace-summary')).toMatch(/records? from/);
      return (await page.textContent('#trace-summary')) ?? '';
    } finally {
      await page.close();
    }
  }

  it('says the trace was cut when the API answers truncated', async () => {
    const api = (await (await fetch(`${base}/api/audit/traces/${big}`)).json()) as {
      records: unknown[];
      truncated?: boolean;
    };
    expect(api.truncated).toBe(true);
    const summary = await summaryOf(big);
    expect(summary).toContain(`${api.records.length} records from`);
    expect(summary).toContain(NOTICE);
  }, 30_000);

  it('says nothing of the kind for a whole trace', async () => {
    const summary = await summaryOf(normal);
    expect(summary).toContain('3 records from');
    expect(summary).not.toContain(NOTICE);
  }, 30_000);
});
