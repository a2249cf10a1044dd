/**
 * The chart's alerts (`monitoring.prometheusRule`) and Grafana dashboard
 * (`monitoring.grafanaDashboard`): rendered only when asked for, in the shapes the Prometheus
 * Operator and the Grafana sidecar load, in valid PromQL, and asking only for series the real
 * services serve — the fleet is started from source as processes, driven through allowed,
 * denied, failing and refused calls, and scraped.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rulesOf } from './alert-rules.ts';
import { indexExposition, type MetricIndex } from './exposition.ts';
import { type FleetRun, scrapeRealFleet } from './fleet-metrics.ts';
import {
  chartDir,
  cleanupHelmHome,
  helmBinary,
  type Manifest,
  NAMESPACE,
  RELEASE,
  renderChart,
  runHelm,
  templateArgs,
} from './helm.ts';
import { validateManifest } from './k8s.ts';
import { type UsedExpression, usageProblems } from './metric-usage.ts';
import { analyzePromql, grafanaToPromql, labelValuesQuery, outputLabels } from './promql.ts';

const FULLNAME = `${RELEASE}-interceptor-fleet`;
/** `${name}`, a Grafana variable reference. */
const grafanaVar = (name: string) => `$${'{'}${name}}`;
const ENABLED = [
  'monitoring.prometheusRule.enabled=true',
  'monitoring.prometheusRule.labels.release=kube-prometheus-stack',
  'monitoring.grafanaDashboard.enabled=true',
];
const ALERTS = [
  'FleetGatewayErrorRatioHigh',
  'FleetChainRefusingRequests',
  'FleetInterceptorInvocationsFailing',
  'FleetRequestLatencyHigh',
  'FleetBackendSaturated',
  'FleetBackendCircuitOpen',
  'FleetServiceDown',
  'FleetAuditRecordsLost',
  'FleetAuditStoreUnavailable',
  'FleetAuditBacklog',
  'FleetAuditProducerDisconnected',
  'FleetAuditWriteAheadFailing',
  'FleetEventLoopDelayHigh',
];
const SERVICES = [
  'orchestrator',
  'pii-redactor',
  'policy-validator',
  'audit-logger',
  'audit-worker',
];

interface Target {
  refId: string;
  expr: string;
  legendFormat?: string;
  datasource?: { type: string; uid: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type: string; uid: string };
  targets?: Target[];
}
interface Variable {
  name: string;
  type: string;
  query: string | { query: string };
  current?: { text: string; value: string };
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Variable[] };
}

const renders = new Map<string, Manifest[]>();
const rendered = (name: string) => {
  const manifests = renders.get(name);
  if (!manifests) throw new Error(`${name} was not rendered`);
  return manifests;
};
const ofKind = (ms: Manifest[], kind: string) => ms.filter((m) => m.kind === kind);

const ruleNamed = (manifests: Manifest[], alert: string) =>
  rulesOf(manifests).find((r) => r.alert === alert);

function dashboardConfigMap(manifests: Manifest[]): Manifest {
  const maps = ofKind(manifests, 'ConfigMap').filter((m) => m.metadata.name.endsWith('-dashboard'));
  expect(maps).toHaveLength(1);
  return maps[0] as Manifest;
}
function dashboardOf(manifests: Manifest[]): Dashboard {
  const data = dashboardConfigMap(manifests).data ?? {};
  const keys = Object.keys(data);
  expect(keys).toHaveLength(1);
  expect(keys[0]).toMatch(/\.json$/);
  return JSON.parse(data[keys[0] as string] ?? '') as Dashboard;
}
const queryPanels = (d: Dashboard) => d.panels.filter((p) => p.type !== 'row');
const variableQuery = (v: Variable) => (typeof v.query === 'string' ? v.query : v.query.query);

/** Every PromQL expression of the rendered rule and dashboard, as Prometheus receives it. */
function expressionsOf(manifests: Manifest[]): UsedExpression[] {
  const used: UsedExpression[] = rulesOf(manifests).map((r) => ({
    where: `alert ${r.alert}`,
    expr: r.expr,
  }));
  const dashboard = dashboardOf(manifests);
  for (const panel of queryPanels(dashboard)) {
    for (const target of panel.targets ?? []) {
      used.push({
        where: `panel "${panel.title}" ${target.refId}`,
        expr: grafanaToPromql(target.expr),
      });
    }
  }
  for (const variable of dashboard.templating.list.filter((v) => v.type === 'query')) {
    const labelValues = labelValuesQuery(variableQuery(variable));
    if (!labelValues) throw new Error(`variable ${variable.name}: not a label_values() query`);
    used.push({
      where: `variable ${variable.name}`,
      expr: `count by (${labelValues.label}) (${grafanaToPromql(labelValues.selector)})`,
    });
  }
  return used;
}

beforeAll(async () => {
  helmBinary();
  const [defaults, enabled] = await Promise.all([renderChart(), renderChart({ set: ENABLED })]);
  renders.set('default', defaults);
  renders.set('enabled', enabled);
}, 60_000);

afterAll(() => cleanupHelmHome());

describe('monitoring disabled (the default)', () => {
  it('renders no PrometheusRule and no dashboard ConfigMap', () => {
    const manifests = rendered('default');
    expect(ofKind(manifests, 'PrometheusRule')).toEqual([]);
    expect(
      ofKind(manifests, 'ConfigMap').filter((m) => m.metadata.labels?.grafana_dashboard),
    ).toEqual([]);
  });
});

describe('monitoring.prometheusRule', () => {
  it('renders one PrometheusRule that validates, labelled like the ServiceMonitor', () => {
    const [rule] = ofKind(rendered('enabled'), 'PrometheusRule');
    if (!rule) throw new Error('no PrometheusRule');
    expect(() => validateManifest(rule)).not.toThrow();
    expect(rule.metadata.namespace).toBe(NAMESPACE);
    expect(rule.metadata.labels).toMatchObject({
      'app.kubernetes.io/instance': RELEASE,
      'app.kubernetes.io/part-of': 'interceptor-fleet',
      release: 'kube-prometheus-stack',
    });
  });

  it('has the fleet alerts, each with a severity, a summary, a description and a for duration', () => {
    const rules = rulesOf(rendered('enabled'));
    expect(rules.map((r) => r.alert).sort()).toEqual([...ALERTS].sort());
    for (const rule of rules) {
      expect(['critical', 'warning', 'info'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary?.length, `${rule.alert} summary`).toBeGreaterThan(10);
      expect(rule.annotations?.description?.length, `${rule.alert} description`).toBeGreaterThan(
        40,
      );
      expect(rule.for, rule.alert).toMatch(/^[0-9]+(s|m|h)$/);
    }
  });

  it("counts the gateway's errors, not those answering the client's own input (-32600, -32601, -32602), over all its requests", () => {
    const rule = ruleNamed(rendered('enabled'), 'FleetGatewayErrorRatioHigh');
    const [errors, all, ...more] = analyzePromql(rule?.expr ?? '').selectors;
    const own = (selector: typeof errors) =>
      selector?.matchers.filter((m) => m.label !== 'namespace' && m.label !== 'job');
    expect(more).toEqual([]);
    // The numerator: error answers, save the client-input ones.
    expect(errors?.metric).toBe('fleet_request_duration_count');
    expect(own(errors)).toEqual([
      { label: 'fleet_request_status', op: '=', value: 'error' },
      { label: 'error_type', op: '!~', value: '-32600|-32601|-32602' },
    ]);
    // The denominator: every request, the client-input errors included.
    expect(all?.metric).toBe('fleet_request_duration_count');
    expect(own(all)).toEqual([]);
    expect(rule?.annotations.description).toMatch(/-32600.*-32601.*-32602/);
  });

  it("counts an interceptor's failed and timed-out invocations as failing, not rejected ones (-32602: the caller's params)", () => {
    const rule = ruleNamed(rendered('enabled'), 'FleetInterceptorInvocationsFailing');
    const outcomes = analyzePromql(rule?.expr ?? '')
      .selectors.flatMap((s) => s.matchers)
      .filter((m) => m.label === 'fleet_interceptor_outcome');
    // The numerator selects the failures; the denominator takes every outcome.
    expect(outcomes).toEqual([
      { label: 'fleet_interceptor_outcome', op: '=~', value: 'failed|timeout' },
    ]);
    expect(rule?.annotations.description).toContain('rejected');
  });

  it("pages on chains refused because a validator's or a mutator's service fails, not because it rejected the caller's params", () => {
    const rule = ruleNamed(rendered('enabled'), 'FleetChainRefusingRequests');
    const matchers = analyzePromql(rule?.expr ?? '')
      .selectors.flatMap((s) => s.matchers)
      .filter((m) => m.label.startsWith('fleet_'));
    expect(matchers).toEqual([
      { label: 'fleet_chain_abort_type', op: '=~', value: 'invocation|mutation|timeout' },
      { label: 'fleet_interceptor_outcome', op: '!=', value: 'rejected' },
    ]);
    expect(rule?.annotations.description).toContain('rejected');
  });

  it("warns when a backend refuses more than thresholds.backendOverloadedRatio of clients' calls as overloaded, per backend", async () => {
    const rule = ruleNamed(rendered('enabled'), 'FleetBackendSaturated');
    expect(rule?.labels.severity).toBe('warning');
    const [refused, all, ...more] = analyzePromql(rule?.expr ?? '').selectors;
    const own = (selector: typeof refused) =>
      selector?.matchers.filter((m) => m.label !== 'namespace' && m.label !== 'job');
    expect(more).toEqual([]);
    expect(refused?.metric).toBe('fleet_backend_refusals_total');
    // Clients' calls only: fleet_backend_duration does not count the gateway's own.
    expect(own(refused)).toEqual([
      { label: 'fleet_refusal_reason', op: '=', value: 'overloaded' },
      { label: 'fleet_call_origin', op: '=', value: 'client' },
    ]);
    expect(all?.metric).toBe('fleet_backend_duration_count');
    expect(own(all)).toEqual([]);
    expect(outputLabels(rule?.expr ?? '')).toEqual(new Set(['fleet_backend_id']));
    expect(rule?.expr).toMatch(/> 0\.01$/);
    const changed = await renderChart({
      set: ENABLED,
      setJson: ['monitoring.prometheusRule.thresholds.backendOverloadedRatio=0.25'],
    });
    expect(ruleNamed(changed, 'FleetBackendSaturated')?.expr).toMatch(/> 0\.25$/);
  });

  it('pages on any call refused because a backend’s circuit is open, per backend', () => {
    const rule = ruleNamed(rendered('enabled'), 'FleetBackendCircuitOpen');
    expect(rule?.labels.severity).toBe('critical');
    const [refused, ...more] = analyzePromql(rule?.expr ?? '').selectors;
    expect(more).toEqual([]);
    expect(refused?.metric).toBe('fleet_backend_refusals_total');
    expect(refused?.rangeFunction).toBe('increase');
    expect(refused?.matchers.filter((m) => m.label.startsWith('fleet_'))).toEqual([
      { label: 'fleet_refusal_reason', op: '=', value: 'circuit_open' },
    ]);
    expect(outputLabels(rule?.expr ?? '')).toEqual(new Set(['fleet_backend_id']));
    expect(rule?.expr).toMatch(/\) > 0$/);
  });

  it('writes every expression in valid PromQL', () => {
    for (const rule of rulesOf(rendered('enabled')))
      expect(analyzePromql(rule.expr).errors, `${rule.alert}: ${rule.expr}`).toEqual([]);
  });

  it("selects only this release's series: its namespace and its Services as jobs", () => {
    for (const rule of rulesOf(rendered('enabled'))) {
      for (const selector of analyzePromql(rule.expr).selectors) {
        const where = `${rule.alert} ${selector.metric}`;
        const ns = selector.matchers.find((m) => m.label === 'namespace');
        expect(ns, where).toEqual({ label: 'namespace', op: '=', value: NAMESPACE });
        const job = selector.matchers.find((m) => m.label === 'job');
        if (!job) throw new Error(`${where}: no job matcher`);
        const jobs = job.op === '=' ? [job.value] : job.value.split('|');
        expect(job.op === '=' || job.op === '=~', where).toBe(true);
        for (const name of jobs)
          expect(name, where).toMatch(new RegExp(`^${FULLNAME}-(${SERVICES.join('|')})$`));
        if (
          selector.metric.startsWith('fleet_request') ||
          selector.metric.startsWith('fleet_chain')
        )
          expect(jobs, where).toEqual([`${FULLNAME}-orchestrator`]);
      }
    }
    const down = ruleNamed(rendered('enabled'), 'FleetServiceDown');
    const job = analyzePromql(down?.expr ?? '').selectors[0]?.matchers.find(
      (m) => m.label === 'job',
    );
    expect(job?.value.split('|').sort()).toEqual(SERVICES.map((s) => `${FULLNAME}-${s}`).sort());
  });

  it('follows the services the release deploys', async () => {
    const manifests = await renderChart({
      set: [
        ...ENABLED,
        'piiRedactor.enabled=false',
        'interceptors.extra[0].name=secrets-scanner',
        'interceptors.extra[0].image=ghcr.io/acme/secrets-scanner:1.4.2',
        'interceptors.extra[0].port=9000',
      ],
    });
    const down = ruleNamed(manifests, 'FleetServiceDown');
    const job = analyzePromql(down?.expr ?? '').selectors[0]?.matchers.find(
      (m) => m.label === 'job',
    );
    const jobs = job?.value.split('|') ?? [];
    expect(jobs).toContain(`${FULLNAME}-secrets-scanner`);
    expect(jobs).not.toContain(`${FULLNAME}-pii-redactor`);
  });

  it('takes thresholds, the window, per-alert changes and extra alert labels from the values', async () => {
    const manifests = await renderChart({
      set: [
        ...ENABLED,
        'monitoring.prometheusRule.thresholds.requestLatencyP99Ms=750',
        'monitoring.prometheusRule.window=15m',
        'monitoring.prometheusRule.alerts.FleetRequestLatencyHigh.for=30m',
        'monitoring.prometheusRule.alerts.FleetRequestLatencyHigh.severity=critical',
        'monitoring.prometheusRule.alerts.FleetEventLoopDelayHigh.enabled=false',
        'monitoring.prometheusRule.alertLabels.team=platform',
      ],
      // --set reads 0.2 as a string; the schema wants a number.
      setJson: ['monitoring.prometheusRule.thresholds.errorRatio=0.2'],
    });
    const latency = ruleNamed(manifests, 'FleetRequestLatencyHigh');
    expect(latency?.expr).toMatch(/> 750$/);
    expect(latency?.expr).toContain('[15m]');
    expect(latency?.for).toBe('30m');
    expect(latency?.labels.severity).toBe('critical');
    expect(ruleNamed(manifests, 'FleetGatewayErrorRatioHigh')?.expr).toMatch(/> 0\.2$/);
    expect(ruleNamed(manifests, 'FleetEventLoopDelayHigh')).toBeUndefined();
    for (const rule of rulesOf(manifests)) expect(rule.labels.team, rule.alert).toBe('platform');
  });

  it('lets each alert be changed by name: the schema knows every alert the chart renders', async () => {
    const schema = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8')) as {
      properties: {
        monitoring: {
          properties: { prometheusRule: { properties: { alerts: { properties: object } } } };
        };
      };
    };
    const known = Object.keys(
      schema.properties.monitoring.properties.prometheusRule.properties.alerts.properties,
    );
    // With pinning on, the chart renders every alert it has.
    const all = rulesOf(
      await renderChart({ set: [...ENABLED, 'policyValidator.policy.pinning.enabled=true'] }),
    );
    expect(known.sort()).toEqual(all.map((r) => r.alert).sort());
  });

  it('leaves Prometheus templates in the annotations to Prometheus, naming only labels the alert keeps', () => {
    const rules = rulesOf(rendered('enabled'));
    expect(rules.some((r) => r.annotations.description?.includes('{{ $value'))).toBe(true);
    for (const rule of rules) {
      const kept = outputLabels(rule.expr);
      const text = `${rule.annotations.summary} ${rule.annotations.description}`;
      expect(text, rule.alert).not.toMatch(/<no value>|%!/);
      for (const [, label] of text.matchAll(/\$labels\.([A-Za-z0-9_]+)/g)) {
        if (kept) expect([...kept], `${rule.alert} keeps ${label}`).toContain(label);
      }
    }
  });

  it.each([
    [
      'an unknown alert',
      'monitoring.prometheusRule.alerts.FleetEverythingOnFire.for=5m',
      /FleetEverythingOnFire/,
    ],
    ['a misspelt key', 'monitoring.prometheusRule.enabeld=true', /enabeld/],
    [
      'an unknown severity',
      'monitoring.prometheusRule.alerts.FleetServiceDown.severity=page',
      /severity/,
    ],
    [
      'a for that is no duration',
      'monitoring.prometheusRule.alerts.FleetServiceDown.for=soon',
      /for/,
    ],
    ['a negative threshold', 'monitoring.prometheusRule.thresholds.errorRatio=-1', /errorRatio/],
    [
      'a ratio above 1',
      'monitoring.prometheusRule.thresholds.invocationFailureRatio=2',
      /invocationFailureRatio/,
    ],
    [
      'a backend refusal ratio above 1',
      'monitoring.prometheusRule.thresholds.backendOverloadedRatio=2',
      /backendOverloadedRatio/,
    ],
    ['a window that is no duration', 'monitoring.prometheusRule.window=5', /window/],
    ['a misspelt dashboard key', 'monitoring.grafanaDashboard.lables.a=b', /lables/],
  ])('refuses %s', async (_label, assignment, message) => {
    const result = await runHelm([...templateArgs(), '--set', assignment]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema");
    expect(result.stderr).toMatch(message);
  });
});

describe('monitoring.grafanaDashboard', () => {
  it('renders a ConfigMap the Grafana sidecar picks up, holding one dashboard', () => {
    const map = dashboardConfigMap(rendered('enabled'));
    expect(() => validateManifest(map)).not.toThrow();
    expect(map.metadata.namespace).toBe(NAMESPACE);
    expect(map.metadata.labels).toMatchObject({
      grafana_dashboard: '1',
      'app.kubernetes.io/instance': RELEASE,
    });
    expect(dashboardOf(rendered('enabled')).title).toContain(RELEASE);
  });

  it('has panels with targets, unique ids, a layout on the grid and the data source variable', () => {
    const dashboard = dashboardOf(rendered('enabled'));
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const panels = queryPanels(dashboard);
    expect(panels.length).toBeGreaterThanOrEqual(12);
    expect(dashboard.templating.list.find((v) => v.name === 'datasource')?.type).toBe('datasource');
    for (const panel of panels) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      expect(panel.datasource?.uid, panel.title).toBe(grafanaVar('datasource'));
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
      const refIds = (panel.targets ?? []).map((t) => t.refId);
      expect(new Set(refIds).size, panel.title).toBe(refIds.length);
      for (const target of panel.targets ?? []) {
        expect(target.expr.trim(), panel.title).not.toBe('');
        // A legend names only labels the query keeps.
        const kept = outputLabels(grafanaToPromql(target.expr));
        for (const [, label] of (target.legendFormat ?? '').matchAll(
          /\{\{\s*([A-Za-z0-9_]+)\s*\}\}/g,
        ))
          if (kept) expect([...kept], `${panel.title}: legend {{${label}}}`).toContain(label);
      }
    }
  });

  it('shows the gateway, the chain, the backends, the audit pipeline and the runtime', () => {
    const metrics = new Set(
      expressionsOf(rendered('enabled'))
        .filter((e) => e.where.startsWith('panel'))
        .flatMap((e) => analyzePromql(e.expr).selectors.map((s) => s.metric)),
    );
    expect([...metrics]).toEqual(
      expect.arrayContaining([
        'fleet_request_duration_count',
        'fleet_request_duration_bucket',
        'fleet_chain_aborts_total',
        'fleet_interceptor_duration_bucket',
        'fleet_backend_duration_count',
        'fleet_backend_refusals_total',
        'fleet_audit_producer_records_total',
        'fleet_audit_worker_records_total',
        'fleet_audit_worker_store_unavailable',
        'fleet_audit_producer_batches_total',
        'fleet_audit_worker_jobs_total',
        'fleet_audit_queue_jobs',
        'process_memory_usage',
        'nodejs_eventloop_delay_p99',
        'v8js_gc_duration_sum',
      ]),
    );
    const chainAborts = queryPanels(dashboardOf(rendered('enabled')))
      .flatMap((p) => p.targets ?? [])
      .find((t) => t.expr.includes('fleet_chain_aborts_total'));
    expect(chainAborts?.expr).toMatch(/by \(fleet_chain_abort_type, fleet_interceptor_name\)/);
    const refusals = queryPanels(dashboardOf(rendered('enabled'))).find(
      (p) => p.title === 'Backend refusals by reason',
    );
    expect(refusals?.targets?.[0]?.expr).toMatch(
      /by \(fleet_backend_id, fleet_refusal_reason\) \(rate\(fleet_backend_refusals_total\{/,
    );
  });

  it("is the chart's dashboards/interceptor-fleet.json with this release's uid, title and defaults", async () => {
    const file = JSON.parse(
      readFileSync(join(chartDir, 'dashboards/interceptor-fleet.json'), 'utf8'),
    ) as Dashboard;
    const ours = dashboardOf(rendered('enabled'));
    expect(ours.panels).toEqual(file.panels);
    expect(ours.uid).not.toBe(file.uid);
    expect(ours.uid.length).toBeLessThanOrEqual(40);
    const defaultOf = (d: Dashboard, name: string) =>
      d.templating.list.find((v) => v.name === name)?.current?.value;
    expect(defaultOf(ours, 'namespace')).toBe(NAMESPACE);
    expect(defaultOf(ours, 'fleet')).toBe(FULLNAME);
    const other = dashboardOf(
      await renderChart({ set: [...ENABLED, 'fullnameOverride=other-fleet'] }),
    );
    expect(other.uid).not.toBe(ours.uid);
  });

  it('takes the sidecar label, extra labels, annotations and namespace from the values', async () => {
    const map = dashboardConfigMap(
      await renderChart({
        set: [
          ...ENABLED,
          'monitoring.grafanaDashboard.sidecarLabel=grafana_dashboard_fleet',
          'monitoring.grafanaDashboard.sidecarLabelValue=yes',
          'monitoring.grafanaDashboard.labels.team=platform',
          'monitoring.grafanaDashboard.annotations.grafana_folder=Interceptor Fleet',
          'monitoring.grafanaDashboard.namespace=monitoring',
        ],
      }),
    );
    expect(map.metadata.labels).toMatchObject({ grafana_dashboard_fleet: 'yes', team: 'platform' });
    expect(map.metadata.labels?.grafana_dashboard).toBeUndefined();
    expect(map.metadata.annotations).toEqual({ grafana_folder: 'Interceptor Fleet' });
    expect(map.metadata.namespace).toBe('monitoring');
  });

  it('writes every query in valid PromQL (Grafana interval macros replaced)', () => {
    for (const { where, expr } of expressionsOf(rendered('enabled')).filter(
      (e) => !e.where.startsWith('alert'),
    ))
      expect(analyzePromql(expr).errors, `${where}: ${expr}`).toEqual([]);
  });
});

describe('the usage checker', () => {
  const index = indexExposition(
    [
      '# TYPE fleet_chain_aborts_total counter',
      'fleet_chain_aborts_total{fleet_chain_abort_type="validation",fleet_interceptor_name="p"} 1',
      '# TYPE nodejs_eventloop_delay_p99 gauge',
      'nodejs_eventloop_delay_p99 0.02',
      '',
    ].join('\n'),
    'orchestrator',
  );
  it.each([
    ['a syntax error', 'sum by (job (rate(fleet_chain_aborts_total[5m]))', /syntax error/],
    ['an unknown metric', 'fleet_chain_abort_total', /no service exports fleet_chain_abort_total/],
    [
      'an unknown label',
      'fleet_chain_aborts_total{fleet_abort_type="validation"}',
      /has no label fleet_abort_type/,
    ],
    [
      'an unknown label value',
      'fleet_chain_aborts_total{fleet_chain_abort_type="valid"}',
      /never served/,
    ],
    [
      'a grouping label the metric lacks',
      'sum by (mcp_method_name) (fleet_chain_aborts_total)',
      /has no mcp_method_name/,
    ],
    [
      'a grouping label dropped below',
      'sum by (fleet_interceptor_name) (max by (job) (fleet_chain_aborts_total))',
      /drops it/,
    ],
    [
      'rate() over a gauge',
      'rate(nodejs_eventloop_delay_p99[5m])',
      /rate\(\) over nodejs_eventloop_delay_p99, a gauge/,
    ],
  ])('catches %s', (_label, expr, message) => {
    const problems = usageProblems([{ where: 'test', expr }], index);
    expect(problems.join('\n')).toMatch(message);
  });

  it('keeps the labels of either side of an or, and only the common ones of other operators', () => {
    expect(outputLabels('sum by (pod, a) (x) > 0\nor\nsum by (pod) (y) > 0')).toEqual(
      new Set(['pod', 'a']),
    );
    expect(outputLabels('sum by (pod, a) (x) / sum by (pod) (y)')).toEqual(new Set(['pod']));
    expect(outputLabels('max(x) > 1 or sum by (pod) (y) > 2')).toEqual(new Set(['pod']));
    expect(outputLabels('x > 1 or sum without (a) (y)')).toBeUndefined();
  });

  it('accepts target labels, up, documented values and labels kept on the way', () => {
    expect(
      usageProblems(
        [
          { where: 'a', expr: 'up{namespace="mcp", job=~"a|b"} == 0' },
          {
            where: 'b',
            expr: 'sum by (pod, fleet_interceptor_name) (rate(fleet_chain_aborts_total{fleet_chain_abort_type=~"invocation|timeout|validation"}[5m]))',
          },
          { where: 'c', expr: 'max by (pod) (sum by (pod, job) (nodejs_eventloop_delay_p99))' },
        ],
        index,
      ),
    ).toEqual([]);
  });
});

describe("against the real services' /metrics", () => {
  let run: FleetRun;
  let index: MetricIndex;
  beforeAll(async () => {
    run = await scrapeRealFleet();
    index = new Map();
    for (const [service, text] of Object.entries(run.scrapes))
      indexExposition(text, service, index);
  }, 180_000);

  it('scraped every service after allowed, denied, failing and refused calls', () => {
    expect(Object.keys(run.scrapes).sort()).toEqual([...SERVICES].sort());
    expect(run.answers.allowed?.result).toBeDefined();
    expect(run.answers.denied?.error?.message).toMatch(/no adding/);
    expect(run.answers.failing?.error).toBeDefined();
    expect(run.answers.refused?.error?.code).toBe(-32603);
    expect(run.answers.overloaded?.error?.code).toBe(-32603);
    expect(run.answers.overloaded?.error?.message).toMatch(/at capacity/);
    // The refusal is counted, by backend, reason and origin (a client's call).
    expect([
      ...(index.get('fleet_backend_refusals_total')?.labels.get('fleet_refusal_reason') ?? []),
    ]).toEqual(['overloaded']);
    expect([
      ...(index.get('fleet_backend_refusals_total')?.labels.get('fleet_call_origin') ?? []),
    ]).toEqual(['client']);
    const abortTypes = index.get('fleet_chain_aborts_total')?.labels.get('fleet_chain_abort_type');
    expect([...(abortTypes ?? [])]).toEqual(expect.arrayContaining(['validation', 'invocation']));
  });

  it('finds every metric, label and label value of the alerts and the dashboard', () => {
    expect(usageProblems(expressionsOf(rendered('enabled')), index)).toEqual([]);
  });
});
