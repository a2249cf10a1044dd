/** Public types of the `fleet` command. */

/**
 * The process-facing edges of the CLI. Only `src/main.ts` binds them to the real process;
 * tests pass their own, so every command runs in process against captured output.
 */
export interface CliIO {
  /** Write to standard output (the text as given; no newline is added). */
  stdout(text: string): void;
  /**
   * Resolves once standard output has taken what was written (at once when its buffer has
   * room): a long writer such as `audit export` waits on it so that a slow reader of a pipe
   * does not make the output pile up in memory. Absent: no waiting.
   */
  stdoutDrained?(): Promise<void>;
  /** Write to standard error (the text as given; no newline is added). */
  stderr(text: string): void;
  /** Whether standard error is a terminal (progress lines such as `audit export`'s go there then). */
  stderrIsTTY?: boolean;
  /** The environment: `FLEET_ORCHESTRATOR_URL`, `FLEET_ADMIN_TOKEN`. */
  env: Readonly<Record<string, string | undefined>>;
  /** Working directory; relative paths such as `--dir` resolve against it. */
  cwd: string;
  /** HTTP client for the admin API: the global fetch, or an undici fetch with its own dispatcher. */
  fetch: typeof fetch;
  /**
   * How the user runs this CLI, as printed hints start: `pnpm fleet` from the workspace,
   * `node packages/cli/dist/main.js`, ... (see `launchCommand`). Default `fleet`, the bin.
   */
  launcher?: string;
  /**
   * Resolves with the signal's name when the user interrupts (Ctrl-C) or the process is
   * asked to stop; long-running commands (`fleet up`) call it once, as soon as they start
   * something that must be stopped cleanly, and wait on it. From that call on the first
   * signal no longer ends the process; a second one, half a second or more later, ends it at
   * once (the process's exit handlers still run). Absent in tests that do not need it.
   */
  untilInterrupted?: () => Promise<string>;
}

/** The program-wide options, resolved against the environment. */
export interface GlobalOptions {
  /** Base URL of the orchestrator, without a trailing slash. */
  orchestrator: string;
  /** Bearer token for `/admin/*`, when one is set. */
  adminToken: string | undefined;
  /** Print raw JSON instead of tables. */
  json: boolean;
}

/** The two kinds of interceptor a scaffold can start from. */
export type InterceptorKind = 'validation' | 'mutation';
