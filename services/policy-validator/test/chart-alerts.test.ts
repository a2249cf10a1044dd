/**
 * The chart's tool pinning alerts (deploy/helm, `monitoring.prometheusRule`) against this
 * service: rendered with helm only where pinning can be on, in valid PromQL, on this release's
 * policy-validator job, and asking only for series and labels the service's real `/metrics`
 * serves after a drift and a full store. Uses the chart checks' helpers (test/deploy), which
 * cover the fleet's other alerts; theirs render the default policy, without pinning.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexExposition } from '../../../test/deploy/src/exposition.ts';
import {
  cleanupHelmHome,
  helmBinary,
  type Manifest,
  NAMESPACE,
  RELEASE,
  renderChart,
} from '../../../test/deploy/src/helm.ts';
import { usageProblems } from '../../../test/deploy/src/metric-usage.ts';
import { analyzePromql, outputLabels } from '../../../test/deploy/src/promql.ts';
import { PINNED, poisoned, readFile, search, sharedRedis, startService } from './pin-service.ts';

const ALERTS = ['FleetToolDefinitionDrifted', 'FleetToolPinStoreFull'];
const RULES_ON = ['monitoring.prometheusRule.enabled=true'];
const PINNING_ON = [...RULES_ON, 'policyValidator.policy.pinning.enabled=true'];
const JOB = `${RELEASE}-interceptor-fleet-policy-validator`;

interface AlertRule {
  alert: string;
  expr: string;
  for: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

function rulesOf(manifests: Manifest[]): AlertRule[] {
  return manifests
    .filter((m) => m.kind === 'PrometheusRule')
    .flatMap((m) => (m.spec.groups as { rules: AlertRule[] }[]).flatMap((g) => g.rules));
}
const pinningRules = (manifests: Manifest[]) =>
  rulesOf(manifests).filter((r) => ALERTS.includes(r.alert));

let withPinning: AlertRule[] = [];

beforeAll(async () => {
  helmBinary();
  withPinning = pinningRules(await renderChart({ set: PINNING_ON }));
}, 60_000);

afterAll(() => cleanupHelmHome());

describe('tool pinning alerts', () => {
  it('are rendered when the policy pins, or comes from a ConfigMap the chart cannot read', async () => {
    expect(withPinning.map((r) => r.alert)).toEqual(ALERTS);
    const [withoutPinning, fromConfigMap, validatorOff] = await Promise.all([
      renderChart({ set: RULES_ON }),
      renderChart({ set: [...RULES_ON, 'policyValidator.existingConfigMap=my-policy'] }),
      renderChart({ set: [...PINNING_ON, 'policyValidator.enabled=false'] }),
    ]);
    expect(pinningRules(withoutPinning)).toEqual([]);
    expect(pinningRules(fromConfigMap).map((r) => r.alert)).toEqual(ALERTS);
    expect(pinningRules(validatorOff)).toEqual([]);
  });

  it('can be changed or turned off one by one', async () => {
    const rules = pinningRules(
      await renderChart({
        set: [
          ...PINNING_ON,
          'monitoring.prometheusRule.alerts.FleetToolDefinitionDrifted.severity=critical',
          'monitoring.prometheusRule.alerts.FleetToolPinStoreFull.enabled=false',
        ],
      }),
    );
    expect(rules.map((r) => [r.alert, r.labels.severity])).toEqual([
      ['FleetToolDefinitionDrifted', 'critical'],
    ]);
  });

  it("select the release's policy-validator in valid PromQL, with a runbook description", () => {
    for (const rule of withPinning) {
      const analysis = analyzePromql(rule.expr);
      expect(analysis.errors, rule.expr).toEqual([]);
      expect(analysis.selectors.length, rule.expr).toBeGreaterThan(0);
      for (const selector of analysis.selectors) {
        expect(selector.matchers).toEqual(
          expect.arrayContaining([
            { label: 'namespace', op: '=', value: NAMESPACE },
            { label: 'job', op: '=', value: JOB },
          ]),
        );
      }
      expect(rule.labels.severity).toBe('warning');
      expect(rule.for).toMatch(/^[0-9]+(s|m|h)$/);
      const text = `${rule.annotations.summary} ${rule.annotations.description}`;
      expect(text).not.toMatch(/<no value>|%!/);
      for (const [, label] of text.matchAll(/\$labels\.([A-Za-z0-9_]+)/g))
        expect([...(outputLabels(rule.expr) ?? [])], `${rule.alert} keeps ${label}`).toContain(
          label,
        );
    }
    const drifted = withPinning.find((r) => r.alert === 'FleetToolDefinitionDrifted');
    expect(drifted?.expr).toMatch(/^max\(fleet_pins_drifted_tools\{.*\}\) > 0$/);
    expect(drifted?.annotations.description).toContain(
      '`fleet pins --policy http://127.0.0.1:8082`',
    );
    expect(drifted?.annotations.description).toContain('fleet pins approve <tool> --digest <seen>');
    expect(drifted?.annotations.description).toContain(`port-forward svc/${JOB} 8082`);
  });

  it("ask only for series the service's /metrics serves after a drift and a full store", async () => {
    const store = sharedRedis();
    const svc = await startService({ policy: PINNED, ...store, maxTools: 2, metrics: true });
    await svc.list(readFile, search);
    await svc.list(poisoned, search, { ...search, name: 'fetch' });
    const index = indexExposition(await svc.metrics(), 'policy-validator');
    expect(
      usageProblems(
        withPinning.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
        index,
      ),
    ).toEqual([]);
  });
});
