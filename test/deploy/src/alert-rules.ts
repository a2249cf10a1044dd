/** The alerting rules of a rendered chart, for the checks of the chart's alerts. */
import { expect } from 'vitest';
import type { Manifest } from './helm.ts';

/** One alerting rule of the chart's PrometheusRule, as rendered. */
export interface AlertRule {
  alert: string;
  expr: string;
  for: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/**
 * The rules of every group of the one PrometheusRule in `manifests` (a render with
 * `monitoring.prometheusRule.enabled=true`); the test fails unless there is exactly one.
 */
export function rulesOf(manifests: Manifest[]): AlertRule[] {
  const rules = manifests.filter((m) => m.kind === 'PrometheusRule');
  expect(rules).toHaveLength(1);
  const [rule] = rules;
  if (!rule) throw new Error('no PrometheusRule');
  return (rule.spec.groups as { rules: AlertRule[] }[]).flatMap((g) => g.rules);
}
