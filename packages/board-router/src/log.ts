import { pino } from 'pino';

/** The structured logger every service takes. */
export type Logger = pino.Logger;

/** Creates the router's logger (JSON lines on stderr). */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({ level, base }, pino.destination(2));
}
