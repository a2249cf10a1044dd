/** Load-time errors: a policy document that cannot be compiled. */

/** One problem in a policy document. */
export interface PolicyIssue {
  /** Where in the document, e.g. `rules[1].when` (empty for the document itself). */
  readonly path: string;
  readonly message: string;
  /** Id of the rule or rate limit the problem is in, when known. */
  readonly rule?: string;
  /** 1-based line in the source text, when known. */
  readonly line?: number;
  /** 1-based column in the source text, when known. */
  readonly column?: number;
}

/** Renders an issue as one line: `policy.yaml:12:11: rules[1].when (rule "x"): message`. */
export function formatPolicyIssue(issue: PolicyIssue, sourceName?: string): string {
  const where =
    issue.line === undefined
      ? sourceName
        ? `${sourceName}: `
        : ''
      : `${sourceName ?? 'line'}${sourceName ? ':' : ' '}${issue.line}:${issue.column ?? 1}: `;
  const path = issue.path || '(document)';
  const rule = issue.rule === undefined ? '' : ` (rule "${issue.rule}")`;
  return `${where}${path}${rule}: ${issue.message}`;
}

/**
 * A policy document failed to compile. `issues` lists every problem found (syntax, shape,
 * CEL or Cedar errors), each with its path, rule id and line/column where known. Branch on
 * the class or on `code`, never on the message text.
 */
export class PolicyLoadError extends Error {
  override readonly name = 'PolicyLoadError';
  readonly code = 'INVALID_POLICY' as const;
  readonly issues: readonly PolicyIssue[];
  readonly sourceName: string | undefined;

  constructor(issues: readonly PolicyIssue[], sourceName?: string) {
    const lines = issues.map((issue) => `  ${formatPolicyIssue(issue, sourceName)}`);
    super(`invalid policy${sourceName ? ` ${sourceName}` : ''}:\n${lines.join('\n')}`);
    this.issues = issues;
    this.sourceName = sourceName;
  }
}
