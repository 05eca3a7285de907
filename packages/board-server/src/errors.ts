import type { ErrorTag } from '@board/protocol';
import { isStoreUnavailable } from '@support/pg';
import type { Logger } from './log.js';

/**
 * The one error class of the node: a stable wire tag, a message for people, optional details.
 * Handlers throw it; `rpc/app.ts` maps it to HTTP and the envelope in one place.
 */
export class BoardError extends Error {
  override readonly name = 'BoardError';
  constructor(
    readonly tag: ErrorTag,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** Shorthand: `throw boardError('UnknownBoard', 'no board "x"')`. */
export function boardError(tag: ErrorTag, message: string, details?: Record<string, unknown>): BoardError {
  return new BoardError(tag, message, details);
}

/**
 * Tag and message of any error: our own `BoardError`s as they are, store connectivity failures as
 * `Unavailable`, anything else as `Internal` (logged). The HTTP side (`rpc/app.ts` onError) and the
 * SSE side (`watch/watch-stream.ts` error event) both go through here.
 */
export function toWireError(err: unknown, log: Logger): { tag: ErrorTag; message: string } {
  if (err instanceof BoardError) return { tag: err.tag, message: err.message };
  const message = err instanceof Error ? err.message : String(err);
  if (isStoreUnavailable(err)) {
    log.warn({ err }, 'store unavailable');
    return { tag: 'Unavailable', message: `the store is unavailable: ${message}` };
  }
  log.error({ err }, 'unexpected error');
  return { tag: 'Internal', message: `internal error: ${message}` };
}
