/**
 * Offline validation of rendered manifests: the kubernetes-models class of each
 * apiVersion/kind (the Kubernetes OpenAPI schemas, compiled), a hand check of the
 * Prometheus Operator ServiceMonitor and PrometheusRule (CRDs kubernetes-models does not
 * ship), and a check of
 * field names where a typo would otherwise pass silently (the compiled schemas allow unknown
 * properties, so `readinesProbe` would validate).
 */

import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import type { Manifest } from './helm.ts';

type Validator = (manifest: Manifest) => void;

// Each model takes its own typed data; the rendered objects are checked by validate().
const model =
  (make: (data: never) => { validate(): void }): Validator =>
  (manifest) =>
    make(manifest as never).validate();

const MODELS: Record<string, Validator> = {
  'v1/ConfigMap': model((d) => new ConfigMap(d)),
  'v1/Secret': model((d) => new Secret(d)),
  'v1/Service': model((d) => new Service(d)),
  'v1/ServiceAccount': model((d) => new ServiceAccount(d)),
  'apps/v1/Deployment': model((d) => new Deployment(d)),
  'apps/v1/StatefulSet': model((d) => new StatefulSet(d)),
  'autoscaling/v2/HorizontalPodAutoscaler': model((d) => new HorizontalPodAutoscaler(d)),
  'networking.k8s.io/v1/Ingress': model((d) => new Ingress(d)),
  'networking.k8s.io/v1/NetworkPolicy': model((d) => new NetworkPolicy(d)),
  'policy/v1/PodDisruptionBudget': model((d) => new PodDisruptionBudget(d)),
  'monitoring.coreos.com/v1/ServiceMonitor': validateServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': validatePrometheusRule,
};

/** `apiVersion/kind`, the key of {@link MODELS}. */
export function typeKey(manifest: Manifest): string {
  return `${manifest.apiVersion}/${manifest.kind}`;
}

/**
 * Validate one manifest. Throws with the object's kind/name and every problem found: an
 * unknown apiVersion/kind is a problem too (a new kind needs a schema here first).
 */
export function validateManifest(manifest: Manifest): void {
  const id = `${typeKey(manifest)} ${manifest.metadata?.name ?? '(no name)'}`;
  const validate = MODELS[typeKey(manifest)];
  if (!validate) throw new Error(`${id}: no schema for this apiVersion/kind`);
  const problems: string[] = [];
  try {
    validate(manifest);
  } catch (error) {
    problems.push((error as Error).message);
  }
  problems.push(...unknownFields(manifest));
  if (
    !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(manifest.metadata?.name ?? '') ||
    manifest.metadata.name.length > 63
  ) {
    problems.push(
      `metadata.name "${manifest.metadata?.name}" is not a DNS-1123 label of at most 63 characters`,
    );
  }
  if (problems.length > 0) throw new Error(`${id}:\n  ${problems.join('\n  ')}`);
}

const DURATION = /^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$/;

/** monitoring.coreos.com/v1 ServiceMonitor: the fields the operator requires or parses. */
function validateServiceMonitor(manifest: Manifest): void {
  const problems: string[] = [];
  const spec = manifest.spec;
  if (!manifest.metadata?.name) problems.push('metadata.name is required');
  if (!spec || typeof spec !== 'object') throw new Error('spec is required');
  const selector = spec.selector;
  if (!selector || typeof selector !== 'object') problems.push('spec.selector is required');
  else if (selector.matchLabels !== undefined && !isStringMap(selector.matchLabels)) {
    problems.push('spec.selector.matchLabels must map strings to strings');
  }
  if (!Array.isArray(spec.endpoints) || spec.endpoints.length === 0) {
    problems.push('spec.endpoints must be a non-empty list');
  } else {
    spec.endpoints.forEach((endpoint: Record<string, unknown>, index: number) => {
      const where = `spec.endpoints[${index}]`;
      if (typeof endpoint.port !== 'string' && typeof endpoint.targetPort === 'undefined') {
        problems.push(`${where}: port (a Service port name) or targetPort is required`);
      }
      if (
        endpoint.path !== undefined &&
        (typeof endpoint.path !== 'string' || !endpoint.path.startsWith('/'))
      ) {
        problems.push(`${where}.path must be an absolute path`);
      }
      for (const key of ['interval', 'scrapeTimeout']) {
        if (endpoint[key] !== undefined && !DURATION.test(String(endpoint[key]))) {
          problems.push(`${where}.${key} "${endpoint[key]}" is not a duration`);
        }
      }
      if (endpoint.scheme !== undefined && !['http', 'https'].includes(String(endpoint.scheme))) {
        problems.push(`${where}.scheme must be http or https`);
      }
    });
  }
  if (spec.namespaceSelector !== undefined) {
    const ns = spec.namespaceSelector;
    if (
      ns.matchNames !== undefined &&
      !(Array.isArray(ns.matchNames) && ns.matchNames.every((n: unknown) => typeof n === 'string'))
    ) {
      problems.push('spec.namespaceSelector.matchNames must be a list of strings');
    }
  }
  const known = new Set([
    'selector',
    'endpoints',
    'namespaceSelector',
    'jobLabel',
    'targetLabels',
    'podTargetLabels',
    'sampleLimit',
  ]);
  for (const key of Object.keys(spec))
    if (!known.has(key)) problems.push(`spec.${key} is not a ServiceMonitor field`);
  if (problems.length > 0) throw new Error(problems.join('; '));
}

/**
 * monitoring.coreos.com/v1 PrometheusRule: the fields of the operator's CRD (v0.8x), what it
 * requires, and what Prometheus refuses when it loads the rule file (a rule that is both or
 * neither alert and record, a bad duration, a non-string label or annotation).
 */
function validatePrometheusRule(manifest: Manifest): void {
  const problems: string[] = [];
  const spec = manifest.spec;
  if (!spec || typeof spec !== 'object') throw new Error('spec is required');
  for (const key of Object.keys(spec))
    if (key !== 'groups') problems.push(`spec.${key} is not a PrometheusRule field`);
  if (!Array.isArray(spec.groups) || spec.groups.length === 0) {
    throw new Error('spec.groups must be a non-empty list');
  }
  const groupFields = new Set([
    'name',
    'interval',
    'rules',
    'limit',
    'query_offset',
    'partial_response_strategy',
    'labels',
  ]);
  const ruleFields = new Set([
    'alert',
    'record',
    'expr',
    'for',
    'keep_firing_for',
    'labels',
    'annotations',
  ]);
  const groupNames = new Set<string>();
  spec.groups.forEach((group: Record<string, unknown>, g: number) => {
    const where = `spec.groups[${g}]`;
    for (const key of Object.keys(group))
      if (!groupFields.has(key)) problems.push(`${where}.${key} is not a rule group field`);
    if (typeof group.name !== 'string' || group.name === '')
      problems.push(`${where}.name is required`);
    else if (groupNames.has(group.name))
      problems.push(`${where}.name "${group.name}" is used twice`);
    else groupNames.add(group.name);
    if (group.interval !== undefined && !DURATION.test(String(group.interval)))
      problems.push(`${where}.interval "${group.interval}" is not a duration`);
    if (!Array.isArray(group.rules) || group.rules.length === 0) {
      problems.push(`${where}.rules must be a non-empty list`);
      return;
    }
    group.rules.forEach((rule: Record<string, unknown>, r: number) => {
      const at = `${where}.rules[${r}]`;
      for (const key of Object.keys(rule))
        if (!ruleFields.has(key)) problems.push(`${at}.${key} is not a rule field`);
      const isAlert = typeof rule.alert === 'string' && rule.alert !== '';
      const isRecord = typeof rule.record === 'string' && rule.record !== '';
      if (isAlert === isRecord) problems.push(`${at}: exactly one of alert and record is required`);
      if (typeof rule.expr !== 'string' || rule.expr.trim() === '')
        problems.push(`${at}.expr is required`);
      for (const key of ['for', 'keep_firing_for']) {
        if (rule[key] === undefined) continue;
        if (isRecord) problems.push(`${at}.${key} is only for alerts`);
        if (!DURATION.test(String(rule[key])))
          problems.push(`${at}.${key} "${rule[key]}" is not a duration`);
      }
      if (rule.labels !== undefined && !isStringMap(rule.labels))
        problems.push(`${at}.labels must map strings to strings`);
      if (rule.annotations !== undefined && (isRecord || !isStringMap(rule.annotations)))
        problems.push(`${at}.annotations must map strings to strings (alerts only)`);
    });
  });
  if (problems.length > 0) throw new Error(problems.join('; '));
}

function isStringMap(value: unknown): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    Object.values(value).every((v) => typeof v === 'string')
  );
}

// Field names of the objects the chart writes by hand (Kubernetes 1.34 API).
const FIELDS = {
  podSpec: new Set([
    'activeDeadlineSeconds',
    'affinity',
    'automountServiceAccountToken',
    'containers',
    'dnsConfig',
    'dnsPolicy',
    'enableServiceLinks',
    'ephemeralContainers',
    'hostAliases',
    'hostIPC',
    'hostNetwork',
    'hostPID',
    'hostUsers',
    'hostname',
    'hostnameOverride',
    'imagePullSecrets',
    'initContainers',
    'nodeName',
    'nodeSelector',
    'os',
    'overhead',
    'preemptionPolicy',
    'priority',
    'priorityClassName',
    'readinessGates',
    'resourceClaims',
    'resources',
    'restartPolicy',
    'runtimeClassName',
    'schedulerName',
    'schedulingGates',
    'securityContext',
    'serviceAccount',
    'serviceAccountName',
    'setHostnameAsFQDN',
    'shareProcessNamespace',
    'subdomain',
    'terminationGracePeriodSeconds',
    'tolerations',
    'topologySpreadConstraints',
    'volumes',
  ]),
  container: new Set([
    'args',
    'command',
    'env',
    'envFrom',
    'image',
    'imagePullPolicy',
    'lifecycle',
    'livenessProbe',
    'name',
    'ports',
    'readinessProbe',
    'resizePolicy',
    'resources',
    'restartPolicy',
    'restartPolicyRules',
    'securityContext',
    'startupProbe',
    'stdin',
    'stdinOnce',
    'terminationMessagePath',
    'terminationMessagePolicy',
    'tty',
    'volumeDevices',
    'volumeMounts',
    'workingDir',
  ]),
  podSecurityContext: new Set([
    'appArmorProfile',
    'fsGroup',
    'fsGroupChangePolicy',
    'runAsGroup',
    'runAsNonRoot',
    'runAsUser',
    'seLinuxChangePolicy',
    'seLinuxOptions',
    'seccompProfile',
    'supplementalGroups',
    'supplementalGroupsPolicy',
    'sysctls',
    'windowsOptions',
  ]),
  securityContext: new Set([
    'allowPrivilegeEscalation',
    'appArmorProfile',
    'capabilities',
    'privileged',
    'procMount',
    'readOnlyRootFilesystem',
    'runAsGroup',
    'runAsNonRoot',
    'runAsUser',
    'seLinuxOptions',
    'seccompProfile',
    'windowsOptions',
  ]),
  probe: new Set([
    'exec',
    'failureThreshold',
    'grpc',
    'httpGet',
    'initialDelaySeconds',
    'periodSeconds',
    'successThreshold',
    'tcpSocket',
    'terminationGracePeriodSeconds',
    'timeoutSeconds',
  ]),
  metadata: new Set([
    'name',
    'namespace',
    'labels',
    'annotations',
    'generateName',
    'finalizers',
    'ownerReferences',
  ]),
  topLevel: new Set([
    'apiVersion',
    'kind',
    'metadata',
    'spec',
    'data',
    'stringData',
    'binaryData',
    'type',
    'immutable',
    'automountServiceAccountToken',
    'imagePullSecrets',
    'secrets',
  ]),
} satisfies Record<string, ReadonlySet<string>>;

function extraKeys(value: unknown, allowed: ReadonlySet<string>, where: string): string[] {
  if (typeof value !== 'object' || value === null) return [];
  return Object.keys(value)
    .filter((key) => !allowed.has(key))
    .map((key) => `${where}.${key} is not a field of this object`);
}

/** Field-name typos in the hand-written parts: pod spec, containers, security contexts, probes. */
export function unknownFields(manifest: Manifest): string[] {
  const problems = [
    ...extraKeys(manifest, FIELDS.topLevel, manifest.kind),
    ...extraKeys(manifest.metadata, FIELDS.metadata, 'metadata'),
  ];
  const pod = manifest.spec?.template?.spec;
  if (!pod) return problems;
  problems.push(...extraKeys(pod, FIELDS.podSpec, 'spec.template.spec'));
  problems.push(
    ...extraKeys(
      pod.securityContext,
      FIELDS.podSecurityContext,
      'spec.template.spec.securityContext',
    ),
  );
  for (const [index, container] of [
    ...(pod.containers ?? []),
    ...(pod.initContainers ?? []),
  ].entries()) {
    const where = `containers[${index}]`;
    problems.push(...extraKeys(container, FIELDS.container, where));
    problems.push(
      ...extraKeys(container.securityContext, FIELDS.securityContext, `${where}.securityContext`),
    );
    for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe']) {
      problems.push(...extraKeys(container[probe], FIELDS.probe, `${where}.${probe}`));
    }
  }
  return problems;
}
