/**
 * Span-level scoring. A predicted span is a true positive when it has the same entity type as
 * a labelled span of the same text and their character intersection-over-union is ≥ 0.5
 * (after trimming whitespace and `.,;:!?()[]{}"'` from both ends of each). Matching is
 * one-to-one, best IoU first. Unmatched predictions are false positives, unmatched labels
 * false negatives. Exact matches (same trimmed offsets) are counted too, to show boundary
 * quality.
 */

/** A labelled or predicted span. */
export interface Span {
  type: string;
  start: number;
  end: number;
}

/** A text with its labelled spans. */
export interface LabelledText {
  text: string;
  spans: Span[];
}

/** Counts for one entity type. */
export interface TypeScore {
  tp: number;
  fp: number;
  fn: number;
  exact: number;
}

const EDGE = /[\s.,;:!?()[\]{}"']/;

function trim(text: string, s: Span): Span {
  let { start, end } = s;
  while (start < end && EDGE.test(text[start] ?? '')) start++;
  while (end > start && EDGE.test(text[end - 1] ?? '')) end--;
  return { type: s.type, start, end };
}

function iou(a: Span, b: Span): number {
  const inter = Math.max(0, Math.min(a.end, b.end) - Math.max(a.start, b.start));
  const union = Math.max(a.end, b.end) - Math.min(a.start, b.start);
  return union === 0 ? 0 : inter / union;
}

/** Add one text's matches to `scores` for the types in `types`. */
export function scoreText(
  text: string,
  gold: readonly Span[],
  predicted: readonly Span[],
  types: ReadonlySet<string>,
  scores: Map<string, TypeScore>,
): void {
  const g = gold.filter((s) => types.has(s.type)).map((s) => trim(text, s));
  const p = predicted.filter((s) => types.has(s.type)).map((s) => trim(text, s));
  const pairs: Array<[number, number, number]> = [];
  for (let i = 0; i < p.length; i++) {
    for (let j = 0; j < g.length; j++) {
      const pi = p[i] as Span;
      const gj = g[j] as Span;
      if (pi.type !== gj.type) continue;
      const v = iou(pi, gj);
      if (v >= 0.5) pairs.push([v, i, j]);
    }
  }
  pairs.sort((a, b) => b[0] - a[0]);
  const usedP = new Set<number>();
  const usedG = new Set<number>();
  const bump = (type: string, key: keyof TypeScore) => {
    const s = scores.get(type) ?? { tp: 0, fp: 0, fn: 0, exact: 0 };
    s[key]++;
    scores.set(type, s);
  };
  for (const [, i, j] of pairs) {
    if (usedP.has(i) || usedG.has(j)) continue;
    usedP.add(i);
    usedG.add(j);
    const pi = p[i] as Span;
    const gj = g[j] as Span;
    bump(pi.type, 'tp');
    if (pi.start === gj.start && pi.end === gj.end) bump(pi.type, 'exact');
  }
  p.forEach((s, i) => {
    if (!usedP.has(i)) bump(s.type, 'fp');
  });
  g.forEach((s, j) => {
    if (!usedG.has(j)) bump(s.type, 'fn');
  });
}

/** Precision, recall and F1 of a score (1 when there is nothing to find or report). */
export function prf(s: TypeScore | undefined): { p: number; r: number; f1: number } {
  const { tp = 0, fp = 0, fn = 0 } = s ?? {};
  const p = tp + fp === 0 ? 1 : tp / (tp + fp);
  const r = tp + fn === 0 ? 1 : tp / (tp + fn);
  const f1 = p + r === 0 ? 0 : (2 * p * r) / (p + r);
  return { p, r, f1 };
}

/** Render rows as a Markdown table with aligned columns. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? `${'-'.repeat(w + 1)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

/** A number with 3 decimals. */
export function f3(n: number): string {
  return n.toFixed(3);
}
