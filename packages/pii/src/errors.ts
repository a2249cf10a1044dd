/**
 * Local errors of the engine. Each carries a string `code` and structured `data`; the service
 * converts them (a limit error becomes a rejection, a config error stops start-up). Branch on
 * the class or `code`, never on the message.
 */

/** The codes a {@link PiiError} can carry. */
export type PiiErrorCode =
  | 'PII_CONFIG_INVALID'
  | 'PII_LIMIT_EXCEEDED'
  | 'PII_TOKENIZER_MISSING'
  | 'PII_HMAC_KEY_INVALID';

/** Base class of every error the engine throws on purpose. */
export class PiiError extends Error {
  override readonly name: string = 'PiiError';
  readonly code: PiiErrorCode;
  readonly data: Record<string, unknown>;

  constructor(code: PiiErrorCode, message: string, data: Record<string, unknown> = {}) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

/** One problem in a config: where (a dotted path such as `entities.EMAIL_ADDRESS.strategy`), and what. */
export interface PiiConfigIssue {
  path: string;
  message: string;
}

/** The config did not parse; `issues` name every offending path. */
export class PiiConfigError extends PiiError {
  override readonly name = 'PiiConfigError';
  readonly issues: readonly PiiConfigIssue[];

  constructor(issues: readonly PiiConfigIssue[]) {
    const detail = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
    super('PII_CONFIG_INVALID', `invalid PII config: ${detail}`, {
      issues: issues.map((i) => ({ ...i })),
    });
    this.issues = issues;
  }
}

/** Which bound a walk ran into. */
export type PiiLimit = 'maxDepth' | 'maxStringBytes';

/**
 * A JSON value was nested deeper than `maxDepth` or carried more than `maxStringBytes` of
 * string data. `path` is where the walk stopped (never a value).
 */
export class PiiLimitError extends PiiError {
  override readonly name = 'PiiLimitError';
  readonly limit: PiiLimit;
  readonly max: number;
  readonly path: string;

  constructor(limit: PiiLimit, max: number, path: string) {
    super('PII_LIMIT_EXCEEDED', `payload exceeds ${limit} (${max}) at ${path || '<root>'}`, {
      limit,
      max,
      path,
    });
    this.limit = limit;
    this.max = max;
    this.path = path;
  }
}
