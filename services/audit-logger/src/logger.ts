/** The service's logger (pino, JSON on stderr) and its adapter to the audit package's logger. */
import type { AuditLogger } from '@fleet/audit';
import pino from 'pino';

/** Structured logging: an object of facts, then a message. Never pass secrets or payloads. */
export interface Logger {
  debug(obj: Record<string, unknown>, msg: string): void;
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

/** A pino logger writing JSON to stderr (stdout carries the start-up line). */
export function createLogger(level = 'info', name = 'audit-logger'): Logger {
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

/** The audit package's `(message, fields)` logger on top of a service logger. */
export function auditLoggerOf(log: Logger): AuditLogger {
  return {
    info: (message, fields) => log.info(fields ?? {}, message),
    warn: (message, fields) => log.warn(fields ?? {}, message),
    error: (message, fields) => log.error(fields ?? {}, message),
  };
}
