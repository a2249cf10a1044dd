#!/usr/bin/env node
/**
 * Static checks of the fleet's Dockerfiles, for machines where Docker cannot run.
 *
 *   node deploy/docker/check-dockerfiles.mjs [options] [Dockerfile ...]
 *
 * Without files it checks every deploy/docker/Dockerfile* (except *.dockerignore). Options:
 *   --context DIR    build context (default: the repository root, two levels up from here)
 *   --require DIR    a service directory (e.g. services/orchestrator) that must exist and be
 *                    built by some target; repeatable
 *   --strict         a target whose service has not landed yet is an error, not "pending"
 *   --json           print a JSON report instead of text
 *
 * Per Dockerfile: parser directives, line continuations and heredocs are understood; ARG/ENV
 * substitution in FROM, COPY and the like; stage names unique; `FROM <stage>` and
 * `COPY --from` / `RUN --mount=...,from=` name an earlier stage (or a pinned image);
 * COPY/ADD sources exist in the context and are not excluded by the Dockerfile's
 * `<name>.dockerignore` (or the context's .dockerignore); `COPY --from=<stage>` sources are
 * paths that stage produced (its WORKDIR, a COPY destination, a path its RUN lines name);
 * ADD is not used for local files; no HEALTHCHECK; `pnpm install` uses --frozen-lockfile and
 * the pinned pnpm matches the root package.json `packageManager`.
 * Per target (a stage no other stage builds on): WORKDIR set, a numeric non-root USER,
 * ENTRYPOINT in exec form, and the service it ships (found from `--filter ./services/<name>`
 * in its build chain). A service has landed when `<dir>/src/main.ts` exists (DESIGN.md §1);
 * then `ENTRYPOINT ["node", "dist/<x>.js"]` must have its `<dir>/src/<x>.ts`. A target whose
 * service has not landed is reported as pending.
 *
 * Exit status: 0 when there are no errors, 1 otherwise, 2 on bad usage.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, posix, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

const INSTRUCTIONS = new Set([
  'ADD',
  'ARG',
  'CMD',
  'COPY',
  'ENTRYPOINT',
  'ENV',
  'EXPOSE',
  'FROM',
  'HEALTHCHECK',
  'LABEL',
  'MAINTAINER',
  'ONBUILD',
  'RUN',
  'SHELL',
  'STOPSIGNAL',
  'USER',
  'VOLUME',
  'WORKDIR',
]);

/** Paths any Debian-based image has; `COPY --from=<stage>` of these needs no provenance. */
const SYSTEM_PATHS = ['/usr', '/etc', '/bin', '/sbin', '/lib', '/lib64', '/opt', '/var', '/root'];

function parseArgs(argv) {
  const options = { context: resolve(here, '../..'), require: [], strict: false, json: false };
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const next = argv[++i];
      if (next === undefined) usage(`${arg} needs a value`);
      return next;
    };
    if (arg === '--context') options.context = resolve(value());
    else if (arg === '--require') options.require.push(value().replace(/\/+$/, ''));
    else if (arg === '--strict') options.strict = true;
    else if (arg === '--json') options.json = true;
    else if (arg === '--help' || arg === '-h') usage();
    else if (arg.startsWith('-')) usage(`unknown option ${arg}`);
    else files.push(resolve(arg));
  }
  if (files.length === 0) {
    for (const name of readdirSync(here).sort()) {
      if (name.startsWith('Dockerfile') && !name.endsWith('.dockerignore')) {
        files.push(join(here, name));
      }
    }
  }
  return { options, files };
}

function usage(message) {
  if (message) process.stderr.write(`check-dockerfiles: ${message}\n`);
  process.stderr.write(
    'usage: check-dockerfiles.mjs [--context DIR] [--require DIR]... [--strict] [--json] [Dockerfile ...]\n',
  );
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Lexing

/** Logical instructions: `{line, keyword, rest, heredocs}` (line = first physical line). */
export function lex(text) {
  const lines = text.split(/\r?\n/);
  let escapeChar = '\\';
  let index = 0;
  // Parser directives: only at the very top, before any instruction, blank line or comment.
  for (; index < lines.length; index++) {
    const match = /^#\s*([a-z]+)\s*=\s*(\S+)\s*$/i.exec(lines[index]);
    if (!match) break;
    if (match[1].toLowerCase() === 'escape') escapeChar = match[2];
  }
  const out = [];
  while (index < lines.length) {
    const start = index;
    let raw = lines[index++];
    if (/^\s*(#|$)/.test(raw)) continue;
    let logical = '';
    for (;;) {
      const trimmed = raw.replace(/\s+$/, '');
      if (trimmed.endsWith(escapeChar)) {
        logical += `${trimmed.slice(0, -escapeChar.length)} `;
        // Comment and empty lines inside a continuation are dropped, as Docker does.
        while (index < lines.length && /^\s*(#|$)/.test(lines[index])) index++;
        if (index >= lines.length) break;
        raw = lines[index++];
        continue;
      }
      logical += raw;
      break;
    }
    const match = /^\s*([A-Za-z]+)(?:\s+([\s\S]*))?$/.exec(logical);
    if (!match) {
      out.push({ line: start + 1, keyword: '', rest: logical.trim(), heredocs: [] });
      continue;
    }
    const rest = (match[2] ?? '').trim();
    // Heredocs (`RUN <<EOF` ... `EOF`): swallow their bodies.
    const heredocs = [];
    for (const doc of rest.matchAll(/<<-?(["']?)([A-Za-z_][A-Za-z0-9_]*)\1/g)) {
      const body = [];
      while (index < lines.length && lines[index].trim() !== doc[2]) body.push(lines[index++]);
      index++;
      heredocs.push({ name: doc[2], body: body.join('\n') });
    }
    out.push({ line: start + 1, keyword: match[1].toUpperCase(), rest, heredocs });
  }
  return out;
}

/** Leading `--name=value` / `--name` flags, and what follows them. */
function splitFlags(rest) {
  const flags = {};
  let remaining = rest;
  for (;;) {
    const match = /^--([a-z-]+)(?:=("[^"]*"|\S*))?\s*/.exec(remaining);
    if (!match) break;
    const value = match[2] === undefined ? true : match[2].replace(/^"|"$/g, '');
    if (flags[match[1]] === undefined) flags[match[1]] = value;
    else flags[match[1]] = [].concat(flags[match[1]], value);
    remaining = remaining.slice(match[0].length);
  }
  return { flags, remaining };
}

/** Whitespace-separated words, honouring simple quotes. */
function words(text) {
  const out = [];
  for (const match of text.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g)) {
    out.push(match[1] ?? match[2] ?? match[3]);
  }
  return out;
}

/** An exec-form (JSON array) argument list, or undefined for shell form. */
function execForm(rest) {
  if (!rest.startsWith('[')) return undefined;
  try {
    const value = JSON.parse(rest);
    return Array.isArray(value) && value.every((v) => typeof v === 'string') ? value : undefined;
  } catch {
    return undefined;
  }
}

/** `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR:+alt}`; unknown names stay marked. */
function substitute(text, vars, unresolved) {
  return text.replace(
    /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g,
    (whole, braced, op, word, bare) => {
      const name = braced ?? bare;
      const value = vars.get(name);
      if (op === '-') return value === undefined || value === '' ? word : value;
      if (op === '+') return value === undefined || value === '' ? '' : word;
      if (value === undefined) {
        unresolved.push(name);
        return whole;
      }
      return value;
    },
  );
}

// ---------------------------------------------------------------------------------------------
// .dockerignore (moby patternmatcher semantics: last matching pattern wins, a pattern that
// matches a parent directory matches everything below it)

function loadIgnore(dockerfile, context) {
  for (const candidate of [`${dockerfile}.dockerignore`, join(context, '.dockerignore')]) {
    if (existsSync(candidate)) {
      const patterns = [];
      for (const rawLine of readFileSync(candidate, 'utf8').split(/\r?\n/)) {
        let line = rawLine.trim();
        if (line === '' || line.startsWith('#')) continue;
        const exclusion = line.startsWith('!');
        if (exclusion) line = line.slice(1).trim();
        line = posix.normalize(line.replace(/^\/+/, '')).replace(/\/+$/, '');
        patterns.push({ exclusion, regex: globToRegex(line), source: rawLine.trim() });
      }
      return { file: candidate, patterns };
    }
  }
  return { file: undefined, patterns: [] };
}

function globToRegex(glob) {
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '*' && glob[i + 1] === '*') {
      // `**/` matches zero or more directories; a trailing `**` matches anything.
      if (glob[i + 2] === '/') {
        out += '(?:.*/)?';
        i += 2;
      } else {
        out += '.*';
        i += 1;
      }
    } else if (c === '*') out += '[^/]*';
    else if (c === '?') out += '[^/]';
    else out += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${out}$`);
}

/** Whether `path` (relative to the context, posix) is excluded from the build context. */
function isIgnored(ignore, path) {
  const parts = path.split('/');
  let excluded = false;
  for (const pattern of ignore.patterns) {
    let matched = false;
    for (let n = parts.length; n >= 1 && !matched; n--) {
      matched = pattern.regex.test(parts.slice(0, n).join('/'));
    }
    if (matched) excluded = !pattern.exclusion;
  }
  return excluded;
}

// ---------------------------------------------------------------------------------------------
// Context paths

/** Files and directories in the context matching a COPY source (with `*`, `?` globs). */
function expandSource(context, source) {
  const clean = posix.normalize(source.replace(/^\.?\/+/, '') || '.');
  if (clean.startsWith('..')) return { escaped: true, matches: [] };
  if (!/[*?[]/.test(clean)) {
    return { escaped: false, matches: existsSync(join(context, clean)) ? [clean] : [] };
  }
  const parts = clean.split('/');
  let current = ['.'];
  for (const part of parts) {
    const next = [];
    const regex = globToRegex(part);
    for (const dir of current) {
      const abs = join(context, dir);
      if (!/[*?[]/.test(part)) {
        if (existsSync(join(abs, part))) next.push(posix.join(dir, part));
        continue;
      }
      let entries = [];
      try {
        entries = statSync(abs).isDirectory() ? readdirSync(abs) : [];
      } catch {
        entries = [];
      }
      for (const entry of entries) if (regex.test(entry)) next.push(posix.join(dir, entry));
    }
    current = next;
  }
  return { escaped: false, matches: current };
}

function isPinnedImage(reference) {
  if (reference === 'scratch') return true;
  const lastSegment = reference.split('/').pop() ?? '';
  return reference.includes('@sha256:') || lastSegment.includes(':');
}

/** `/a/b` is equal to, under, or a parent of one of `known`. */
function related(path, known) {
  const norm = posix.normalize(path).replace(/\/+$/, '') || '/';
  return known.some((k) => {
    const base = posix.normalize(k).replace(/\/+$/, '') || '/';
    return (
      norm === base ||
      norm.startsWith(base === '/' ? '/' : `${base}/`) ||
      base.startsWith(norm === '/' ? '/' : `${norm}/`)
    );
  });
}

// ---------------------------------------------------------------------------------------------
// One Dockerfile

export function checkDockerfile(file, options) {
  const context = options.context;
  const display = relative(process.cwd(), file) || file;
  const errors = [];
  const error = (line, message) => errors.push({ file: display, line, message });
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch (cause) {
    error(0, `cannot read: ${cause.message}`);
    return { file: display, stages: [], targets: [], errors };
  }
  const ignore = loadIgnore(file, context);
  const globalArgs = new Map();
  const stages = [];
  let stage;
  const pnpmPins = [];
  const installs = [];

  const stageByRef = (ref, beforeIndex) => {
    if (/^\d+$/.test(ref)) {
      const n = Number(ref);
      return n < beforeIndex ? stages[n] : undefined;
    }
    return stages.find((s) => s.index < beforeIndex && s.name === ref.toLowerCase());
  };

  for (const instruction of lex(text)) {
    const { line, keyword, rest } = instruction;
    if (!INSTRUCTIONS.has(keyword)) {
      error(line, `unknown instruction "${keyword || rest.slice(0, 20)}"`);
      continue;
    }
    const unresolved = [];
    if (keyword === 'ARG') {
      const [nameValue] = words(rest);
      const match = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/.exec(nameValue ?? '');
      if (!match) {
        error(line, `malformed ARG "${rest}"`);
        continue;
      }
      const [, name, value] = match;
      if (name === 'PNPM_VERSION' && value) pnpmPins.push({ line, version: value });
      if (!stage) globalArgs.set(name, value);
      else stage.vars.set(name, value ?? globalArgs.get(name) ?? stage.vars.get(name));
      continue;
    }
    if (keyword === 'FROM') {
      const { flags, remaining } = splitFlags(rest);
      const parts = words(remaining);
      const image = substitute(parts[0] ?? '', globalArgs, unresolved);
      let name;
      if (parts.length === 3 && parts[1].toUpperCase() === 'AS') name = parts[2].toLowerCase();
      else if (parts.length !== 1) error(line, `malformed FROM "${rest}"`);
      if (unresolved.length) error(line, `FROM uses undefined ARG ${unresolved.join(', ')}`);
      if (name && stages.some((s) => s.name === name)) error(line, `duplicate stage "${name}"`);
      if (name && !/^[a-z][a-z0-9_.-]*$/.test(name)) error(line, `bad stage name "${name}"`);
      const base = stageByRef(image, stages.length);
      if (!base) {
        if (stages.some((s) => s.name === image.toLowerCase())) {
          error(line, `FROM ${image} names a later stage`);
        } else if (!isPinnedImage(image)) {
          error(line, `FROM ${image}: not an earlier stage and not an image with a tag or digest`);
        }
      }
      stage = {
        index: stages.length,
        name,
        line,
        image,
        platform: flags.platform,
        base: base?.index,
        deps: new Set(base ? [base.index] : []),
        // Variables every image defines (ENV PATH=/x:$PATH must not read as undefined).
        vars: new Map(
          base
            ? base.vars
            : [
                ['PATH', '$PATH'],
                ['HOME', '$HOME'],
              ],
        ),
        workdir: base?.workdir,
        user: base?.user,
        entrypoint: base?.entrypoint,
        healthchecks: [],
        produced: base ? [...base.produced] : [],
        contextSources: base ? [...base.contextSources] : [],
        runs: [],
        external: base ? base.external : image !== 'scratch',
      };
      stages.push(stage);
      continue;
    }
    if (!stage) {
      error(line, `${keyword} before the first FROM`);
      continue;
    }
    const where = `${keyword} in stage ${stage.name ?? stage.index}`;
    switch (keyword) {
      case 'ENV': {
        const parts = words(rest);
        if (parts.length >= 2 && !parts[0].includes('=')) {
          stage.vars.set(parts[0], substitute(parts.slice(1).join(' '), stage.vars, unresolved));
        } else {
          for (const part of parts) {
            const eq = part.indexOf('=');
            if (eq <= 0) {
              error(line, `malformed ENV "${part}"`);
              continue;
            }
            const value = substitute(part.slice(eq + 1), stage.vars, unresolved);
            stage.vars.set(part.slice(0, eq), value);
            if (value.startsWith('/')) stage.produced.push(...value.split(':'));
          }
        }
        break;
      }
      case 'WORKDIR': {
        const dir = substitute(rest, stage.vars, unresolved);
        stage.workdir = isAbsolute(dir)
          ? posix.normalize(dir)
          : posix.join(stage.workdir ?? '/', dir);
        stage.produced.push(stage.workdir);
        break;
      }
      case 'USER':
        stage.user = substitute(rest, stage.vars, unresolved).trim();
        break;
      case 'ENTRYPOINT': {
        const args = execForm(rest);
        if (!args)
          error(
            line,
            `${where}: use the exec form ENTRYPOINT ["node", "..."] so SIGTERM reaches node`,
          );
        stage.entrypoint = { line, args: args ?? words(rest), exec: Boolean(args) };
        break;
      }
      case 'CMD':
        break;
      case 'HEALTHCHECK':
        if (rest.trim().toUpperCase() !== 'NONE') {
          error(
            line,
            `${where}: HEALTHCHECK is not wanted (Kubernetes probes /healthz and /readyz)`,
          );
        }
        stage.healthchecks.push(line);
        break;
      case 'RUN': {
        const { flags, remaining } = splitFlags(rest);
        const command = [remaining, ...instruction.heredocs.map((h) => h.body)].join('\n');
        stage.runs.push({ line, command });
        for (const mount of [].concat(flags.mount ?? [])) {
          const from = /(?:^|,)from=([^,]+)/.exec(String(mount))?.[1];
          if (from === undefined) continue;
          const source = stageByRef(from, stage.index);
          if (source) stage.deps.add(source.index);
          else if (!isPinnedImage(from))
            error(line, `${where}: --mount from=${from} is not an earlier stage`);
        }
        for (const token of command.split(/[\s;&|()'"=]+/)) {
          if (token.startsWith('/') && token.length > 1) stage.produced.push(token);
        }
        for (const segment of command.split(/&&|\|\||[;|\n]/)) {
          const argv = words(segment.trim());
          if (argv[0] !== 'pnpm' || !argv.slice(1).some((w) => w === 'install' || w === 'i'))
            continue;
          if (!argv.includes('--frozen-lockfile'))
            error(line, `${where}: pnpm install without --frozen-lockfile`);
          installs.push({ line, where, stage: stage.index, sources: [...stage.contextSources] });
        }
        for (const match of command.matchAll(/\bpnpm@(\d+\.\d+\.\d+)/g)) {
          pnpmPins.push({ line, version: match[1] });
        }
        break;
      }
      case 'COPY':
      case 'ADD': {
        const { flags, remaining } = splitFlags(rest);
        const parts = (execForm(remaining) ?? words(remaining)).map((p) =>
          substitute(p, stage.vars, unresolved),
        );
        if (parts.length < 2) {
          error(line, `${where}: needs at least one source and a destination`);
          break;
        }
        const dest = parts[parts.length - 1];
        const sources = parts.slice(0, -1);
        const destAbs = isAbsolute(dest) ? dest : posix.join(stage.workdir ?? '/', dest);
        stage.produced.push(destAbs);
        if (typeof flags.from === 'string') {
          const source = stageByRef(flags.from, stage.index);
          if (!source) {
            if (stages.some((s) => s.name === flags.from.toLowerCase())) {
              error(line, `${where}: --from=${flags.from} names a later stage`);
            } else if (!isPinnedImage(flags.from)) {
              error(line, `${where}: --from=${flags.from} is not an earlier stage`);
            }
            break;
          }
          stage.deps.add(source.index);
          const known = source.external ? [...source.produced, ...SYSTEM_PATHS] : source.produced;
          for (const src of sources) {
            const abs = isAbsolute(src) ? src : `/${src}`;
            if (!related(abs, known)) {
              error(
                line,
                `${where}: ${src} is not produced by stage ${source.name ?? source.index} (no WORKDIR, COPY or RUN there names it)`,
              );
            }
          }
          break;
        }
        for (const src of sources) {
          if (/^(https?|git):\/\//.test(src) || src.startsWith('git@')) continue;
          stage.contextSources.push(src);
          if (keyword === 'ADD') {
            error(line, `${where}: use COPY for local files (ADD also unpacks archives)`);
          }
          const { escaped, matches } = expandSource(context, src);
          if (escaped) {
            error(line, `${where}: ${src} is outside the build context`);
          } else if (matches.length === 0) {
            error(
              line,
              `${where}: ${src} does not exist in the build context (${relative(process.cwd(), context) || '.'})`,
            );
          } else if (matches.every((m) => isIgnored(ignore, m))) {
            error(
              line,
              `${where}: ${src} is excluded by ${relative(process.cwd(), ignore.file ?? '') || '.dockerignore'}`,
            );
          }
        }
        break;
      }
      default:
        break;
    }
    if (unresolved.length)
      error(line, `${where}: undefined variable ${[...new Set(unresolved)].join(', ')}`);
  }

  if (stages.length === 0) error(0, 'no FROM instruction');

  // The pinned pnpm must be the workspace's.
  const manager = readPackageManager(context);
  if (manager) {
    for (const pin of pnpmPins) {
      if (pin.version !== manager) {
        error(pin.line, `pnpm ${pin.version} pinned, the root package.json says pnpm@${manager}`);
      }
    }
  }

  // The install needs the root manifests; each target's service and its workspace dependencies
  // are checked against what its chain copied (checkTarget).
  for (const install of installs) {
    for (const file of ['package.json', 'pnpm-lock.yaml', 'pnpm-workspace.yaml']) {
      if (!covers(install.sources, file))
        error(install.line, `${install.where}: pnpm install before ${file} is copied`);
    }
  }

  // Targets: stages no other stage builds on.
  const used = new Set();
  for (const s of stages) for (const d of s.deps) used.add(d);
  const targets = [];
  for (const s of stages.filter((s) => !used.has(s.index))) {
    targets.push(checkTarget(s, stages, installs, options, error));
  }
  return {
    file: display,
    dockerignore: ignore.file ? relative(process.cwd(), ignore.file) : undefined,
    stages: stages.map((s) => ({ index: s.index, name: s.name, from: s.image, line: s.line })),
    targets,
    errors,
  };
}

/** Whether one of the COPY sources (context paths) is `path` or a directory above it. */
function covers(sources, path) {
  return sources
    .map((src) => posix.normalize(src.replace(/^\.?\/+/, '')).replace(/\/+$/, ''))
    .some((c) => c === '.' || path === c || path.startsWith(`${c}/`));
}

/** Directories of the workspace packages `dir` needs at run time (`workspace:` dependencies, transitively). */
function workspaceDependencies(context, dir) {
  const byName = new Map();
  for (const member of workspaceMembers(context)) {
    try {
      byName.set(
        JSON.parse(readFileSync(join(context, member, 'package.json'), 'utf8')).name,
        member,
      );
    } catch {
      // not a package
    }
  }
  const found = new Set();
  const visit = (from) => {
    let manifest;
    try {
      manifest = JSON.parse(readFileSync(join(context, from, 'package.json'), 'utf8'));
    } catch {
      return;
    }
    for (const [name, range] of Object.entries(manifest.dependencies ?? {})) {
      const member = byName.get(name);
      if (!member || !String(range).startsWith('workspace:') || found.has(member)) continue;
      found.add(member);
      visit(member);
    }
  };
  visit(dir);
  return [...found].sort();
}

/** Directories of the workspace members (`packages:` globs of pnpm-workspace.yaml). */
function workspaceMembers(context) {
  let text;
  try {
    text = readFileSync(join(context, 'pnpm-workspace.yaml'), 'utf8');
  } catch {
    return [];
  }
  const globs = [];
  let inPackages = false;
  for (const line of text.split(/\r?\n/)) {
    if (/^packages:\s*$/.test(line)) inPackages = true;
    else if (/^\S/.test(line)) inPackages = false;
    else if (inPackages) {
      const match = /^\s+-\s+["']?([^"'\s#]+)["']?/.exec(line);
      if (match && !match[1].startsWith('!')) globs.push(match[1]);
    }
  }
  const members = new Set();
  for (const glob of globs) {
    for (const dir of expandSource(context, glob).matches) {
      if (existsSync(join(context, dir, 'package.json'))) members.add(dir);
    }
  }
  return [...members].sort();
}

function readPackageManager(context) {
  try {
    const root = JSON.parse(readFileSync(join(context, 'package.json'), 'utf8'));
    return /^pnpm@(\d+\.\d+\.\d+)/.exec(root.packageManager ?? '')?.[1];
  } catch {
    return undefined;
  }
}

function closure(stage, stages) {
  const seen = new Set();
  const visit = (index) => {
    if (seen.has(index)) return;
    seen.add(index);
    for (const d of stages[index].deps) visit(d);
  };
  visit(stage.index);
  return [...seen].map((i) => stages[i]);
}

function checkTarget(stage, stages, installs, options, error) {
  const name = stage.name ?? String(stage.index);
  const where = `target ${name}`;
  const report = {
    name,
    line: stage.line,
    status: 'ok',
    serviceDirs: [],
    workdir: stage.workdir,
    user: stage.user,
    entrypoint: stage.entrypoint?.args,
    notes: [],
  };
  const fail = (message) => {
    error(stage.line, `${where}: ${message}`);
    report.status = 'error';
  };
  if (!stage.workdir) fail('no WORKDIR');
  if (!stage.user) fail('no USER (it would run as root)');
  else {
    const [uid, gid] = stage.user.split(':');
    if (!/^\d+$/.test(uid))
      fail(`USER ${stage.user}: use a numeric uid so runAsNonRoot can verify it`);
    else if (Number(uid) === 0) fail(`USER ${stage.user} is root`);
    if (gid !== undefined && !/^\d+$/.test(gid)) fail(`USER ${stage.user}: use a numeric gid`);
    else if (gid !== undefined && Number(gid) === 0) fail(`USER ${stage.user}: group 0 (root)`);
  }
  if (!stage.entrypoint) fail('no ENTRYPOINT');

  const dirs = new Set();
  for (const s of closure(stage, stages)) {
    for (const run of s.runs) {
      for (const match of run.command.matchAll(
        /--filter(?:=|\s+)["']?\{?\.\/(services\/[A-Za-z0-9._-]+)\}?/g,
      )) {
        dirs.add(match[1]);
      }
    }
  }
  report.serviceDirs = [...dirs].sort();
  if (dirs.size === 0)
    fail('builds no service (no `pnpm --filter ./services/<name>` in its chain)');
  for (const dir of report.serviceDirs) {
    const landed = existsSync(join(options.context, dir, 'src', 'main.ts'));
    if (!landed) {
      const why = existsSync(join(options.context, dir))
        ? `${dir} has no src/main.ts yet`
        : `${dir} does not exist yet`;
      if (options.strict || options.require.includes(dir)) fail(why);
      else if (report.status === 'ok') {
        report.status = 'pending';
        report.notes.push(why);
      }
      continue;
    }
    if (!existsSync(join(options.context, dir, 'package.json'))) fail(`${dir} has no package.json`);
    const chain = new Set(closure(stage, stages).map((s) => s.index));
    const chainInstalls = installs.filter((i) => chain.has(i.stage));
    if (chainInstalls.length === 0) fail('no `pnpm install` in its build chain');
    const sources = chainInstalls.flatMap((i) => i.sources);
    for (const needed of [dir, ...workspaceDependencies(options.context, dir)]) {
      if (chainInstalls.length > 0 && !covers(sources, `${needed}/package.json`)) {
        fail(
          `${needed} (${needed === dir ? 'the service' : `a workspace dependency of ${dir}`}) is not copied before pnpm install`,
        );
      }
    }
    if (!stage.entrypoint) continue;
    const args = stage.entrypoint.args;
    const script =
      args[0] === 'node' ? args.find((a, i) => i > 0 && !a.startsWith('-')) : undefined;
    const built = script && /^(?:\.\/)?dist\/(.+)\.js$/.exec(script);
    if (!built) fail(`ENTRYPOINT ${JSON.stringify(args)}: expected ["node", "dist/<entry>.js"]`);
    else if (!existsSync(join(options.context, dir, 'src', `${built[1]}.ts`))) {
      fail(`${script} has no source: ${dir}/src/${built[1]}.ts does not exist`);
    }
  }
  return report;
}

// ---------------------------------------------------------------------------------------------

function main() {
  const { options, files } = parseArgs(process.argv.slice(2));
  const reports = files.map((file) => checkDockerfile(file, options));
  const errors = reports.flatMap((r) => r.errors);
  for (const dir of options.require) {
    if (!existsSync(join(options.context, dir))) {
      errors.push({ file: dir, line: 0, message: `required service ${dir} does not exist` });
    }
    if (!reports.some((r) => r.targets.some((t) => t.serviceDirs.includes(dir)))) {
      errors.push({ file: dir, line: 0, message: `no target builds the required service ${dir}` });
    }
  }
  const ok = errors.length === 0;
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ ok, errors, files: reports }, null, 2)}\n`);
  } else {
    for (const report of reports) {
      process.stdout.write(
        `${report.file}: ${report.stages.length} stages, ${report.targets.length} targets` +
          `${report.dockerignore ? ` (context filter ${report.dockerignore})` : ''}\n`,
      );
      for (const t of report.targets) {
        const detail =
          t.status === 'pending'
            ? t.notes.join('; ')
            : `${t.serviceDirs.join(', ')}  ${JSON.stringify(t.entrypoint ?? [])}  user ${t.user ?? '-'}`;
        process.stdout.write(`  ${t.status.padEnd(8)} ${t.name.padEnd(18)} ${detail}\n`);
      }
    }
    for (const e of errors) process.stdout.write(`ERROR ${e.file}:${e.line}: ${e.message}\n`);
    const pending = reports.flatMap((r) => r.targets.filter((t) => t.status === 'pending'));
    process.stdout.write(
      `${errors.length} error(s)${pending.length ? `, ${pending.length} pending target(s): ${pending.map((t) => t.name).join(', ')}` : ''}\n`,
    );
  }
  process.exit(ok ? 0 : 1);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
