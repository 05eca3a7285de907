import { pino } from 'pino';
import { z } from 'zod';

/** The structured logger every service takes (pino). */
export type Logger = pino.Logger;

/** pino's levels, for the `--log-level` option of every program. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** A log level option's schema, `info` by default. */
export const logLevelSchema = z.enum(LOG_LEVELS).default('info');

/**
 * Creates a program's logger: JSON lines on **stderr**, written synchronously (nothing is lost
 * when the process exits). All four servers log there, so stdout stays for what a command prints
 * for people and scripts (the `listening on` line, a minted token, setup progress).
 * @example
 * const log = createLogger(config.logLevel, { service: 'orchd' });
 */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({ level, base }, pino.destination({ dest: 2, sync: true }));
}
