/**
 * deploy/docker/check-dockerfiles.mjs on the real Dockerfile (every target whose service has
 * landed is checked in full, the others are reported pending, so they are covered the moment
 * they land) and on deliberately broken Dockerfiles, so the check is known to bite.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from './helm.ts';

const CHECKER = join(repoRoot, 'deploy/docker/check-dockerfiles.mjs');
const DOCKERFILE = join(repoRoot, 'deploy/docker/Dockerfile');

/** Target → the service directory it ships. */
const TARGETS: Record<string, string> = {
  orchestrator: 'services/orchestrator',
  'pii-redactor': 'services/pii-redactor',
  'policy-validator': 'services/policy-validator',
  'audit-logger': 'services/audit-logger',
  'audit-worker': 'services/audit-logger',
};
/** A service has landed when its src/main.ts exists (DESIGN.md §1), as the checker decides. */
const landed = (dir: string) => existsSync(join(repoRoot, dir, 'src/main.ts'));

interface TargetReport {
  name: string;
  status: 'ok' | 'pending' | 'error';
  serviceDirs: string[];
  user?: string;
  workdir?: string;
  entrypoint?: string[];
  notes: string[];
}
interface Report {
  ok: boolean;
  errors: { file: string; line: number; message: string }[];
  files: {
    file: string;
    dockerignore?: string;
    stages: { name?: string }[];
    targets: TargetReport[];
  }[];
}

function check(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CHECKER, ...args],
      { cwd: repoRoot, timeout: 20_000 },
      (error, stdout, stderr) => {
        resolve({
          code: error ? (typeof error.code === 'number' ? error.code : 1) : 0,
          stdout,
          stderr,
        });
      },
    );
  });
}

async function report(args: string[]): Promise<{ code: number; report: Report }> {
  const result = await check([...args, '--json']);
  try {
    return { code: result.code, report: JSON.parse(result.stdout) as Report };
  } catch {
    throw new Error(
      `checker printed no JSON (exit ${result.code}):\n${result.stdout}\n${result.stderr}`,
    );
  }
}

/** `${NAME}`, written without a template placeholder in a plain string. */
const varRef = (name: string) => `$${'{'}${name}}`;

const temp = mkdtempSync(join(tmpdir(), 'fleet-dockerfile-check-'));
afterAll(() => rmSync(temp, { recursive: true, force: true }));

describe('deploy/docker/Dockerfile', () => {
  const required = [...new Set(Object.values(TARGETS))].filter(landed);

  it('passes the checker, with every landed service required', async () => {
    const { code, report: r } = await report([
      ...required.flatMap((d) => ['--require', d]),
      DOCKERFILE,
    ]);
    expect(r.errors).toEqual([]);
    expect(code).toBe(0);
    expect(r.files[0]?.dockerignore).toBe('deploy/docker/Dockerfile.dockerignore');
  });

  it('has all five targets: landed services checked in full, the others pending', async () => {
    const { report: r } = await report([DOCKERFILE]);
    const targets = Object.fromEntries((r.files[0]?.targets ?? []).map((t) => [t.name, t]));
    expect(Object.keys(targets).sort()).toEqual(Object.keys(TARGETS).sort());
    for (const [name, dir] of Object.entries(TARGETS)) {
      const target = targets[name] as TargetReport;
      expect(target.serviceDirs, name).toEqual([dir]);
      expect(target.status, `${name}: ${target.notes.join('; ')}`).toBe(
        landed(dir) ? 'ok' : 'pending',
      );
      expect(target.user).toBe('10001:10001');
      expect(target.workdir).toBe('/app');
      expect(target.entrypoint).toEqual(
        name === 'audit-worker'
          ? ['node', 'dist/worker.js']
          : ['node', '--no-memory-reducer', 'dist/main.js'],
      );
    }
  });

  it('names the pending targets in its text output', async () => {
    const result = await check([DOCKERFILE]);
    expect(result.code).toBe(0);
    const pending = Object.entries(TARGETS).filter(([, dir]) => !landed(dir));
    for (const [name, dir] of pending)
      expect(result.stdout).toMatch(new RegExp(`pending\\s+${name}\\s+${dir}`));
    if (pending.length > 0) expect(result.stdout).toContain(`${pending.length} pending target(s)`);
    else expect(result.stdout).not.toContain('pending');
  });

  it('fails in --strict mode exactly when a service has not landed', async () => {
    const result = await check(['--strict', DOCKERFILE]);
    const anyPending = Object.values(TARGETS).some((dir) => !landed(dir));
    expect(result.code).toBe(anyPending ? 1 : 0);
  });
});

describe('the checker bites', () => {
  it('reports every problem of a broken Dockerfile', async () => {
    const broken = join(temp, 'Dockerfile.broken');
    writeFileSync(
      broken,
      [
        'ARG NODE_IMAGE=node:20-bookworm-slim',
        `FROM ${varRef('NODE_IMAGE')} AS build`,
        'WORKDIR /repo',
        'COPY package.json pnpm-lock.yaml ./',
        'COPY no/such/dir/ ./missing/',
        'RUN npm install -g pnpm@9.0.0 && pnpm install',
        'RUN pnpm --filter ./services/orchestrator deploy --prod /out',
        '',
        'FROM node AS runtime',
        'COPY --from=biuld /out /app',
        'COPY --from=build /outt /app',
        'ADD packages/core/package.json /app/',
        `COPY ${varRef('UNDEFINED_DIR')}/x /app/`,
        'HEALTHCHECK CMD curl -f http://localhost:8080/healthz',
        'USER 0',
        'ENTRYPOINT node dist/main.js',
        '',
        'FROM build AS build',
        'FORWARD x',
      ].join('\n'),
    );
    const { code, report: r } = await report([broken]);
    expect(code).toBe(1);
    const messages = r.errors.map((e) => `${e.line}: ${e.message}`).join('\n');
    for (const expected of [
      /5: .*no\/such\/dir\/ does not exist in the build context/,
      /6: .*pnpm install without --frozen-lockfile/,
      /6: pnpm 9\.0\.0 pinned, the root package\.json says pnpm@12\.4\.2/,
      /9: FROM node: not an earlier stage and not an image with a tag or digest/,
      /10: .*--from=biuld is not an earlier stage/,
      /11: .*\/outt is not produced by stage build/,
      /12: .*use COPY for local files/,
      /13: .*undefined variable UNDEFINED_DIR/,
      /14: .*HEALTHCHECK is not wanted/,
      /16: .*exec form/,
      /18: duplicate stage "build"/,
      /19: unknown instruction "FORWARD"/,
      /target runtime: USER 0 is root/,
      /target runtime: no WORKDIR/,
    ]) {
      expect(messages).toMatch(expected);
    }
  });

  it('refuses a named user, a context path the .dockerignore drops, and a missing entry source', async () => {
    const dir = join(temp, 'ctx');
    mkdirSync(join(dir, 'services/alpha/src'), { recursive: true });
    mkdirSync(join(dir, 'secrets'), { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ packageManager: 'pnpm@12.4.2' }));
    writeFileSync(join(dir, 'services/alpha/package.json'), '{}');
    writeFileSync(join(dir, 'services/alpha/src/main.ts'), '');
    writeFileSync(join(dir, 'secrets/key.pem'), '');
    const dockerfile = join(dir, 'Dockerfile');
    writeFileSync(
      dockerfile,
      [
        'FROM node:20-bookworm-slim AS build',
        'WORKDIR /repo',
        'COPY package.json ./',
        'COPY secrets/ secrets/',
        'RUN pnpm --filter ./services/alpha deploy --prod /out',
        'FROM node:20-bookworm-slim AS alpha',
        'WORKDIR /app',
        'COPY --from=build /out/ /app/',
        'USER node',
        'ENTRYPOINT ["node", "dist/server.js"]',
      ].join('\n'),
    );
    writeFileSync(`${dockerfile}.dockerignore`, 'secrets\n');
    const { code, report: r } = await report(['--context', dir, dockerfile]);
    expect(code).toBe(1);
    const messages = r.errors.map((e) => e.message).join('\n');
    expect(messages).toMatch(/secrets\/ is excluded by/);
    expect(messages).toMatch(/USER node: use a numeric uid/);
    expect(messages).toMatch(
      /dist\/server\.js has no source: services\/alpha\/src\/server\.ts does not exist/,
    );
  });

  it('requires the service and its workspace dependencies to be copied before pnpm install', async () => {
    const dir = join(temp, 'deps');
    for (const sub of ['services/alpha/src', 'packages/core/src', 'packages/util/src']) {
      mkdirSync(join(dir, sub), { recursive: true });
    }
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ packageManager: 'pnpm@12.4.2' }));
    writeFileSync(join(dir, 'pnpm-lock.yaml'), '');
    writeFileSync(join(dir, 'pnpm-workspace.yaml'), 'packages:\n  - packages/*\n  - services/*\n');
    const manifest = (name: string, deps: Record<string, string>) =>
      JSON.stringify({ name, dependencies: deps });
    writeFileSync(
      join(dir, 'services/alpha/package.json'),
      manifest('@x/alpha', { '@x/core': 'workspace:*' }),
    );
    writeFileSync(
      join(dir, 'packages/core/package.json'),
      manifest('@x/core', { '@x/util': 'workspace:*' }),
    );
    writeFileSync(join(dir, 'packages/util/package.json'), manifest('@x/util', {}));
    writeFileSync(join(dir, 'services/alpha/src/main.ts'), '');
    const dockerfile = join(dir, 'Dockerfile');
    writeFileSync(
      dockerfile,
      [
        'FROM node:20-bookworm-slim AS build',
        'WORKDIR /repo',
        'COPY package.json pnpm-lock.yaml ./',
        'COPY services/ services/',
        'COPY packages/core/ packages/core/',
        'RUN pnpm install --frozen-lockfile',
        'RUN pnpm --filter ./services/alpha deploy --prod /out',
        'FROM node:20-bookworm-slim AS alpha',
        'WORKDIR /app',
        'COPY --from=build /out/ /app/',
        'USER 10001',
        'ENTRYPOINT ["node", "dist/main.js"]',
      ].join('\n'),
    );
    const { code, report: r } = await report(['--context', dir, dockerfile]);
    expect(code).toBe(1);
    const messages = r.errors.map((e) => e.message);
    expect(messages).toContain(
      'RUN in stage build: pnpm install before pnpm-workspace.yaml is copied',
    );
    expect(messages).toContain(
      'target alpha: packages/util (a workspace dependency of services/alpha) is not copied before pnpm install',
    );
    expect(messages.join('\n')).not.toMatch(/packages\/core .*not copied/);
  });

  it('reports a target whose service has not landed as pending, and fails when it is required', async () => {
    const dir = join(temp, 'pending');
    mkdirSync(join(dir, 'services/alpha/src'), { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ packageManager: 'pnpm@12.4.2' }));
    writeFileSync(join(dir, 'services/alpha/package.json'), '{}');
    writeFileSync(join(dir, 'services/alpha/src/main.ts'), '');
    const dockerfile = join(dir, 'Dockerfile');
    writeFileSync(join(dir, 'pnpm-lock.yaml'), '');
    writeFileSync(join(dir, 'pnpm-workspace.yaml'), 'packages:\n  - services/*\n');
    const target = (name: string) => [
      `FROM node:20-bookworm-slim AS build-${name}`,
      'WORKDIR /repo',
      'COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./',
      'COPY services/ services/',
      'RUN pnpm install --frozen-lockfile',
      `RUN pnpm --filter ./services/${name} deploy --prod /out`,
      `FROM node:20-bookworm-slim AS ${name}`,
      'WORKDIR /app',
      `COPY --from=build-${name} /out/ /app/`,
      'USER 10001:10001',
      'ENTRYPOINT ["node", "dist/main.js"]',
    ];
    writeFileSync(dockerfile, [...target('alpha'), ...target('beta')].join('\n'));

    const lenient = await report(['--context', dir, dockerfile]);
    expect(lenient.code).toBe(0);
    const statuses = Object.fromEntries(
      (lenient.report.files[0]?.targets ?? []).map((t) => [t.name, t.status]),
    );
    expect(statuses).toEqual({ alpha: 'ok', beta: 'pending' });

    const text = await check(['--context', dir, dockerfile]);
    expect(text.stdout).toMatch(/pending\s+beta\s+services\/beta does not exist yet/);

    const required = await report(['--context', dir, '--require', 'services/beta', dockerfile]);
    expect(required.code).toBe(1);
    expect(required.report.errors.map((e) => e.message).join('\n')).toMatch(
      /services\/beta does not exist/,
    );

    const strict = await report(['--context', dir, '--strict', dockerfile]);
    expect(strict.code).toBe(1);
  });
});
