/**
 * `node:fs` plus a minimal `globSync(pattern, {cwd})` for Node 20 (see ./register.mjs).
 *
 * Supports what the conformance CLI asks for (`**\/checks.json`): `*` and `?` within a path
 * segment and `**` for any number of segments. Paths are returned relative to `cwd` with `/`.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';

export * from 'node:fs';
export default fs;

function segmentRegExp(segment) {
  const body = segment
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '[^/]*')
    .replace(/\?/g, '[^/]');
  return new RegExp(`^${body}$`);
}

function walk(dir, relative, segments, out) {
  if (segments.length === 0) {
    out.add(relative);
    return;
  }
  const [head, ...rest] = segments;
  if (head === '**') {
    walk(dir, relative, rest, out);
  }
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  const matcher = head === '**' ? undefined : segmentRegExp(head);
  for (const entry of entries) {
    const childRelative = relative ? `${relative}/${entry.name}` : entry.name;
    const childDir = join(dir, entry.name);
    if (head === '**') {
      if (entry.isDirectory()) walk(childDir, childRelative, segments, out);
    } else if (matcher?.test(entry.name)) {
      if (rest.length === 0) out.add(childRelative);
      else if (entry.isDirectory()) walk(childDir, childRelative, rest, out);
    }
  }
}

/** Minimal `fs.globSync`: one pattern or several, option `cwd` (default `process.cwd()`). */
export function globSync(pattern, options = {}) {
  const cwd = options.cwd === undefined ? process.cwd() : String(options.cwd);
  const out = new Set();
  for (const p of Array.isArray(pattern) ? pattern : [pattern]) {
    walk(cwd, '', String(p).split('/').filter(Boolean), out);
  }
  return [...out];
}
