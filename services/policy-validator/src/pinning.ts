/**
 * Tool pinning against "rug pulls": the first definition seen of each tool is pinned (by a
 * digest of what the model reads), and a later, different definition is recorded as a drift
 * until an operator approves it. State lives in Redis (two hashes under one prefix), shared
 * by every replica; each list is checked and pinned in one Lua script, so two replicas that
 * see a new tool at once pin the same first definition.
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

/** One checked list: the tools to hide, and the drifts this check recorded or changed. */
export interface PinCheck {
  hidden: ReadonlySet<string>;
  /** New drifts, and known ones whose seen definition changed again (to be logged). */
  drifted: readonly ToolDrift[];
}

/** What approving a drift did. */
export type ApproveOutcome =
  | { status: 'approved'; pin: ToolPin }
  | { status: 'no-drift' }
  | { status: 'conflict'; seen: string };

/** Where pins and drifts are kept; every method throws when the store cannot be reached. */
export interface PinStore {
  /** Pin the unseen tools of a list, record drifts, and say which tools to hide. */
  check(tools: ReadonlyArray<{ name: string; digest: string }>): Promise<PinCheck>;
  /** The drift of `tool`, if it has one. */
  drift(tool: string): Promise<ToolDrift | undefined>;
  /** Every pin and drift, by tool name. */
  list(): Promise<{ pins: ToolPin[]; drifts: ToolDrift[] }>;
  /**
   * Re-pin `tool` to its drift's seen definition and clear the drift. With `expected`, only
   * when the seen digest is that one (so an operator approves what they reviewed).
   */
  approve(tool: string, expected?: string): Promise<ApproveOutcome>;
}

// Statuses per tool: 0 pinned now, 1 matches its pin, 2 new drift, 3 drift seen changed
// again, 4 known drift (hidden until approved, even if the definition went back).
const CHECK_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #ARGV, 2 do
  local name, digest = ARGV[i], ARGV[i + 1]
  local pin = redis.call('HGET', KEYS[1], name)
  if not pin then
    redis.call('HSET', KEYS[1], name, cjson.encode({digest = digest, pinnedAt = now}))
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

/**
 * Pins in Redis: the hash `<prefix>:digests` (tool → `{digest, pinnedAt}`) and the hash
 * `<prefix>:drifts` (tool → `{pinned, seen, firstSeen}`); times in ms from Redis's clock.
 */
export class RedisPinStore implements PinStore {
  readonly #redis: Redis;
  readonly #keys: [string, string];
  readonly #shas = new Map<string, string>();

  constructor(redis: Redis, prefix = 'fleet:pins') {
    this.#redis = redis;
    this.#keys = [`${prefix}:digests`, `${prefix}:drifts`];
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
    if (tools.length === 0) return { hidden: new Set(), drifted: [] };
    const replies = (await this.#run(
      CHECK_SCRIPT,
      tools.flatMap((t) => [t.name, t.digest]),
    )) as Array<[number, string?, string?]>;
    const hidden = new Set<string>();
    const drifted: ToolDrift[] = [];
    tools.forEach((tool, i) => {
      const [status, pinned, firstSeen] = replies[i] ?? [1];
      if (status < 2) return;
      hidden.add(tool.name);
      if ((status === 2 || status === 3) && pinned !== undefined) {
        drifted.push({ tool: tool.name, pinned, seen: tool.digest, firstSeen: iso(firstSeen) });
      }
    });
    return { hidden, drifted };
  }

  async drift(tool: string): Promise<ToolDrift | undefined> {
    const raw = await this.#redis.hget(this.#keys[1], tool);
    const stored = raw === null ? undefined : parsed(StoredDriftSchema, raw);
    return stored && { tool, ...stored, firstSeen: iso(stored.firstSeen) };
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
    const [status, digest, at] = (await this.#run(APPROVE_SCRIPT, [tool, expected ?? ''])) as [
      number,
      string?,
      string?,
    ];
    if (status === 0 || digest === undefined) return { status: 'no-drift' };
    if (status === 2) return { status: 'conflict', seen: digest };
    return { status: 'approved', pin: { tool, digest, pinnedAt: iso(at) } };
  }
}
