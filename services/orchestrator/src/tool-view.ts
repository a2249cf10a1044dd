/**
 * The tools a client sees, as the operator configured them (`tools:` in FLEET_CONFIG): an
 * allow-list of name globs, renames and new descriptions, applied to `tools/list` and
 * enforced on `tools/call` (a hidden tool is unknown; a renamed tool is called by its new
 * name only).
 */

/** The `tools:` section of the config. */
export interface ToolViewConfig {
  /** Globs (`*` = any characters) on the names clients see; absent = everything. */
  allow?: string[] | undefined;
  /** Aggregated name → name clients see. */
  rename: Record<string, string>;
  /** Name clients see → description clients see. */
  describe: Record<string, string>;
}

function globToRegExp(glob: string): RegExp {
  const escaped = glob.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*');
  return new RegExp(`^${escaped}$`, 's');
}

/** Applies a {@link ToolViewConfig}. */
export class ToolView {
  readonly #allow: RegExp[] | undefined;
  readonly #rename: Map<string, string>;
  readonly #reverse: Map<string, string>;
  readonly #describe: Map<string, string>;

  constructor(config: ToolViewConfig) {
    this.#allow = config.allow?.map(globToRegExp);
    this.#rename = new Map(Object.entries(config.rename));
    this.#reverse = new Map([...this.#rename].map(([from, to]) => [to, from]));
    this.#describe = new Map(Object.entries(config.describe));
  }

  /** True when the view changes nothing (the common case: skip the work). */
  get identity(): boolean {
    return this.#allow === undefined && this.#rename.size === 0 && this.#describe.size === 0;
  }

  #allowed(visible: string): boolean {
    return this.#allow === undefined || this.#allow.some((re) => re.test(visible));
  }

  /** The name a client sees for an aggregated name, or undefined when it is hidden. */
  visible(name: string): string | undefined {
    const visible = this.#rename.get(name) ?? name;
    return this.#allowed(visible) ? visible : undefined;
  }

  /** The aggregated name behind a name a client sent, or undefined when no visible tool has it. */
  original(visible: string): string | undefined {
    const renamedFrom = this.#reverse.get(visible);
    if (renamedFrom !== undefined) return this.#allowed(visible) ? renamedFrom : undefined;
    if (this.#rename.has(visible)) return undefined; // its old name is no longer visible
    return this.#allowed(visible) ? visible : undefined;
  }

  /** A `tools/list` page as clients see it. */
  applyToList<T extends Record<string, unknown>>(page: T): T {
    if (this.identity || !Array.isArray(page.tools)) return page;
    const tools: Array<Record<string, unknown>> = [];
    for (const tool of page.tools as Array<Record<string, unknown>>) {
      const visible = this.visible(String(tool.name));
      if (visible === undefined) continue;
      const description = this.#describe.get(visible);
      tools.push({ ...tool, name: visible, ...(description === undefined ? {} : { description }) });
    }
    return { ...page, tools };
  }
}
