/**
 * Whether PromQL expressions (alert rules, dashboard queries) ask for series the fleet really
 * serves: every metric name in the services' `/metrics` (or one Prometheus makes itself),
 * every label in a matcher or grouping on that metric (or one the ServiceMonitor's scrape
 * adds) and surviving the aggregations on the way, label values the services produce (or the
 * telemetry table documents), and `rate()`/`increase()` only over counters and histograms.
 */
import type { MetricIndex } from './exposition.ts';
import { analyzePromql } from './promql.ts';

/**
 * Labels a Prometheus Operator ServiceMonitor scrape puts on every series (target labels);
 * they are not in `/metrics`. `job` is the Service name (the chart sets no jobLabel).
 */
export const TARGET_LABELS: ReadonlySet<string> = new Set([
  'job',
  'namespace',
  'service',
  'pod',
  'container',
  'endpoint',
  'instance',
]);

/** Series Prometheus makes for every target, with their labels. */
export const PROMETHEUS_SERIES: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ['up', TARGET_LABELS],
]);

/**
 * Label values a test run cannot easily produce but the fleet documents
 * (packages/telemetry/src/names.ts): a timed-out invocation, the chain aborting on a timeout,
 * and a backend call refused because its circuit is open (the run's one backend must answer
 * its other calls; an unreachable second one lists no tools, so no call is routed to it).
 */
export const DOCUMENTED_VALUES: Readonly<Record<string, readonly string[]>> = {
  fleet_interceptor_outcome: [
    'allowed',
    'warned',
    'denied',
    'modified',
    'unchanged',
    'failed',
    'timeout',
    'rejected',
  ],
  fleet_chain_abort_type: ['validation', 'mutation', 'invocation', 'timeout'],
  fleet_refusal_reason: ['overloaded', 'circuit_open'],
};

const RANGE_OVER_COUNTERS = new Set(['rate', 'increase', 'irate']);

/** One expression and where it comes from (for the message). */
export interface UsedExpression {
  where: string;
  expr: string;
}

/** Literal alternatives of a simple regex (`a|b|c`), else undefined. */
function alternatives(regex: string): string[] | undefined {
  return /^[A-Za-z0-9_./:-]+(\|[A-Za-z0-9_./:-]+)*$/.test(regex) ? regex.split('|') : undefined;
}

/** Every way `expressions` ask for something `index` does not have; empty when none. */
export function usageProblems(
  expressions: readonly UsedExpression[],
  index: MetricIndex,
): string[] {
  const problems: string[] = [];
  for (const { where, expr } of expressions) {
    const analysis = analyzePromql(expr);
    for (const error of analysis.errors) problems.push(`${where}: ${error}`);
    const labelsOf = (metric: string): ReadonlySet<string> | undefined => {
      const generated = PROMETHEUS_SERIES.get(metric);
      if (generated) return generated;
      const info = index.get(metric);
      return info ? new Set([...info.labels.keys(), ...TARGET_LABELS]) : undefined;
    };
    for (const selector of analysis.selectors) {
      const { metric } = selector;
      if (metric === '') {
        problems.push(`${where}: a selector without a metric name`);
        continue;
      }
      const labels = labelsOf(metric);
      if (!labels) {
        problems.push(`${where}: no service exports ${metric}`);
        continue;
      }
      const info = index.get(metric);
      if (selector.rangeFunction && RANGE_OVER_COUNTERS.has(selector.rangeFunction)) {
        const type = info?.type ?? 'gauge';
        if (type !== 'counter' && type !== 'histogram')
          problems.push(`${where}: ${selector.rangeFunction}() over ${metric}, a ${type}`);
      }
      for (const { label, op, value } of selector.matchers) {
        if (!labels.has(label)) {
          problems.push(`${where}: ${metric} has no label ${label}`);
          continue;
        }
        if (TARGET_LABELS.has(label) || value.includes('$') || op.startsWith('!')) continue;
        const wanted = op === '=' ? [value] : alternatives(value);
        if (!wanted) continue;
        const seen = info?.labels.get(label) ?? new Set<string>();
        for (const v of wanted) {
          if (!seen.has(v) && !DOCUMENTED_VALUES[label]?.includes(v))
            problems.push(
              `${where}: ${metric}{${label}="${v}"} was never served nor is documented`,
            );
        }
      }
    }
    for (const grouping of analysis.groupings) {
      for (const label of grouping.labels) {
        for (const { selector, keeps } of grouping.below) {
          const labels = labelsOf(selector.metric);
          if (!labels) continue; // reported above
          if (!labels.has(label))
            problems.push(
              `${where}: ${grouping.clause} (${label}) but ${selector.metric} has no ${label}`,
            );
          else if (!keeps(label))
            problems.push(
              `${where}: ${grouping.clause} (${label}) but an aggregation below drops it`,
            );
        }
      }
    }
  }
  return [...new Set(problems)];
}
