/**
 * `fleet new interceptor`: into a temp workspace (files, substitution, refusals), and into
 * this repository, where the generated service must pass its own tests, type-check, lint
 * clean, start, and register with a real orchestrator.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { occupiedPort, sourceCommand, startServiceProcess } from '@fleet/test-fixtures';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InterceptorKind } from '../src/index.ts';
import {
  defer,
  fleet,
  REPO_ROOT,
  runChild,
  startOrchestrator,
  type TestOrchestrator,
  tempWorkspace,
} from './helpers.ts';

const GENERATED_FILES = [
  'README.md',
  'package.json',
  'src/app.ts',
  'src/interceptors.test.ts',
  'src/interceptors.ts',
  'src/main.ts',
  'tsconfig.build.json',
  'vitest.config.ts',
];

const readJson = async (path: string) => JSON.parse(await readFile(path, 'utf8'));

describe('fleet new interceptor, in a temp workspace', () => {
  it('generates a validation service with the name substituted everywhere', async () => {
    const root = await tempWorkspace();
    const run = await fleet(['new', 'interceptor', 'word-guard'], { cwd: root });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const dir = join(root, 'services', 'word-guard');
    for (const file of GENERATED_FILES) expect(existsSync(join(dir, file)), file).toBe(true);
    for (const file of GENERATED_FILES) {
      const text = await readFile(join(dir, file), 'utf8');
      expect(text, file).not.toMatch(/\{\{|\}\}/);
    }

    const pkg = await readJson(join(dir, 'package.json'));
    const core = await readJson(join(REPO_ROOT, 'packages/core/package.json'));
    expect(pkg).toMatchObject({
      name: '@fleet/word-guard',
      type: 'module',
      exports: { '.': { '@fleet/source': './src/app.ts', default: './dist/app.js' } },
      dependencies: { '@fleet/core': 'workspace:*', '@fleet/interceptor-kit': 'workspace:*' },
    });
    expect(pkg.devDependencies).toBeUndefined();
    // The same scripts as every workspace package, plus `start` like the services.
    expect(pkg.scripts).toEqual({
      ...core.scripts,
      bench: "echo 'no benchmark in @fleet/word-guard'",
      start: 'node dist/main.js',
    });
    expect(await readFile(join(dir, 'tsconfig.build.json'), 'utf8')).toBe(
      await readFile(join(REPO_ROOT, 'packages/interceptor-kit/tsconfig.build.json'), 'utf8'),
    );
    expect(await readFile(join(dir, 'vitest.config.ts'), 'utf8')).toBe(
      await readFile(join(REPO_ROOT, 'packages/interceptor-kit/vitest.config.ts'), 'utf8'),
    );

    const interceptors = await readFile(join(dir, 'src/interceptors.ts'), 'utf8');
    expect(interceptors).toContain('defineValidator({');
    expect(interceptors).toContain("name: 'word-guard',");
    const main = await readFile(join(dir, 'src/main.ts'), 'utf8');
    expect(main.startsWith('#!/usr/bin/env node\n')).toBe(true);
    expect(main).toContain('onShutdown(');
    const readme = await readFile(join(dir, 'README.md'), 'utf8');
    for (const step of [
      'pnpm install',
      'pnpm --filter @fleet/word-guard test',
      'pnpm --filter "@fleet/word-guard..." build',
      'PORT=8090 node services/word-guard/dist/main.js',
      '\nfleet register http://127.0.0.1:8090/mcp\n',
      '\nfleet chain --event tools/call --phase request\n',
      '| `BLOCKED_WORDS` |',
    ]) {
      expect(readme).toContain(step);
    }
    // This workspace has no `fleet` script: the README names the installed bin.
    expect(readme).not.toContain('pnpm fleet');

    expect(run.stdout.split('\n').slice(0, 1 + GENERATED_FILES.length)).toEqual([
      'created services/word-guard: package @fleet/word-guard, validation interceptor "word-guard"',
      ...GENERATED_FILES.map((file) => `  ${file}`),
    ]);
    expect(run.stdout).toContain(
      [
        'next steps, from the repository root:',
        '  pnpm install',
        '  pnpm --filter @fleet/word-guard test',
        '  pnpm --filter @fleet/word-guard... build',
        '  PORT=8090 node services/word-guard/dist/main.js',
        '  fleet register http://127.0.0.1:8090/mcp',
        '  fleet chain',
      ].join('\n'),
    );
  });

  it("writes the README's fleet commands as the workspace runs the CLI, however it was launched", async () => {
    const root = await tempWorkspace();
    await writeFile(
      join(root, 'package.json'),
      JSON.stringify({ scripts: { fleet: 'tsx packages/cli/src/main.ts' } }),
    );
    const run = await fleet(['new', 'interceptor', 'word-guard'], {
      cwd: root,
      launcher: 'node ../cli/dist/main.js',
    });
    expect(run.code).toBe(0);
    const readme = await readFile(join(root, 'services/word-guard/README.md'), 'utf8');
    for (const line of [
      'pnpm fleet register http://127.0.0.1:8090/mcp',
      'pnpm fleet chain --event tools/call --phase request',
    ])
      expect(readme.split('\n')).toContain(line);
    for (const words of ['up', 'register', 'services', 'unregister'])
      expect(readme).toContain(`\`pnpm fleet ${words}`);
    // No command line starts with a bare `fleet`, nor with the launch of `fleet new`.
    expect(readme).not.toMatch(/(^|`)fleet (up|register|chain|services|unregister)/m);
    expect(readme).not.toContain('../cli/dist/main.js');
  });

  it('names the --state-dir it was given in its fleet hints, and leaves out the default', async () => {
    const named = await fleet(['new', 'interceptor', 'word-guard', '--state-dir', 'my fleet'], {
      cwd: await tempWorkspace(),
    });
    expect(named.code).toBe(0);
    expect(named.stdout).toContain(
      "\n  fleet register http://127.0.0.1:8090/mcp --state-dir 'my fleet'\n  fleet chain --state-dir 'my fleet'\n",
    );
    const plain = await fleet(['new', 'interceptor', 'word-guard', '--state-dir', '.fleet'], {
      cwd: await tempWorkspace(),
    });
    expect(plain.code).toBe(0);
    expect(plain.stdout).toContain('\n  fleet register http://127.0.0.1:8090/mcp\n  fleet chain\n');
  });

  it('generates a mutation service with --type mutation, and reports it as JSON', async () => {
    const root = await tempWorkspace();
    const run = await fleet(
      ['--json', 'new', 'interceptor', 'result-tagger', '--type', 'mutation', '--dir', 'svc'],
      { cwd: root },
    );
    expect(run.code).toBe(0);
    const dir = join(root, 'svc', 'result-tagger');
    expect(JSON.parse(run.stdout)).toEqual({
      dir,
      packageName: '@fleet/result-tagger',
      interceptor: 'result-tagger',
      type: 'mutation',
      files: GENERATED_FILES,
    });
    const interceptors = await readFile(join(dir, 'src/interceptors.ts'), 'utf8');
    expect(interceptors).toContain('defineMutator({');
    expect(interceptors).not.toContain('defineValidator');
    expect(await readFile(join(dir, 'README.md'), 'utf8')).toContain('| `RESULT_TAG` |');
    expect((await readJson(join(dir, 'package.json'))).description).toContain(
      'a mutation interceptor service',
    );
  });

  it('refuses a directory that exists, and leaves it alone', async () => {
    const root = await tempWorkspace();
    await mkdir(join(root, 'services', 'taken'), { recursive: true });
    await writeFile(join(root, 'services', 'taken', 'mine.txt'), 'keep');
    const run = await fleet(['new', 'interceptor', 'taken'], { cwd: root });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `error: ${join(root, 'services', 'taken')} exists already: pick another name or remove it\n`,
    );
    expect(await readdir(join(root, 'services', 'taken'))).toEqual(['mine.txt']);
  });

  it.each([
    ['', 'the interceptor name is empty'],
    ['Word-Guard', 'is not a valid interceptor name'],
    ['1guard', 'is not a valid interceptor name'],
    ['word--guard', 'is not a valid interceptor name'],
    ['word_guard', 'is not a valid interceptor name'],
    ['-guard', 'is not a valid interceptor name'],
    ['../escape', 'is not a valid interceptor name'],
    ['a'.repeat(41), 'is too long'],
    ['orchestrator', 'is reserved'],
    ['pii-redactor', 'is reserved'],
    ['interceptor-kit', 'is reserved'],
    ['demo-backend', 'is reserved'],
    ['audit-worker', 'is reserved'],
  ])('refuses the name %j (exit 2) and writes nothing', async (name, message) => {
    const root = await tempWorkspace();
    const run = await fleet(['new', 'interceptor', '--', name], { cwd: root });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(message);
    expect(existsSync(join(root, 'services'))).toBe(false);
  });

  it('refuses the name of a package the workspace has elsewhere (exit 2), naming it', async () => {
    const root = await tempWorkspace();
    await writeFile(
      join(root, 'pnpm-workspace.yaml'),
      'packages:\n  - services/*\n  - test/e2e\n  - tools/*\n',
    );
    await mkdir(join(root, 'test', 'e2e'), { recursive: true });
    await writeFile(join(root, 'test', 'e2e', 'package.json'), '{"name": "@fleet/e2e"}\n');
    await mkdir(join(root, 'tools', 'lint-rules'), { recursive: true });
    await writeFile(
      join(root, 'tools', 'lint-rules', 'package.json'),
      '{"name": "@fleet/lint-rules"}\n',
    );
    for (const [name, dir] of [
      ['e2e', 'test/e2e'],
      ['lint-rules', 'tools/lint-rules'],
    ]) {
      const run = await fleet(['new', 'interceptor', name as string], { cwd: root });
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(
        `error: "${name}" collides with the workspace package @fleet/${name} (${dir}): pick another name\n`,
      );
    }
    expect(existsSync(join(root, 'services'))).toBe(false);
  });

  it.each(['e2e', 'deploy-checks', 'conformance-suite'])(
    'refuses %s, a package of this repository (exit 2)',
    async (name) => {
      const run = await fleet(['new', 'interceptor', name]);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`collides with the workspace package @fleet/${name}`);
      expect(existsSync(join(REPO_ROOT, 'services', name))).toBe(false);
    },
  );

  it('refuses a services directory outside a fleet workspace', async () => {
    const root = await mkdtemp(join(tmpdir(), 'fleet-scaffold-'));
    defer(() => rm(root, { recursive: true, force: true }));
    const run = await fleet(['new', 'interceptor', 'word-guard'], { cwd: root });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('is not the services directory of a fleet workspace');
    expect(run.stderr).toContain('pnpm-workspace.yaml, tsconfig.build.base.json, vitest.shared.ts');
    expect(await readdir(root)).toEqual([]);
  });

  it('refuses an unknown --type (exit 2)', async () => {
    const root = await tempWorkspace();
    const run = await fleet(['new', 'interceptor', 'word-guard', '--type', 'audit'], { cwd: root });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('Allowed choices are validation, mutation');
  });
});

// ---------------------------------------------------------------------------------------
// In this repository: the generated service's own test, typecheck, lint, start, register.

const SCAFFOLD_PREFIX = 'zz-cli-scaffold-';
const RUN_ID = randomBytes(4).toString('hex');
const SERVICES_DIR = join(REPO_ROOT, 'services');
const NODE_BIN = process.execPath;
const VITEST = join(REPO_ROOT, 'node_modules/vitest/vitest.mjs');
const TSC = join(REPO_ROOT, 'node_modules/typescript/bin/tsc');
const BIOME = join(REPO_ROOT, 'node_modules/@biomejs/biome/bin/biome');
const created: string[] = [];

/** This process's environment without what would tie a child vitest to this run's report. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...extra };
  for (const key of Object.keys(env)) {
    if (key.startsWith('VITEST') || key === 'FLEET_TEST_REPORT_DIR' || key === 'FORCE_COLOR')
      delete env[key];
  }
  return env;
}

/** What `pnpm install` would link for the new package: its workspace dependencies. */
async function linkWorkspaceDependencies(dir: string): Promise<void> {
  const scope = join(dir, 'node_modules', '@fleet');
  await mkdir(scope, { recursive: true });
  for (const name of ['core', 'interceptor-kit']) {
    await symlink(join(REPO_ROOT, 'packages', name), join(scope, name), 'dir');
  }
}

/** The services this file scaffolds into the repository, and the phase each one hooks. */
const KINDS: ReadonlyArray<[InterceptorKind, string]> = [
  ['validation', 'request'],
  ['mutation', 'response'],
];

/** The name of the `kind` service scaffolded into this repository. */
const serviceName = (kind: InterceptorKind) => `${SCAFFOLD_PREFIX}${kind.slice(0, 3)}-${RUN_ID}`;

/** Scaffold the `kind` service into this repository's services and link what it needs. */
async function scaffoldIntoRepository(kind: InterceptorKind): Promise<void> {
  const name = serviceName(kind);
  const dir = join(SERVICES_DIR, name);
  created.push(dir);
  const run = await fleet(['new', 'interceptor', name, '--type', kind], { cwd: REPO_ROOT });
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toContain(`PORT=8090 node services/${name}/dist/main.js`);
  // This repository runs the CLI through its root script.
  expect(await readFile(join(dir, 'README.md'), 'utf8')).toContain(
    '\npnpm fleet register http://127.0.0.1:8090/mcp\n',
  );
  await linkWorkspaceDependencies(dir);
}

describe('fleet new interceptor, in this repository', () => {
  let orchestrator: TestOrchestrator;

  beforeAll(async () => {
    // Leftovers: of an interrupted run (older than 15 minutes, so never a concurrent run's),
    // or the node_modules a concurrent `pnpm` in this checkout linked for a service that
    // existed while it scanned the workspace (no package.json: never a live service).
    for (const entry of await readdir(SERVICES_DIR)) {
      if (!entry.startsWith(SCAFFOLD_PREFIX)) continue;
      const path = join(SERVICES_DIR, entry);
      const stale = Date.now() - (await stat(path)).mtimeMs > 15 * 60_000;
      if (stale || !existsSync(join(path, 'package.json')))
        await rm(path, { recursive: true, force: true });
    }
    [orchestrator] = await Promise.all([
      startOrchestrator(),
      ...KINDS.map(([kind]) => scaffoldIntoRepository(kind)),
    ]);
  }, 45_000);

  afterAll(async () => {
    for (const dir of created) await rm(dir, { recursive: true, force: true });
    await orchestrator?.close();
  });

  it('both kinds type-check under the strict workspace settings and lint clean', async () => {
    const names = KINDS.map(([kind]) => serviceName(kind));
    const lint = await runChild(
      NODE_BIN,
      [BIOME, 'check', ...names.map((name) => `services/${name}`)],
      { cwd: REPO_ROOT, env: childEnv(), timeoutMs: 30_000 },
    );
    expect(lint.code, `${lint.stdout}\n${lint.stderr}`).toBe(0);

    // One tsc run over both services: most of its time goes to the workspace packages they
    // share. Each file resolves its imports from its own service's node_modules.
    const [first = '', ...others] = names;
    await writeFile(
      join(SERVICES_DIR, first, 'tsconfig.check.json'),
      JSON.stringify({
        extends: '../../tsconfig.base.json',
        compilerOptions: { noEmit: true },
        include: ['src/**/*.ts', ...others.map((name) => `../${name}/src/**/*.ts`)],
      }),
    );
    // --listFiles: the files it checked, to see both services among them.
    const check = await runChild(NODE_BIN, [TSC, '-p', 'tsconfig.check.json', '--listFiles'], {
      cwd: join(SERVICES_DIR, first),
      env: childEnv(),
      timeoutMs: 50_000,
    });
    expect(check.code, `${check.stdout}\n${check.stderr}`).toBe(0);
    for (const name of names)
      expect(check.stdout, name).toContain(`services/${name}/src/interceptors.ts`);
  }, 60_000);

  describe.each(KINDS)('a %s service', (kind, phase) => {
    const name = serviceName(kind);
    const dir = join(SERVICES_DIR, name);

    it('passes its own tests (vitest in the service directory)', async () => {
      const result = await runChild(NODE_BIN, [VITEST, 'run'], {
        cwd: dir,
        env: childEnv(),
        timeoutMs: 50_000,
      });
      const output = `${result.stdout}\n${result.stderr}`;
      expect(result.code, output).toBe(0);
      expect(output).toMatch(/Tests\s+6 passed \(6\)/);
    }, 60_000);

    it('starts, prints the start-up line, and registers with the orchestrator', async () => {
      const token = `service-${RUN_ID}`;
      const service = await startServiceProcess({
        ...sourceCommand(join(dir, 'src/main.ts')),
        cwd: dir,
        env: childEnv({ PORT: '0', FLEET_TOKEN: token }),
        readyTimeoutMs: 30_000,
      });
      defer(() => service.stop());
      expect(service.service).toBe(name);

      const env = {
        FLEET_ORCHESTRATOR_URL: orchestrator.url,
        FLEET_ADMIN_TOKEN: orchestrator.adminToken,
      };
      const registered = await fleet(
        ['--json', 'register', `${service.url}/mcp`, '--token', token],
        { env },
      );
      expect(registered.stderr).toBe('');
      const { id } = JSON.parse(registered.stdout) as { id: string };
      defer(() => fleet(['unregister', id], { env }));

      const chain = await fleet(['chain', '--event', 'tools/call', '--phase', phase], { env });
      expect(chain.code).toBe(0);
      const row = chain.stdout.split('\n').find((line) => line.includes(name));
      expect(row?.trim().split(/\s{2,}/)).toEqual([
        `1 ${kind === 'validation' ? 'validators' : 'mutators'}`,
        name,
        kind,
        'active',
        '0',
        'no',
        '-',
        id,
      ]);
    }, 60_000);

    it('refuses a PORT in use, or a bad one, with one line naming it and exit 1', async () => {
      const held = await occupiedPort();
      defer(() => held.close());
      for (const [port, line] of [
        [
          String(held.port),
          `PORT: cannot listen on 127.0.0.1:${held.port}: the port is in use (EADDRINUSE)`,
        ],
        ['80000', 'PORT must be an integer from 0 to 65535 (digits only), got "80000"'],
      ] as const) {
        const error = await startServiceProcess({
          ...sourceCommand(join(dir, 'src/main.ts')),
          cwd: dir,
          env: childEnv({ PORT: port }),
          readyTimeoutMs: 30_000,
        }).catch((e: unknown) => String(e));
        expect(error).toContain('exited before its start-up line (code 1');
        expect(error).toContain(line);
        expect(error).not.toMatch(/\n\s+at /);
      }
    }, 60_000);
  });
});
