import { z } from 'zod';
import { logLevelSchema } from './logger.js';
import { MAX_TIMER_MS } from './timers.js';

/** A TCP port option (0 picks a free one). */
export function portSchema(defaultPort: number) {
  return z.coerce.number().int().min(0).max(65_535).default(defaultPort);
}

/**
 * A duration in milliseconds (options named `..._MS` / `--...-ms`), bounded by what a timer can
 * wait ({@link MAX_TIMER_MS}, about 24.8 days) so that no configured timer fires early.
 */
export function millisecondsSchema(defaultMs: number, bounds: { min?: number; max?: number } = {}) {
  return durationSchema(defaultMs, bounds, MAX_TIMER_MS);
}

/** A duration in seconds (options named `..._SEC` / `--...-sec`), bounded like {@link millisecondsSchema}. */
export function secondsSchema(defaultSec: number, bounds: { min?: number; max?: number } = {}) {
  return durationSchema(defaultSec, bounds, Math.floor(MAX_TIMER_MS / 1000));
}

function durationSchema(dflt: number, bounds: { min?: number; max?: number }, cap: number) {
  return z.coerce
    .number()
    .int()
    .min(bounds.min ?? 1)
    .max(Math.min(bounds.max ?? cap, cap))
    .default(dflt);
}

/** An on/off switch. */
export function onOffSchema(defaultValue: 'on' | 'off') {
  return z.enum(['on', 'off']).default(defaultValue);
}

/**
 * The listen address options every server has, spelled the same everywhere: `--port` and
 * `--host` (`<PREFIX>_PORT`, `<PREFIX>_HOST`, and older names for the host still read).
 * @example
 * declareOptions({ ...listenOptions('BOARD', 8787), ... })
 */
export function listenOptions(prefix: string, defaultPort: number, hostAliases: readonly string[] = []) {
  return {
    port: {
      env: `${prefix}_PORT`,
      flag: '--port <port>',
      schema: portSchema(defaultPort),
      description: 'TCP port to listen on (0 picks a free one; the listening on line says which)',
    },
    host: {
      env: `${prefix}_HOST`,
      envAliases: hostAliases,
      flag: '--host <address>',
      schema: z.string().min(1).default('127.0.0.1'),
      description: `address to listen on (0.0.0.0 for all)${hostAliases.length > 0 ? `; ${hostAliases.join(', ')} is read too` : ''}`,
    },
  };
}

/** The `--log-level` option every server has (pino levels; logs are JSON lines on stderr). */
export function logLevelOption(env: string) {
  return {
    env,
    flag: '--log-level <level>',
    schema: logLevelSchema,
    description: 'log level: fatal, error, warn, info, debug, trace, silent (JSON lines on stderr)',
  };
}
