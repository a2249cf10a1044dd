/**
 * The entity types the engine knows, and the named groups of them that config defaults and
 * the benchmark use.
 */

/** Every entity type the engine can detect, in a stable order (tables, counts, docs). */
export const ENTITY_TYPES = [
  'EMAIL_ADDRESS',
  'PHONE_NUMBER',
  'CREDIT_CARD',
  'IBAN_CODE',
  'US_SSN',
  'IP_ADDRESS',
  'MAC_ADDRESS',
  'URL_CREDENTIALS',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'GITHUB_TOKEN',
  'GITLAB_TOKEN',
  'SLACK_TOKEN',
  'STRIPE_KEY',
  'GOOGLE_API_KEY',
  'OPENAI_API_KEY',
  'JWT',
  'PRIVATE_KEY',
  'SECRET',
  'CRYPTO',
  'DATE_OF_BIRTH',
  'PERSON',
] as const;

/** One entity type, e.g. `EMAIL_ADDRESS`. */
export type EntityType = (typeof ENTITY_TYPES)[number];

/**
 * Credentials and keys: what the guard blocks in tool arguments by default
 * (`guard.block` in the config).
 */
export const SECRET_ENTITY_TYPES: readonly EntityType[] = [
  'URL_CREDENTIALS',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'GITHUB_TOKEN',
  'GITLAB_TOKEN',
  'SLACK_TOKEN',
  'STRIPE_KEY',
  'GOOGLE_API_KEY',
  'OPENAI_API_KEY',
  'JWT',
  'PRIVATE_KEY',
  'SECRET',
];

/** The structured types scored against the Presidio evaluation set. */
export const STRUCTURED_ENTITY_TYPES: readonly EntityType[] = [
  'EMAIL_ADDRESS',
  'PHONE_NUMBER',
  'CREDIT_CARD',
  'IBAN_CODE',
  'US_SSN',
  'IP_ADDRESS',
];

const ENTITY_TYPE_SET: ReadonlySet<string> = new Set(ENTITY_TYPES);

/** Whether `value` names an entity type. */
export function isEntityType(value: string): value is EntityType {
  return ENTITY_TYPE_SET.has(value);
}
