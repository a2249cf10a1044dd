/**
 * The chart's value documentation contract: in values.yaml a key whose comment block holds a
 * `# --` line is a documented value (its children need no comment of their own), every leaf
 * key is documented itself or below a documented key, and README.md has one table row per
 * documented value with the dotted path in backticks.
 */

/** A key of values.yaml: its dotted path, line, whether it is documented, whether it is a leaf. */
export interface ValueKey {
  path: string;
  line: number;
  documented: boolean;
  leaf: boolean;
}

/** Keys of a block-style values.yaml (2-space indentation; flow collections count as leaves). */
export function valueKeys(text: string): ValueKey[] {
  const keys: ValueKey[] = [];
  const stack: { indent: number; key: string }[] = [];
  let comment: string[] = [];
  const lines = text.split('\n');
  lines.forEach((raw, index) => {
    const trimmed = raw.trim();
    if (trimmed.startsWith('#')) {
      comment.push(trimmed);
      return;
    }
    if (trimmed === '') {
      comment = [];
      return;
    }
    const match = /^( *)([A-Za-z0-9_.-]+):(.*)$/.exec(raw);
    if (!match || trimmed.startsWith('- ')) {
      comment = [];
      return;
    }
    const indent = (match[1] ?? '').length;
    const key = match[2] ?? '';
    const rest = (match[3] ?? '').replace(/\s+#.*$/, '').trim();
    while (stack.length > 0 && (stack[stack.length - 1]?.indent ?? -1) >= indent) stack.pop();
    const path = [...stack.map((s) => s.key), key].join('.');
    keys.push({
      path,
      line: index + 1,
      documented: comment.some((c) => c.startsWith('# --')),
      leaf: rest !== '',
    });
    if (rest === '') stack.push({ indent, key });
    comment = [];
  });
  // A key without an inline value and without children (e.g. `key:` = null) is a leaf too.
  for (const [i, k] of keys.entries()) {
    const next = keys[i + 1];
    if (!k.leaf && !next?.path.startsWith(`${k.path}.`)) k.leaf = true;
  }
  return keys;
}

/** Documented value paths, and leaves that are neither documented nor under a documented key. */
export function documentation(text: string): { documented: string[]; undocumented: string[] } {
  const keys = valueKeys(text);
  const documented = keys.filter((k) => k.documented).map((k) => k.path);
  const covered = (path: string) => documented.some((d) => path === d || path.startsWith(`${d}.`));
  const undocumented = keys
    .filter((k) => k.leaf && !covered(k.path))
    .map((k) => `${k.path} (line ${k.line})`);
  return { documented, undocumented };
}

/** Paths in the first column of the table rows (| `path` | ...) of README's `## Values` section. */
export function readmeValuePaths(readme: string): string[] {
  const paths: string[] = [];
  let inValues = false;
  for (const line of readme.split('\n')) {
    if (line.startsWith('## ')) inValues = line.trim() === '## Values';
    if (!inValues) continue;
    const match = /^\|\s*`([A-Za-z0-9_.-]+)`\s*\|/.exec(line);
    if (match?.[1]) paths.push(match[1]);
  }
  return paths;
}
