export type { Cell, ChangeRecord, QueryOutcome, Row, WatchEvent } from '@board/protocol';
export { BoardClient, type ClientQueryOutcome } from './board-client.js';
export { type Connection, connect } from './connect.js';
export { BoardDialect, BoardQueryCompiler } from './dialect.js';
export {
  BoardError,
  type BoardErrorTag,
  type Result,
  SERVICE_PREFIX,
  TRANSPORT_ERROR_TAGS,
  type TransportErrorTag,
} from './errors.js';
export type { LiveOptions, LiveResult } from './live.js';
export type {
  BaseColumns,
  BoardDatabase,
  BoardRow,
  ConnectOptions,
  LastRead,
  MutateOptions,
  NewRow,
  NodeStats,
  QueryOptions,
  RetryOptions,
  RowPatch,
  UserColumns,
} from './types.js';
export type { WatchOptions } from './watch.js';
