/**
 * The chart's tool pinning alerts (`monitoring.prometheusRule`, with the policy-validator's
 * pinning on): rendered only where pinning can be on, in valid PromQL, on this release's
 * policy-validator job, and asking only for series and labels the real service's `/metrics`
 * serves after a drift and a full pin store. The fleet's other alerts are checked in
 * monitoring.test.ts, on the default policy, which does not pin.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AlertRule, rulesOf } from './alert-rules.ts';
import { indexExposition } from './exposition.ts';
import { scrapePinningPolicyValidator } from './fleet-metrics.ts';
import {
  cleanupHelmHome,
  helmBinary,
  type Manifest,
  NAMESPACE,
  RELEASE,
  renderChart,
} from './helm.ts';
import { usageProblems } from './metric-usage.ts';
import { analyzePromql, outputLabels } from './promql.ts';

const ALERTS = ['FleetToolDefinitionDrifted', 'FleetToolPinStoreFull'];
const RULES_ON = ['monitoring.prometheusRule.enabled=true'];
const PINNING_ON = [...RULES_ON, 'policyValidator.policy.pinning.enabled=true'];
const JOB = `${RELEASE}-interceptor-fleet-policy-validator`;

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
    // Room is made through the audited API, under the service's key prefix, not by hand in Redis.
    const full = withPinning.find((r) => r.alert === 'FleetToolPinStoreFull');
    expect(full?.annotations.description).toContain(
      '`fleet pins forget <tool> --policy http://127.0.0.1:8082`',
    );
    expect(full?.annotations.description).toContain(`port-forward svc/${JOB} 8082`);
    expect(full?.annotations.description).not.toMatch(/HDEL|fleet:pins:/);
  });

  it("ask only for series the service's /metrics serves after a drift and a full store", async () => {
    const run = await scrapePinningPolicyValidator();
    expect(run.answers.pinned?.result).toMatchObject({ modified: false, info: { kept: 2 } });
    expect(run.answers.drifted?.result).toMatchObject({ modified: true, info: { drifted: 1 } });
    const index = indexExposition(run.scrape, 'policy-validator');
    expect(
      usageProblems(
        withPinning.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
        index,
      ),
    ).toEqual([]);
  }, 90_000);
});
