import type { ErrorTag } from '@board/protocol';

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
