/** The logger every service takes: `@support/server`'s factory (pino, JSON lines on stderr). */
export { createLogger, type Logger } from '@support/server';
