import type { BoardError } from '@board/protocol';

/**
 * The client's errors are `@board/protocol`'s `BoardError` (one class for node, router and client):
 * `_tag` is the wire `_tag` or a transport tag (`TransportTimeout`, `TransportFailed`,
 * `BadResponse`, `Aborted`) to switch on, `message` the server's message, `status` the HTTP status
 * when a response arrived, `isTransport` true when no envelope was received. `InvalidBoardId` is
 * also raised client-side, before any request, for a bad board id.
 *
 * @example
 * const r = await board.insert({ id: 'a1' });
 * if (!r.ok && r.error._tag === 'DuplicateRow') console.log('already there');
 */
export {
  BoardError,
  type BoardErrorTag,
  TRANSPORT_ERROR_TAGS,
  type TransportErrorTag,
} from '@board/protocol';

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
