/** Structured logging for fleet services: pino writing JSON to stderr (stdout carries the start-up line). */
import pino from 'pino';

/** An object of facts, then a message. Never pass secrets or payloads. */
export interface Logger {
  debug(obj: Record<string, unknown>, msg: string): void;
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

/** A pino logger named after the service, redacting token and authorization fields. */
export function createLogger(name: string, level = 'info'): Logger {
  return pino(
    {
      name,
      level,
      redact: ['token', 'authorization', '*.token', '*.authorization', 'secret', '*.secret'],
    },
    pino.destination(2),
  );
}

/** A logger that drops everything (tests). */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
