/**
 * Tool pinning on `/metrics` and in the logs, over real HTTP, real Redis and a real
 * OpenTelemetry pipeline (Prometheus exporter): what an operator alerts on when a tool is
 * rug-pulled or the pin store is full, and that no tool name becomes a label.
 */
import { describe, expect, it } from 'vitest';
import { toolDigest } from '../src/app.ts';
import {
  PINNED,
  poisoned,
  readFile,
  recordingLogger,
  sample,
  search,
  sharedRedis,
  startService,
} from './pin-service.ts';
import { unreachableRedis } from './redis.ts';

const DETECTIONS = 'fleet_pins_drift_detections_total';
const DRIFTED = 'fleet_pins_drifted_tools';
const PINNED_TOOLS = 'fleet_pins_pinned_tools';
const UNPINNED = 'fleet_pins_unpinned_total';

describe('tool pinning metrics', () => {
  it('count drifts by kind and show the drifted and pinned tools until approved', async () => {
    const store = sharedRedis();
    const svc = await startService({ policy: PINNED, ...store, metrics: true });
    await svc.list(readFile, search);
    let text = await svc.metrics();
    expect(sample(text, DRIFTED)).toBe(0);
    expect(sample(text, PINNED_TOOLS)).toBe(2);
    expect(sample(text, DETECTIONS)).toBeUndefined();

    await svc.list(poisoned, search);
    await svc.list(poisoned, search); // the same drift again: not a new detection
    text = await svc.metrics();
    expect(sample(text, DETECTIONS, { fleet_pins_drift_kind: 'new' })).toBe(1);
    expect(sample(text, DRIFTED)).toBe(1);
    expect(sample(text, PINNED_TOOLS)).toBe(2);

    // The backend changes it once more: the drift's seen definition follows.
    const again = { ...poisoned, description: `${poisoned.description} (v3)` };
    await svc.list(again, search);
    text = await svc.metrics();
    expect(sample(text, DETECTIONS, { fleet_pins_drift_kind: 'new' })).toBe(1);
    expect(sample(text, DETECTIONS, { fleet_pins_drift_kind: 'changed' })).toBe(1);

    expect((await svc.approve('read_file', `?digest=${toolDigest(again)}`)).status).toBe(200);
    text = await svc.metrics();
    expect(sample(text, DRIFTED)).toBe(0);
    // Counters, not state: approving does not undo a detection.
    expect(sample(text, DETECTIONS, { fleet_pins_drift_kind: 'new' })).toBe(1);
    for (const name of ['read_file', 'search']) expect(text).not.toContain(name);
  });

  it('count the tools a full store could not pin, by what became of them', async () => {
    const store = sharedRedis();
    const svc = await startService({
      policy: PINNED.replace('{enabled: true}', '{enabled: true, failOpen: false}'),
      ...store,
      maxTools: 1,
      metrics: true,
    });
    await svc.list(readFile, search, { ...search, name: 'fetch' });
    await svc.call('search');
    const text = await svc.metrics();
    expect(sample(text, UNPINNED, { fleet_pins_action: 'hidden' })).toBe(2);
    expect(sample(text, UNPINNED, { fleet_pins_action: 'refused' })).toBe(1);
    expect(sample(text, PINNED_TOOLS)).toBe(1);
    for (const name of ['search', 'fetch']) expect(text).not.toContain(name);
  });

  it('show nothing of pinning while it is off', async () => {
    const off = await startService({
      policy: 'version: 1\ndefault: allow\n',
      ...sharedRedis(),
      metrics: true,
    });
    await off.list(readFile);
    expect(await off.metrics()).not.toContain('fleet_pins_');
  });

  it('answer a scrape without the gauges when Redis is unreachable', async () => {
    const svc = await startService({
      policy: PINNED,
      ...sharedRedis(unreachableRedis()),
      metrics: true,
    });
    const started = Date.now();
    const text = await svc.metrics();
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(text).not.toContain(DRIFTED);
  });
});

describe('tool pinning logs', () => {
  it('warn once per new drift, with a tool name cut to 128 characters', async () => {
    const store = sharedRedis();
    const { log, warnings } = recordingLogger();
    const svc = await startService({ policy: PINNED, ...store, log });
    const long = { ...readFile, name: `${'n'.repeat(10_000)}` };
    await svc.list(long);
    await svc.list({ ...long, description: 'changed' });
    await svc.list({ ...long, description: 'changed' });
    const drifts = warnings.filter((w) => w.msg.includes('drifted from its pin'));
    expect(drifts).toHaveLength(1);
    expect(drifts[0]?.obj.tool).toBe(`${'n'.repeat(128)}… (10000 characters)`);
  });
});
