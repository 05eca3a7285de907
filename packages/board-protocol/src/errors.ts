/**
 * Every error tag the board service puts on the wire, with the HTTP status it travels with.
 * Status 200 means the tag comes from a handler that ran (envelope discipline); the others are
 * answered before any handler runs.
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
  WatermarkNotReached: 200,
  CursorAhead: 200,
  TokenExpired: 200,
  BoardExists: 200,
  ColumnExists: 200,
  Unavailable: 200,
  Internal: 200,
} as const;

/** A wire error tag. */
export type ErrorTag = keyof typeof ERROR_TAGS;

/** True when `tag` is one of {@link ERROR_TAGS}. */
export function isErrorTag(tag: string): tag is ErrorTag {
  return Object.hasOwn(ERROR_TAGS, tag);
}
