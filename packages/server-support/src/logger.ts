import { pino } from 'pino';
import { z } from 'zod';
import { currentRequestId } from './request-id.js';

/** The structured logger every service takes (pino). */
export type Logger = pino.Logger;

/** pino's levels, for the `--log-level` option of every program. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** A log level option's schema, `info` by default. */
export const logLevelSchema = z.enum(LOG_LEVELS).default('info');

/**
 * Creates a program's logger: JSON lines on **stderr**, written synchronously (nothing is lost
 * when the process exits). Lines written while a request is served carry its `request_id`.
 * All four servers log there, so stdout stays for what a command prints
 * for people and scripts (the `listening on` line, a minted token, setup progress).
 * @example
 * const log = createLogger(config.logLevel, { service: 'orchd' });
 */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino(
    {
      level,
      base,
      // Every line written while a request is served (see withRequestId) names the request.
      mixin: () => {
        const requestId = currentRequestId();
        return requestId ? { request_id: requestId } : {};
      },
    },
    pino.destination({ dest: 2, sync: true }),
  );
}
