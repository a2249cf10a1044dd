/**
 * `${VAR}` and `${VAR:-default}` in configuration text, one rule for every reader (the
 * orchestrator's FLEET_CONFIG, the CLI reading the same file): an unset or empty variable
 * takes the default, or becomes the empty string without one.
 */
const VARIABLE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** `text` with its variables replaced from `env`. */
export function expandVariables(
  text: string,
  env: Readonly<Record<string, string | undefined>>,
): string {
  return text.replace(VARIABLE, (_match, name: string, fallback?: string) => {
    const value = env[name];
    return value === undefined || value === '' ? (fallback ?? '') : value;
  });
}

/**
 * Why `text` is not an integer from `min` to `max` written in digits, or undefined when it
 * is. Digits only: `Number(' ')` is 0, `Number('1e3')` 1000 and `Number('0x10')` 16, none what
 * an operator meant by a port, a size or a count.
 */
export function integerProblem(
  text: string,
  min: number,
  max: number = Number.MAX_SAFE_INTEGER,
): string | undefined {
  const value = Number(text);
  if (/^\d+$/.test(text) && value >= min && value <= max) return undefined;
  const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
  return `must be an integer ${range} (digits only)`;
}

/**
 * The integer environment variable `name`, or `fallback` when it is unset or empty.
 * @throws {Error} naming the variable and what it got, when it is not such an integer.
 */
export function envInteger(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  fallback: number,
  { min = 0, max = Number.MAX_SAFE_INTEGER }: { min?: number; max?: number } = {},
): number {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const problem = integerProblem(text, min, max);
  if (problem !== undefined)
    throw new Error(`${name} ${problem}, got ${JSON.stringify(text.slice(0, 64))}`);
  return Number(text);
}

const TRUE_WORDS = ['true', '1', 'yes', 'on'];
const FALSE_WORDS = ['false', '0', 'no', 'off'];

/** What an on/off setting that is none of its words is told: `must be one of true, 1, ...`. */
export const BOOLEAN_WORDS_PROBLEM = `must be one of ${[...TRUE_WORDS, ...FALSE_WORDS].join(', ')}`;

/**
 * The value of an on/off word (`true`/`1`/`yes`/`on` or `false`/`0`/`no`/`off`, in any case,
 * spaces around ignored), or undefined for any other text.
 */
export function booleanWord(text: string): boolean | undefined {
  const word = text.trim().toLowerCase();
  if (TRUE_WORDS.includes(word)) return true;
  if (FALSE_WORDS.includes(word)) return false;
  return undefined;
}

/**
 * The on/off environment variable `name` (a {@link booleanWord}), or `fallback` when it is
 * unset or empty.
 * @throws {Error} naming the variable, the words it takes and what it got, for anything else.
 */
export function envBoolean(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  fallback: boolean,
): boolean {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const value = booleanWord(text);
  if (value === undefined)
    throw new Error(`${name} ${BOOLEAN_WORDS_PROBLEM}, got ${JSON.stringify(text.slice(0, 64))}`);
  return value;
}

/** The log levels a service's `LOG_LEVEL` may name (pino's, most verbose first). */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

/** One of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * `LOG_LEVEL`, or `info` when it is unset or empty.
 * @throws {Error} naming the variable, the levels and what it got, for any other value.
 */
export function envLogLevel(env: Readonly<Record<string, string | undefined>>): LogLevel {
  const text = env.LOG_LEVEL;
  if (text === undefined || text === '') return 'info';
  const level = LOG_LEVELS.find((l) => l === text);
  if (level === undefined)
    throw new Error(
      `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(text.slice(0, 64))}`,
    );
  return level;
}

/** What a Redis key prefix from the environment may hold: no spaces, no glob characters. */
const KEY_PREFIX = /^[A-Za-z0-9][A-Za-z0-9:_.-]{0,127}$/;

/**
 * The Redis key prefix in the environment variable `name`, or `fallback` when it is unset or
 * empty. Glob characters are refused: clean-ups find a prefix's keys with `SCAN MATCH <prefix>:*`.
 * @throws {Error} naming the variable and what it got, for any other value.
 */
export function envKeyPrefix(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  fallback: string,
): string {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  if (!KEY_PREFIX.test(text))
    throw new Error(
      `${name} must be 1 to 128 letters, digits and ":_.-" (starting with a letter or digit), got ${JSON.stringify(text.slice(0, 64))}`,
    );
  return text;
}

/** The Redis a service uses when `REDIS_URL` is unset or empty. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/**
 * Why `text` is not a Redis URL (`redis://` or `rediss://`, then what the URL parser reads), or
 * undefined when it is. Anything else a Redis client would take for a host name (`garbage`,
 * `localhost:6379`) and retry for ever.
 */
export function redisUrlProblem(text: string): string | undefined {
  if (/^rediss?:\/\//i.test(text) && URL.canParse(text)) return undefined;
  return 'must be a redis:// or rediss:// URL';
}

/**
 * `text` as an error message may quote it: without the password of a URL that has one, and
 * with nothing before an `@` in anything else that has one (`default:secret@redis:6379`).
 */
function withoutPassword(text: string): string {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (url?.password) {
    url.password = '';
    return url.href;
  }
  if (url?.username) return text;
  const at = text.lastIndexOf('@');
  return at === -1 ? text : `***${text.slice(at)}`;
}

/**
 * `REDIS_URL`, or {@link DEFAULT_REDIS_URL} when it is unset or empty.
 * @throws {Error} naming the variable and what it got (never a password in it), for anything
 * but a redis:// or rediss:// URL.
 */
export function envRedisUrl(env: Readonly<Record<string, string | undefined>>): string {
  const text = env.REDIS_URL;
  if (text === undefined || text === '') return DEFAULT_REDIS_URL;
  const problem = redisUrlProblem(text);
  if (problem !== undefined)
    throw new Error(
      `REDIS_URL ${problem}, got ${JSON.stringify(withoutPassword(text).slice(0, 64))}`,
    );
  return text;
}
