/** The logger interface the orchestrator uses (pino-compatible), and a pino factory. */
import pino from 'pino';

/** Structured logging: an object of facts, then a message. Never pass secrets or payloads. */
export interface Logger {
  debug(obj: Record<string, unknown>, msg: string): void;
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

/** A pino logger writing JSON to stderr (stdout carries the start-up line). */
export function createLogger(level = 'info', name = 'orchestrator'): Logger {
  return pino(
    { name, level, redact: ['token', 'authorization', '*.token', '*.authorization'] },
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
