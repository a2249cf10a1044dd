/**
 * The minimal logging interface the audit package writes to, and a default that prints one
 * JSON line per entry to stderr. {@link auditLoggerFrom} adapts an object-first logger (pino,
 * the services' logger) to it.
 */

/** Structured facts that go with a log line. */
export type LogFields = Record<string, unknown>;

/** Where the audit package reports what it does. Calls never throw into the caller. */
export interface AuditLogger {
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/** A logger that takes facts first, then the message (pino's shape). */
export interface ObjectFirstLogger {
  info(obj: LogFields, msg: string): void;
  warn(obj: LogFields, msg: string): void;
  error(obj: LogFields, msg: string): void;
}

/** The audit package's `(message, fields)` logger on top of an object-first logger. */
export function auditLoggerFrom(log: ObjectFirstLogger): AuditLogger {
  return {
    info: (message, fields) => log.info(fields ?? {}, message),
    warn: (message, fields) => log.warn(fields ?? {}, message),
    error: (message, fields) => log.error(fields ?? {}, message),
  };
}

/** An error as plain, JSON-safe fields (name, message and code when there is one). */
export function errorFields(error: unknown): LogFields {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return {
      name: error.name,
      message: error.message,
      ...(code === undefined ? {} : { code }),
    };
  }
  return { message: String(error) };
}

function line(level: string, message: string, fields: LogFields | undefined): string {
  const entry = { time: new Date().toISOString(), level, component: '@fleet/audit', msg: message };
  try {
    return `${JSON.stringify({ ...entry, ...fields })}\n`;
  } catch {
    return `${JSON.stringify(entry)}\n`;
  }
}

/** The default logger: one JSON line per entry on stderr. */
export function createStderrLogger(): AuditLogger {
  const write = (level: string, message: string, fields?: LogFields): void => {
    process.stderr.write(line(level, message, fields));
  };
  return {
    info: (message, fields) => write('info', message, fields),
    warn: (message, fields) => write('warn', message, fields),
    error: (message, fields) => write('error', message, fields),
  };
}

/** Wrap a logger so a failing logger is ignored instead of breaking the caller. */
export function safeLogger(logger: AuditLogger): AuditLogger {
  const guard =
    (fn: (message: string, fields?: LogFields) => void) =>
    (message: string, fields?: LogFields): void => {
      try {
        fn.call(logger, message, fields);
      } catch {
        // Observability never breaks the producer.
      }
    };
  return { info: guard(logger.info), warn: guard(logger.warn), error: guard(logger.error) };
}
