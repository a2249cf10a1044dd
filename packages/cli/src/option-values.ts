/**
 * Parsers for option values, run by commander as it reads the command line (before any
 * request), each refusing a value it cannot use with a `USAGE` {@link CliError} (exit 2) that
 * names the option and what it takes. An empty value is refused, never read as "unset":
 * leaving the option out is how to say that.
 */
import { EventNameSchema } from '@fleet/core';
import { CliError } from './errors.ts';

/**
 * A parser for `option` that refuses an empty (or blank) value: `expected` says what the
 * option takes (`a directory`), `leftOut` what leaving it out means (`the default, .fleet`).
 */
export function nonEmpty(
  option: string,
  expected: string,
  leftOut: string,
): (value: string) => string {
  return (value) => {
    if (value.trim() === '')
      throw new CliError(
        'USAGE',
        `${option} ${JSON.stringify(value)}: expected ${expected}, or leave ${option} out for ${leftOut}`,
      );
    return value;
  };
}

/** The longest event name the admin API's `GET /admin/chain` takes. */
const MAX_EVENT_LENGTH = 256;

/**
 * `--event`: one concrete MCP method name (`tools/call`), as the admin API's chain view takes
 * it: not empty, no wildcard, no white space or control characters, at most 256 characters.
 */
export function eventName(value: string): string {
  if (
    EventNameSchema.safeParse(value).success &&
    value.length <= MAX_EVENT_LENGTH &&
    !/\p{Cc}/u.test(value)
  )
    return value;
  throw new CliError(
    'USAGE',
    `--event ${JSON.stringify(value)}: expected one MCP method name, e.g. tools/call or resources/read (no spaces, no wildcard, at most ${MAX_EVENT_LENGTH} characters)`,
  );
}
