/**
 * `fleet new interceptor`: render the templates in `templates/interceptor/` into a new
 * workspace package `services/<name>`. `common/` holds the files every service gets,
 * `validation/` and `mutation/` the files of one kind; `{{name}}`, `{{type}}` and `{{fleet}}`
 * (how the workspace runs the CLI, see {@link workspaceFleetCommand}) are the placeholders,
 * and the `.tmpl` suffix keeps tsc and biome away from the templates.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { CliError } from './errors.ts';
import { FLEET_BIN } from './hints.ts';
import type { InterceptorKind } from './types.ts';

/** Where the templates live: `<package>/templates/interceptor`, from `src/` and `dist/` alike. */
export const INTERCEPTOR_TEMPLATES_DIR = fileURLToPath(
  new URL('../templates/interceptor/', import.meta.url),
);

/**
 * Names a new service may not take: the fleet's own services (those of `fleet up` too),
 * interceptors and packages. The workspace's own package names are checked as well.
 */
export const RESERVED_NAMES: ReadonlySet<string> = new Set([
  'audit-worker',
  'demo-backend',
  'orchestrator',
  'pii-redactor',
  'pii-guard',
  'policy-validator',
  'tool-filter',
  'audit-logger',
  'audit',
  'cli',
  'core',
  'fleet',
  'interceptor-kit',
  'pii',
  'policy',
  'source',
  'telemetry',
  'test',
  'test-fixtures',
]);

const NAME_PATTERN = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;
const MAX_NAME_LENGTH = 40;
const PLACEHOLDER = /\{\{\s*([A-Za-z_][\w]*)\s*\}\}/g;
const TEMPLATE_SUFFIX = '.tmpl';

/** Files the generated package refers to by `../../<file>`: they must be in the workspace root. */
const WORKSPACE_FILES = ['pnpm-workspace.yaml', 'tsconfig.build.base.json', 'vitest.shared.ts'];

/** Options for {@link scaffoldInterceptor}. */
export interface ScaffoldOptions {
  /** Service, package (`@fleet/<name>`) and interceptor name. */
  name: string;
  /** Default `validation`. */
  type?: InterceptorKind;
  /** The workspace's services directory (absolute); the service goes to `<servicesDir>/<name>`. */
  servicesDir: string;
  /** Default {@link INTERCEPTOR_TEMPLATES_DIR}. */
  templatesDir?: string;
}

/** What {@link scaffoldInterceptor} created. */
export interface ScaffoldResult {
  /** The new service's directory (absolute). */
  dir: string;
  packageName: string;
  interceptor: string;
  type: InterceptorKind;
  /** The files written, relative to `dir`, sorted, with `/` separators. */
  files: string[];
}

/**
 * Check a new interceptor service name.
 * @throws {CliError} `INVALID_NAME` saying what is wrong with it.
 */
export function validateInterceptorName(name: string): void {
  if (name === '') throw new CliError('INVALID_NAME', 'the interceptor name is empty');
  if (name.length > MAX_NAME_LENGTH) {
    throw new CliError(
      'INVALID_NAME',
      `"${name}" is too long for an interceptor name (at most ${MAX_NAME_LENGTH} characters)`,
    );
  }
  if (!NAME_PATTERN.test(name)) {
    throw new CliError(
      'INVALID_NAME',
      `"${name}" is not a valid interceptor name: use lowercase letters, digits and single dashes, starting with a letter (e.g. word-guard)`,
    );
  }
  if (RESERVED_NAMES.has(name)) {
    throw new CliError(
      'INVALID_NAME',
      `"${name}" is reserved (a fleet service, interceptor or package has that name): pick another`,
    );
  }
}

/**
 * The packages of the workspace at `root`: package name → directory (relative to `root`),
 * from the `packages` globs of its `pnpm-workspace.yaml` (`dir`, `dir/*`; `!` exclusions
 * and deeper globs are skipped). Unreadable files are passed over.
 */
export function workspacePackages(root: string): Map<string, string> {
  const found = new Map<string, string>();
  let globs: unknown;
  try {
    globs = (
      parseYaml(readFileSync(join(root, 'pnpm-workspace.yaml'), 'utf8')) as {
        packages?: unknown;
      } | null
    )?.packages;
  } catch {
    return found;
  }
  if (!Array.isArray(globs)) return found;
  const dirs: string[] = [];
  for (const glob of globs) {
    if (typeof glob !== 'string' || glob.startsWith('!')) continue;
    const pattern = glob.replace(/^\.\//, '').replace(/\/+$/, '');
    if (pattern.endsWith('/*') && !pattern.slice(0, -2).includes('*')) {
      const parent = pattern.slice(0, -2);
      try {
        for (const entry of readdirSync(join(root, parent), { withFileTypes: true }))
          if (entry.isDirectory()) dirs.push(`${parent}/${entry.name}`);
      } catch {
        // no such directory yet
      }
    } else if (!pattern.includes('*')) dirs.push(pattern);
  }
  for (const dir of dirs) {
    try {
      const { name } = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as {
        name?: unknown;
      };
      if (typeof name === 'string') found.set(name, dir);
    } catch {
      // not a package
    }
  }
  return found;
}

/**
 * How the new service's README runs `fleet` from the workspace root (`root`), whenever it is
 * read: `pnpm fleet` when the root's package.json has a `fleet` script (this repository's
 * runs the CLI from source, with no build and no `fleet` on PATH), else `fleet`, the bin of
 * an installed `@fleet/cli`. Not the command line of the `fleet new` that wrote it, which
 * may have been a path relative to another directory.
 */
export function workspaceFleetCommand(root: string): string {
  try {
    const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts?: Record<string, unknown>;
    };
    if (typeof scripts?.fleet === 'string') return 'pnpm fleet';
  } catch {
    // no readable package.json
  }
  return FLEET_BIN;
}

/**
 * Replace `{{key}}` placeholders with `values`.
 * @throws {Error} for a placeholder without a value (a broken template).
 */
export function renderTemplate(text: string, values: Readonly<Record<string, string>>): string {
  return text.replace(PLACEHOLDER, (match, key: string) => {
    const value = values[key];
    if (value === undefined) throw new Error(`template placeholder ${match} has no value`);
    return value;
  });
}

async function listFiles(root: string, dir = root): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const files: string[] = [];
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await listFiles(root, path)));
    else if (entry.isFile() && entry.name.endsWith(TEMPLATE_SUFFIX)) files.push(path);
  }
  return files;
}

/** The rendered files of one service kind: relative output path → content. */
async function renderService(
  templatesDir: string,
  type: InterceptorKind,
  values: Readonly<Record<string, string>>,
): Promise<Map<string, string>> {
  const rendered = new Map<string, string>();
  // The kind's files come second so that they replace a common file of the same path.
  for (const layer of ['common', type]) {
    const layerDir = join(templatesDir, layer);
    for (const file of await listFiles(layerDir)) {
      const target = relative(layerDir, file)
        .slice(0, -TEMPLATE_SUFFIX.length)
        .split(sep)
        .join('/');
      rendered.set(target, renderTemplate(await readFile(file, 'utf8'), values));
    }
  }
  if (rendered.size === 0) throw new Error(`no templates under ${templatesDir}`);
  return rendered;
}

/**
 * Create `<servicesDir>/<name>`: an interceptor service package built with the kit, with a
 * test and a README. Nothing is written when a check fails; a half-written directory is
 * removed.
 * @throws {CliError} `INVALID_NAME`, `NOT_A_WORKSPACE` or `TARGET_EXISTS`.
 */
export async function scaffoldInterceptor(options: ScaffoldOptions): Promise<ScaffoldResult> {
  const {
    name,
    type = 'validation',
    servicesDir,
    templatesDir = INTERCEPTOR_TEMPLATES_DIR,
  } = options;
  validateInterceptorName(name);
  const root = dirname(servicesDir);
  const missing = WORKSPACE_FILES.filter((file) => !existsSync(join(root, file)));
  if (missing.length > 0) {
    throw new CliError(
      'NOT_A_WORKSPACE',
      `${servicesDir} is not the services directory of a fleet workspace (${root} has no ${missing.join(', ')}): run from the repository root or pass --dir <repository>/services`,
    );
  }
  const taken = workspacePackages(root).get(`@fleet/${name}`);
  if (taken !== undefined) {
    throw new CliError(
      'INVALID_NAME',
      `"${name}" collides with the workspace package @fleet/${name} (${taken}): pick another name`,
    );
  }
  const dir = join(servicesDir, name);
  if (existsSync(dir)) {
    throw new CliError('TARGET_EXISTS', `${dir} exists already: pick another name or remove it`);
  }

  const files = await renderService(templatesDir, type, {
    name,
    type,
    fleet: workspaceFleetCommand(root),
  });
  await mkdir(servicesDir, { recursive: true });
  try {
    await mkdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new CliError('TARGET_EXISTS', `${dir} exists already: pick another name or remove it`);
    }
    throw error;
  }
  try {
    for (const [path, content] of files) {
      const target = join(dir, ...path.split('/'));
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, content);
    }
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    dir,
    packageName: `@fleet/${name}`,
    interceptor: name,
    type,
    files: [...files.keys()].sort(),
  };
}
