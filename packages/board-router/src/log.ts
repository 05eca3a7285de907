export { createLogger, type Logger } from '@support/server';
