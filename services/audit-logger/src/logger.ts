/** The service's logger is the kit's (pino, JSON on stderr); the audit package gets an adapter. */
export { auditLoggerFrom as auditLoggerOf } from '@fleet/audit';
export { createLogger, type Logger, silentLogger } from '@fleet/interceptor-kit';
