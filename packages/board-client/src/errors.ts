import type { ErrorTag } from '@board/protocol';

/**
 * Tags the client adds for failures that never produced a wire envelope:
 * - `TransportTimeout`: the per-request deadline (`timeoutMs`) passed.
 * - `TransportFailed`: the request could not be sent or the response could not be read
 *   (connection refused or reset, DNS, a proxy answering 5xx without an envelope).
 * - `BadResponse`: an answer that is not a wire envelope.
 * - `Aborted`: the caller's signal aborted the request.
 * - `InvalidBoardId`: also raised client-side, before any request, for a bad board id.
 */
export const TRANSPORT_ERROR_TAGS = [
  'TransportTimeout',
  'TransportFailed',
  'BadResponse',
  'Aborted',
] as const;
/** A client-side transport tag. */
export type TransportErrorTag = (typeof TRANSPORT_ERROR_TAGS)[number];
/** Every tag a {@link BoardError} can carry: the wire tags of `@board/protocol` plus the transport tags. */
export type BoardErrorTag = ErrorTag | TransportErrorTag;

/**
 * The one error class of the client. `_tag` is the wire `_tag` (or a transport tag) to switch on;
 * `message` is the server's message; `status` is the HTTP status when a response arrived.
 *
 * @example
 * const r = await board.insert({ id: 'a1' });
 * if (!r.ok && r.error._tag === 'DuplicateRow') console.log('already there');
 */
export class BoardError extends Error {
  override readonly name = 'BoardError';
  /** Wire tag or transport tag. Unknown wire tags from newer servers come through as they are. */
  readonly _tag: BoardErrorTag;
  /** HTTP status of the answer, when one arrived. */
  readonly status: number | undefined;

  constructor(tag: BoardErrorTag, message: string, options: { status?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this._tag = tag;
    this.status = options.status;
  }

  /** True for failures of the transport (no envelope was received): the ones retries are for. */
  get isTransport(): boolean {
    return (TRANSPORT_ERROR_TAGS as readonly string[]).includes(this._tag);
  }
}

/**
 * What every board client method returns: the value, or a {@link BoardError}. Methods never throw
 * for server or transport failures.
 *
 * @example
 * const r = await board.query('SELECT count(*) FROM {{items}}');
 * if (r.ok) console.log(r.value.result.rows[0]);
 * else if (r.error._tag === 'Forbidden') console.log('no read access');
 */
export type Result<T> = { ok: true; value: T } | { ok: false; error: BoardError };

/** Builds a success {@link Result}. */
export function okResult<T>(value: T): Result<T> {
  return { ok: true, value };
}

/** Builds a failure {@link Result}. */
export function errResult<T>(error: BoardError): Result<T> {
  return { ok: false, error };
}

/** Message prefix of errors the query builder's dialect throws. */
export const SERVICE_PREFIX = 'board-client:';
