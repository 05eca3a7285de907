import type { WireError } from './envelope.js';

/**
 * Every error tag the board service puts on the wire, with the HTTP status it travels with.
 * Status 200 means the tag comes from a handler that ran (envelope discipline); the others are
 * answered before any handler runs (by a node, or by a router when no node's answer can be relayed).
 */
export const ERROR_TAGS = {
  // Refused before a handler ran.
  Unauthenticated: 401,
  MissingBoardEnvelope: 401,
  Forbidden: 403,
  UnknownProcedure: 404,
  NotFound: 404,
  InvalidInput: 400,
  InvalidBoardId: 400,
  // Answered by a router when no node's answer can be relayed.
  NoNodeAvailable: 503,
  NodeFailed: 502,
  RouterTimeout: 504,
  // From handlers that ran (HTTP 200).
  UnknownBoard: 200,
  UnknownColumn: 200,
  UnknownEntity: 200,
  UnknownPlaceholder: 200,
  InvalidCell: 200,
  ReadOnlyColumn: 200,
  DuplicateRow: 200,
  RowNotFound: 200,
  QueryRefused: 200,
  QueryFailed: 200,
  QueryTimeout: 200,
  ResultTooLarge: 200,
  WatermarkNotReached: 200,
  CursorAhead: 200,
  SlowConsumer: 200,
  TooManyLiveQueries: 200,
  TokenExpired: 200,
  BoardExists: 200,
  ColumnExists: 200,
  Unavailable: 200,
  OutOfMemory: 200,
  ReplicaUnavailable: 200,
  Internal: 200,
} as const;

/** A wire error tag. */
export type ErrorTag = keyof typeof ERROR_TAGS;

/** True when `tag` is one of {@link ERROR_TAGS}. */
export function isErrorTag(tag: string): tag is ErrorTag {
  return Object.hasOwn(ERROR_TAGS, tag);
}

/**
 * Tags a client adds for failures that never produced a wire envelope (they never travel):
 * - `TransportTimeout`: the per-request deadline passed.
 * - `TransportFailed`: the request could not be sent or the answer not read (connection refused
 *   or reset, DNS, a proxy answering 5xx without an envelope).
 * - `BadResponse`: an answer that is not a wire envelope.
 * - `Aborted`: the caller's signal aborted the request.
 */
export const TRANSPORT_ERROR_TAGS = [
  'TransportTimeout',
  'TransportFailed',
  'BadResponse',
  'Aborted',
] as const;
/** A client-side transport tag. */
export type TransportErrorTag = (typeof TRANSPORT_ERROR_TAGS)[number];
/** Every tag a {@link BoardError} can carry: the wire tags plus the transport tags. */
export type BoardErrorTag = ErrorTag | TransportErrorTag;

/**
 * The one error class of the board service, shared by node, router and client: `_tag` is the wire
 * `_tag` (or a client transport tag) to switch on, `message` is for people, `status` is the HTTP
 * status of the answer that carried it (client side) and `details` are structured extras that never
 * travel. A node throws it from handlers and maps it to HTTP and the envelope in one place; a
 * router answers its own tags with it; a client returns it inside a `Result`.
 *
 * @example
 * throw new BoardError('UnknownBoard', 'unknown board "x"');
 * if (!r.ok && r.error._tag === 'DuplicateRow') console.log('already there');
 */
export class BoardError extends Error {
  override readonly name = 'BoardError';
  /** Wire tag or transport tag. Unknown wire tags from newer servers come through as they are. */
  readonly _tag: BoardErrorTag;
  /** HTTP status of the answer, when one arrived (client side). */
  readonly status: number | undefined;
  /** Structured details for logs; never sent on the wire. */
  readonly details: Record<string, unknown> | undefined;

  constructor(
    tag: BoardErrorTag,
    message: string,
    options: { status?: number; cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this._tag = tag;
    this.status = options.status;
    this.details = options.details;
  }

  /** True for failures of the transport (no envelope was received): the ones retries are for. */
  get isTransport(): boolean {
    return (TRANSPORT_ERROR_TAGS as readonly string[]).includes(this._tag);
  }

  /** The wire form: `{ _tag, message }`. */
  toWire(): WireError {
    return { _tag: this._tag, message: this.message };
  }
}
