/**
 * Tool pinning against "rug pulls": the first definition seen of each tool is pinned (by a
 * digest of what the model reads), and a later, different definition is recorded as a drift
 * until an operator approves it. State lives in Redis (two hashes under one prefix), shared
 * by every replica; each list is checked and pinned in one Lua script, so two replicas that
 * see a new tool at once pin the same first definition. The store holds at most `maxTools`
 * pins: a backend may list any number of names, and each would otherwise be kept for good.
 * An operator may forget a pin (a tool gone, or room in a full store): the tool's next
 * listing pins it afresh.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';

/** The fields of a tool the model reads; `_meta`, `icons` and unknown fields are not pinned. */
const DIGESTED_FIELDS = [
  'name',
  'title',
  'description',
  'inputSchema',
  'outputSchema',
  'annotations',
] as const;

/** JSON with object keys sorted at every level (the input is JSON from the wire). */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value))
    return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const map = value as Record<string, unknown>;
    const fields = Object.keys(map)
      .filter((key) => map[key] !== undefined)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(map[key])}`);
    return `{${fields.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The SHA-256 (hex) of the canonical JSON of a tool's name, title, description, inputSchema,
 * outputSchema and annotations: equal for definitions a model cannot tell apart.
 */
export function toolDigest(tool: Readonly<Record<string, unknown>>): string {
  const read: Record<string, unknown> = {};
  for (const field of DIGESTED_FIELDS) if (tool[field] !== undefined) read[field] = tool[field];
  return createHash('sha256').update(canonicalJson(read)).digest('hex');
}

/** A pinned tool definition. */
export interface ToolPin {
  tool: string;
  digest: string;
  /** When it was pinned (first seen, or approved), ISO 8601. */
  pinnedAt: string;
}

/** A tool whose listed definition differs from its pin: hidden and refused until approved. */
export interface ToolDrift {
  tool: string;
  /** The digest of the pinned definition. */
  pinned: string;
  /** The digest of the last different definition seen (what approving pins). */
  seen: string;
  /** When a different definition was first seen, ISO 8601. */
  firstSeen: string;
}

/** `new`: a pinned tool's definition differs for the first time; `changed`: a drift changed again. */
export type DriftKind = 'new' | 'changed';

/** A drift a check recorded: a new one, or a known one whose seen definition changed again. */
export interface RecordedDrift extends ToolDrift {
  kind: DriftKind;
}

/** One checked list: the tools to hide, the drifts this check recorded, the tools it could not pin. */
export interface PinCheck {
  /** The drifted tools (hidden until approved). */
  hidden: ReadonlySet<string>;
  /** New drifts, and known ones whose seen definition changed again (to be logged). */
  drifted: readonly RecordedDrift[];
  /** Never-seen tools left unpinned because the store holds `maxTools` pins already. */
  unpinned: readonly string[];
}

/**
 * What a call to a tool meets: `ok` (pinned without drift, or not pinned while the store has
 * room), `drifted` (hidden and refused until approved), `store-full` (never pinned, and the
 * store holds `maxTools` pins: its definition cannot be kept, so it cannot be verified).
 */
export type PinVerdict =
  | { status: 'ok' }
  | { status: 'drifted'; drift: ToolDrift }
  | { status: 'store-full' };

/** What became of tools the full pin store could not pin (the `fleet.pins.action` values). */
export type UnpinnedAction = 'hidden' | 'refused' | 'passed';

/** How many tools the store holds. */
export interface PinCounts {
  pinned: number;
  drifted: number;
}

/** What approving a drift did. */
export type ApproveOutcome =
  | { status: 'approved'; pin: ToolPin }
  | { status: 'no-drift' }
  | { status: 'conflict'; seen: string };

/** Where pins and drifts are kept; every method throws when the store cannot be reached. */
export interface PinStore {
  /** Most tools it pins; a never-seen tool beyond them is left unpinned. */
  readonly maxTools: number;
  /**
   * Pin the unseen tools of a list while there is room, record drifts, and say which tools
   * drifted and which could not be pinned.
   */
  check(tools: ReadonlyArray<{ name: string; digest: string }>): Promise<PinCheck>;
  /** Whether a call to `tool` meets a drift, or a full store that never pinned it. */
  verify(tool: string): Promise<PinVerdict>;
  /** Every pin and drift, by tool name. */
  list(): Promise<{ pins: ToolPin[]; drifts: ToolDrift[] }>;
  /** How many tools are pinned and how many of them drifted. */
  counts(): Promise<PinCounts>;
  /**
   * Re-pin `tool` to its drift's seen definition and clear the drift. With `expected`, only
   * when the seen digest is that one (so an operator approves what they reviewed).
   */
  approve(tool: string, expected?: string): Promise<ApproveOutcome>;
  /**
   * Remove `tool`'s pin and any drift of it, at once; whether there was either. The next
   * listing of `tool` pins the definition it shows then, unreviewed (trust on first use again).
   */
  forget(tool: string): Promise<boolean>;
}

/**
 * Longest tool name the store keeps as it is; a longer one is kept as `#sha256:<hex of the
 * name>` (MCP tool names are at most 128 of `A-Za-z0-9_-.`, so no real name looks like one).
 * Names come from whatever lists tools: 20 pins of 1 MB names held 20 MB of Redis for good, up
 * to `maxTools` of them.
 */
export const MAX_PINNED_NAME_LENGTH = 256;

/** The field of `name` in the store's hashes. */
function pinField(name: string): string {
  return name.length <= MAX_PINNED_NAME_LENGTH
    ? name
    : `#sha256:${createHash('sha256').update(name).digest('hex')}`;
}

/** Default of {@link RedisPinStoreOptions.maxTools}. */
export const DEFAULT_PIN_MAX_TOOLS = 10_000;

// ARGV: maxTools, then name and digest per tool. Statuses per tool: 0 pinned now, 1 matches
// its pin, 2 new drift, 3 drift seen changed again, 4 known drift (hidden until approved, even
// if the definition went back), 5 not pinned: the store is full. The bound is checked and
// the pin written in the same script, so replicas together never pin more than maxTools.
const CHECK_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max = tonumber(ARGV[1])
local count = redis.call('HLEN', KEYS[1])
local out = {}
for i = 2, #ARGV, 2 do
  local name, digest = ARGV[i], ARGV[i + 1]
  local pin = redis.call('HGET', KEYS[1], name)
  if not pin and count >= max then
    out[#out + 1] = {5}
  elseif not pin then
    redis.call('HSET', KEYS[1], name, cjson.encode({digest = digest, pinnedAt = now}))
    count = count + 1
    out[#out + 1] = {0}
  else
    local pinned = cjson.decode(pin).digest
    local raw = redis.call('HGET', KEYS[2], name)
    if raw then
      local drift = cjson.decode(raw)
      if drift.seen ~= digest and pinned ~= digest then
        drift.seen = digest
        redis.call('HSET', KEYS[2], name, cjson.encode(drift))
        out[#out + 1] = {3, pinned, tostring(drift.firstSeen)}
      else
        out[#out + 1] = {4}
      end
    elseif pinned == digest then
      out[#out + 1] = {1}
    else
      redis.call('HSET', KEYS[2], name,
        cjson.encode({pinned = pinned, seen = digest, firstSeen = now}))
      out[#out + 1] = {2, pinned, tostring(now)}
    end
  end
end
return out
`;

// ARGV: tool, maxTools. {1, drift} for a drift, {2} for a tool never pinned while the store is
// full, {0} otherwise.
const VERIFY_SCRIPT = `
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if raw then return {1, raw} end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0
  and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[2]) then
  return {2}
end
return {0}
`;

// Re-pins a tool that is pinned already: approving never adds a pin, so it works on a full store.
const APPROVE_SCRIPT = `
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if not raw then return {0} end
local drift = cjson.decode(raw)
if ARGV[2] ~= '' and ARGV[2] ~= drift.seen then return {2, drift.seen} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode({digest = drift.seen, pinnedAt = now}))
redis.call('HDEL', KEYS[2], ARGV[1])
return {1, drift.seen, tostring(now)}
`;

// Pin and drift go together: a check between the two deletes would see a drift without its pin.
const FORGET_SCRIPT = `
return redis.call('HDEL', KEYS[1], ARGV[1]) + redis.call('HDEL', KEYS[2], ARGV[1])
`;

const StoredPinSchema = z.object({ digest: z.string(), pinnedAt: z.number() });
const StoredDriftSchema = z.object({
  pinned: z.string(),
  seen: z.string(),
  firstSeen: z.number(),
});

function iso(ms: number | string | undefined): string {
  return new Date(Number(ms)).toISOString();
}

function parsed<T>(schema: z.ZodType<T>, text: string): T | undefined {
  try {
    const result = schema.safeParse(JSON.parse(text));
    return result.success ? result.data : undefined;
  } catch {
    return undefined;
  }
}

/** Options of {@link RedisPinStore}. */
export interface RedisPinStoreOptions {
  /** Prefix of the two hashes. Default `fleet:pins`. */
  prefix?: string;
  /**
   * Most tools pinned (the digests hash's size), an integer >= 1; a never-seen tool is not
   * pinned beyond it. Default {@link DEFAULT_PIN_MAX_TOOLS}.
   */
  maxTools?: number;
}

/**
 * Pins in Redis: the hash `<prefix>:digests` (tool → `{digest, pinnedAt}`, at most `maxTools`
 * entries; a name over {@link MAX_PINNED_NAME_LENGTH} as its digest) and the hash `<prefix>:drifts` (tool → `{pinned, seen, firstSeen}`; only pinned
 * tools drift, so it is bounded too); times in ms from Redis's clock.
 */
export class RedisPinStore implements PinStore {
  readonly maxTools: number;
  readonly #redis: Redis;
  readonly #keys: [string, string];
  readonly #shas = new Map<string, string>();

  constructor(redis: Redis, options: RedisPinStoreOptions = {}) {
    const { prefix = 'fleet:pins', maxTools = DEFAULT_PIN_MAX_TOOLS } = options;
    if (!Number.isSafeInteger(maxTools) || maxTools < 1)
      throw new RangeError(`maxTools must be an integer >= 1, got ${maxTools}`);
    this.#redis = redis;
    this.#keys = [`${prefix}:digests`, `${prefix}:drifts`];
    this.maxTools = maxTools;
  }

  async #run(script: string, args: string[]): Promise<unknown> {
    try {
      let sha = this.#shas.get(script);
      if (sha === undefined) {
        sha = (await this.#redis.script('LOAD', script)) as string;
        this.#shas.set(script, sha);
      }
      return await this.#redis.evalsha(sha, 2, ...this.#keys, ...args);
    } catch (error) {
      if (!String((error as Error).message).includes('NOSCRIPT')) throw error;
      this.#shas.delete(script);
      return this.#redis.eval(script, 2, ...this.#keys, ...args);
    }
  }

  async check(tools: ReadonlyArray<{ name: string; digest: string }>): Promise<PinCheck> {
    if (tools.length === 0) return { hidden: new Set(), drifted: [], unpinned: [] };
    const replies = (await this.#run(CHECK_SCRIPT, [
      String(this.maxTools),
      ...tools.flatMap((t) => [pinField(t.name), t.digest]),
    ])) as Array<[number, string?, string?]>;
    const hidden = new Set<string>();
    const drifted: RecordedDrift[] = [];
    const unpinned: string[] = [];
    tools.forEach((tool, i) => {
      const [status, pinned, firstSeen] = replies[i] ?? [1];
      if (status < 2) return;
      if (status === 5) {
        unpinned.push(tool.name);
        return;
      }
      hidden.add(tool.name);
      if ((status === 2 || status === 3) && pinned !== undefined) {
        drifted.push({
          tool: tool.name,
          pinned,
          seen: tool.digest,
          firstSeen: iso(firstSeen),
          kind: status === 2 ? 'new' : 'changed',
        });
      }
    });
    return { hidden, drifted, unpinned };
  }

  async verify(tool: string): Promise<PinVerdict> {
    const [status, raw] = (await this.#run(VERIFY_SCRIPT, [
      pinField(tool),
      String(this.maxTools),
    ])) as [number, string?];
    if (status === 2) return { status: 'store-full' };
    const stored = status === 1 && raw !== undefined ? parsed(StoredDriftSchema, raw) : undefined;
    if (stored === undefined) return { status: 'ok' };
    return { status: 'drifted', drift: { tool, ...stored, firstSeen: iso(stored.firstSeen) } };
  }

  async counts(): Promise<PinCounts> {
    const replies = await this.#redis.multi().hlen(this.#keys[0]).hlen(this.#keys[1]).exec();
    const [pinned, drifted] = (replies ?? []).map(([error, count]) => {
      if (error) throw error;
      return Number(count);
    });
    return { pinned: pinned ?? 0, drifted: drifted ?? 0 };
  }

  async list(): Promise<{ pins: ToolPin[]; drifts: ToolDrift[] }> {
    const [pins, drifts] = await Promise.all([
      this.#redis.hgetall(this.#keys[0]),
      this.#redis.hgetall(this.#keys[1]),
    ]);
    const byTool = (a: { tool: string }, b: { tool: string }) =>
      a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : 0;
    return {
      pins: Object.entries(pins)
        .flatMap(([tool, raw]) => {
          const pin = parsed(StoredPinSchema, raw);
          return pin ? [{ tool, digest: pin.digest, pinnedAt: iso(pin.pinnedAt) }] : [];
        })
        .sort(byTool),
      drifts: Object.entries(drifts)
        .flatMap(([tool, raw]) => {
          const drift = parsed(StoredDriftSchema, raw);
          return drift ? [{ tool, ...drift, firstSeen: iso(drift.firstSeen) }] : [];
        })
        .sort(byTool),
    };
  }

  async approve(tool: string, expected?: string): Promise<ApproveOutcome> {
    const [status, digest, at] = (await this.#run(APPROVE_SCRIPT, [
      pinField(tool),
      expected ?? '',
    ])) as [number, string?, string?];
    if (status === 0 || digest === undefined) return { status: 'no-drift' };
    if (status === 2) return { status: 'conflict', seen: digest };
    return { status: 'approved', pin: { tool, digest, pinnedAt: iso(at) } };
  }

  async forget(tool: string): Promise<boolean> {
    return Number(await this.#run(FORGET_SCRIPT, [pinField(tool)])) > 0;
  }
}
