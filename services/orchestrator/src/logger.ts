/** The orchestrator logs through the kit's logger (pino, JSON on stderr). */
export { createLogger, type Logger, silentLogger } from '@fleet/interceptor-kit';
