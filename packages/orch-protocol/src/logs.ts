import { z } from 'zod';

/**
 * Reading a log in windows (the agent's `GET /v1/vms/{id}/log` and orchd's
 * `GET /v1/environments/{id}/logs`): an answer carries at most {@link LOG_WINDOW_BYTES} raw bytes of
 * the log, from byte `offset`, or the last `tail` bytes; its headers say where the window starts
 * ({@link LOG_OFFSET_HEADER}) and how long the whole log is ({@link LOG_SIZE_HEADER}), so a
 * follower asks next for `offset = window start + window length`. Offsets count bytes, not
 * characters: a window may end inside a UTF-8 sequence, which the next window completes.
 */
export const LOG_WINDOW_BYTES = 1 << 20;

/** Header: the byte offset in the log where the answer's bytes start. */
export const LOG_OFFSET_HEADER = 'x-log-offset';
/** Header: the log's whole length in bytes when the answer was read. */
export const LOG_SIZE_HEADER = 'x-log-size';

const byteCount = z
  .string()
  .regex(/^\d{1,15}$/, 'must be a whole number of bytes')
  .transform(Number);

/**
 * Environment logs (`GET /v1/environments/{id}/logs`): a window as above, and `follow=true` to keep
 * the answer open and stream the log's new bytes until the environment stops or the caller leaves.
 */
export const EnvironmentLogsQuery = z.strictObject({
  offset: byteCount.optional().describe('first byte to read (default 0)'),
  tail: byteCount.optional().describe('start with the last N bytes instead'),
  follow: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional()
    .describe('keep streaming new output until the environment stops'),
});
export type EnvironmentLogsQuery = z.output<typeof EnvironmentLogsQuery>;

/** Which window of a log to read: `offset` (default 0) or `tail` (the last N bytes; wins over offset). */
export const LogWindowQuery = z.strictObject({
  offset: byteCount.optional().describe('first byte to read (default 0)'),
  tail: byteCount.optional().describe('read the last N bytes instead (at most 1 MiB an answer)'),
});
export type LogWindowQuery = z.output<typeof LogWindowQuery>;

/** The bytes `[start, start + length)` to read of a log of `size` bytes for `query`. */
export function logWindow(size: number, query: LogWindowQuery): { start: number; length: number } {
  const start = query.tail !== undefined ? Math.max(0, size - query.tail) : Math.min(size, query.offset ?? 0);
  return { start, length: Math.min(LOG_WINDOW_BYTES, size - start) };
}
