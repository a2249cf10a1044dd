/**
 * PromQL as the chart's alerts and dashboard write it, read with the Prometheus UI's own
 * grammar (`@prometheus-io/lezer-promql`): syntax errors, the series selectors (metric name,
 * label matchers, the range function around them) and the grouping clauses (`by`, `without`,
 * `on`, `ignoring`, `group_left`/`group_right`) with the selectors below each. The grammar is
 * syntax only: function arity and argument types are not checked by it.
 */
import type { SyntaxNode } from '@lezer/common';
import { parser } from '@prometheus-io/lezer-promql';

/** One label matcher of a selector: `name op "value"`. */
export interface LabelMatcher {
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}

/** One series selector: `metric{matchers}`, and the function whose range vector it is in. */
export interface SelectorUse {
  metric: string;
  matchers: LabelMatcher[];
  /** `rate`, `increase`, ... when the selector is the range argument of that function. */
  rangeFunction?: string;
}

/** One grouping clause and the selectors it groups. */
export interface GroupingUse {
  clause: 'by' | 'without' | 'on' | 'ignoring' | 'group_left' | 'group_right';
  labels: string[];
  /**
   * The selectors below the clause, each with whether a label survives the aggregations
   * between the two: a label the clause names must exist on the series and survive that far.
   */
  below: { selector: SelectorUse; keeps: (label: string) => boolean }[];
}

/** What {@link analyzePromql} found in one expression. */
export interface PromqlAnalysis {
  /** Syntax errors (position and the text around it); empty for a valid expression. */
  errors: string[];
  selectors: SelectorUse[];
  groupings: GroupingUse[];
}

/** The value of a PromQL string literal ("...", '...' or a `raw` string). */
const unquote = (literal: string): string =>
  literal.startsWith('`')
    ? literal.slice(1, -1)
    : (JSON.parse(
        literal.startsWith("'") ? `"${literal.slice(1, -1).replace(/"/g, '\\"')}"` : literal,
      ) as string);

function children(node: SyntaxNode): SyntaxNode[] {
  const list: SyntaxNode[] = [];
  for (let child = node.firstChild; child; child = child.nextSibling) list.push(child);
  return list;
}

function descendants(node: SyntaxNode, name: string): SyntaxNode[] {
  const found: SyntaxNode[] = [];
  const visit = (n: SyntaxNode) => {
    if (n.name === name) found.push(n);
    for (const child of children(n)) visit(child);
  };
  visit(node);
  return found;
}

/** Parse one PromQL expression and list its selectors and grouping clauses. */
export function analyzePromql(expr: string): PromqlAnalysis {
  const tree = parser.parse(expr);
  const text = (n: SyntaxNode) => expr.slice(n.from, n.to);
  const errors: string[] = [];
  tree.iterate({
    enter: (ref) => {
      if (ref.type.isError) {
        errors.push(
          `syntax error at ${ref.from}: …${expr.slice(Math.max(0, ref.from - 20), ref.from)}⚠${expr.slice(ref.from, ref.from + 20)}…`,
        );
      }
    },
  });

  const selectorOf = new Map<SyntaxNode['from'], SelectorUse>();
  const selectors: SelectorUse[] = [];
  for (const node of descendants(tree.topNode, 'VectorSelector')) {
    const identifier = children(node).find((c) => c.name === 'Identifier');
    const matchers: LabelMatcher[] = [];
    for (const group of children(node).filter((c) => c.name === 'LabelMatchers')) {
      for (const matcher of children(group)) {
        const parts = children(matcher);
        const name = parts.find((p) => p.name === 'LabelName' || p.name === 'QuotedLabelName');
        const op = parts.find((p) => p.name === 'MatchOp');
        const value = parts.filter((p) => p.name === 'StringLiteral').at(-1);
        if (!name || !op || !value) continue;
        const label = name.name === 'QuotedLabelName' ? unquote(text(name)) : text(name);
        matchers.push({ label, op: text(op) as LabelMatcher['op'], value: unquote(text(value)) });
      }
    }
    const use: SelectorUse = { metric: identifier ? text(identifier) : '', matchers };
    const matrix = node.parent?.name === 'MatrixSelector' ? node.parent : undefined;
    const call = matrix?.parent?.parent;
    if (matrix && matrix.parent?.name === 'FunctionCallBody' && call?.name === 'FunctionCall') {
      const fn = children(call).find((c) => c.name === 'FunctionIdentifier');
      if (fn) use.rangeFunction = text(fn);
    }
    selectorOf.set(node.from, use);
    selectors.push(use);
  }

  /** Labels that survive the aggregations strictly between `top` and a selector below it. */
  const belowOf = (top: SyntaxNode): GroupingUse['below'] =>
    descendants(top, 'VectorSelector').map((node) => {
      let only: Set<string> | undefined;
      let except = new Set<string>();
      for (let up = node.parent; up && up !== top; up = up.parent) {
        if (up.name !== 'AggregateExpr') continue;
        const modifier = children(up).find((c) => c.name === 'AggregateModifier');
        const labels = new Set(modifier ? descendants(modifier, 'LabelName').map(text) : []);
        if (modifier && children(modifier).some((c) => c.name === 'Without')) {
          if (only) only = new Set([...only].filter((l) => !labels.has(l)));
          else except = new Set([...except, ...labels]);
        } else {
          const previous = only;
          only = new Set([...labels].filter((l) => (previous ? previous.has(l) : !except.has(l))));
        }
      }
      const keeps = (label: string) => (only ? only.has(label) : !except.has(label));
      return { selector: selectorOf.get(node.from) as SelectorUse, keeps };
    });

  const groupings: GroupingUse[] = [];
  for (const aggregate of descendants(tree.topNode, 'AggregateExpr')) {
    const modifier = children(aggregate).find((c) => c.name === 'AggregateModifier');
    if (!modifier) continue;
    const body = children(aggregate).find((c) => c.name === 'FunctionCallBody');
    groupings.push({
      clause: children(modifier).some((c) => c.name === 'Without') ? 'without' : 'by',
      labels: descendants(modifier, 'LabelName').map(text),
      below: body ? belowOf(body) : [],
    });
  }
  for (const clause of descendants(tree.topNode, 'MatchingModifierClause')) {
    const binary = clause.parent;
    if (!binary) continue;
    let kind: GroupingUse['clause'] = 'on';
    for (const part of children(clause)) {
      if (part.name === 'On') kind = 'on';
      else if (part.name === 'Ignoring') kind = 'ignoring';
      else if (part.name === 'GroupLeft') kind = 'group_left';
      else if (part.name === 'GroupRight') kind = 'group_right';
      else if (part.name === 'GroupingLabels') {
        groupings.push({
          clause: kind,
          labels: descendants(part, 'LabelName').map(text),
          below: belowOf(binary),
        });
      }
    }
  }
  return { errors, selectors, groupings };
}

/**
 * A Grafana query as Prometheus would receive it: the interval macros become a duration
 * (variables inside label values stay; they are text to PromQL).
 */
export function grafanaToPromql(query: string): string {
  return query.replace(
    /\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}/g,
    '5m',
  );
}

/** `label_values(selector, label)` of a Grafana query variable, else undefined. */
export function labelValuesQuery(query: string): { selector: string; label: string } | undefined {
  const match = /^\s*label_values\(\s*(.+),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$/s.exec(query);
  return match?.[1] && match[2] ? { selector: match[1], label: match[2] } : undefined;
}

/**
 * Labels the result of an expression keeps, as far as its outermost aggregations say: the
 * intersection of their `by` labels, or `undefined` when no aggregation limits them (then
 * the result has the labels of its series). The sides of an `or` are separate series, so
 * there a label either side keeps counts (an alert's annotation may name it, guarded with
 * `{{ with $labels.x }}`, for the series that carry it).
 */
export function outputLabels(expr: string): Set<string> | undefined {
  const tree = parser.parse(expr);
  const unlimited = Symbol('unlimited');
  type Kept = Set<string> | typeof unlimited | undefined;
  const both = (a: Kept, b: Kept, union: boolean): Kept => {
    if (a === undefined) return b;
    if (b === undefined) return a;
    if (a === unlimited || b === unlimited) return union ? unlimited : a === unlimited ? b : a;
    return new Set(union ? [...a, ...b] : [...a].filter((l) => b.has(l)));
  };
  const visit = (node: SyntaxNode): Kept => {
    if (node.name === 'AggregateExpr') {
      const modifier = children(node).find((c) => c.name === 'AggregateModifier');
      if (modifier && children(modifier).some((c) => c.name === 'Without')) return unlimited;
      return new Set(
        modifier ? descendants(modifier, 'LabelName').map((n) => expr.slice(n.from, n.to)) : [],
      );
    }
    const union = node.name === 'BinaryExpr' && children(node).some((c) => c.name === 'Or');
    let kept: Kept;
    for (const child of children(node)) kept = both(kept, visit(child), union);
    return kept;
  };
  const kept = visit(tree.topNode);
  return kept === unlimited ? undefined : kept;
}
