import { z } from 'zod';
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
