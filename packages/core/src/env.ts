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
