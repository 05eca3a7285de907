export { BOARD_ID_PATTERN, boardIdSchema, isBoardId } from './board-id.js';
export {
  BASE_COLUMNS,
  type Cell,
  COLUMN_NAME_PATTERN,
  COLUMN_TYPES,
  type ColumnDef,
  type ColumnType,
  cellSchema,
  columnDefSchema,
  type Row,
  rowSchema,
  storedCellSchema,
  textBytes,
} from './cell.js';
export type {
  CacheOutcome,
  ChangeRecord,
  ChangesPage,
  DeletePayload,
  InsertPayload,
  MutateAck,
  QueryOutcome,
  QueryResult,
  SchemaPayload,
  SyncResult,
  UpdatePayload,
  WalKind,
  WalPayload,
  WatchEvent,
} from './changes.js';
export { WAL_KINDS } from './changes.js';
export { ANY_BOARD, claimsAllow, type TokenClaims, tokenClaimsSchema } from './claims.js';
export { fail, ok, type WireEnvelope, type WireError, wireEnvelopeSchema } from './envelope.js';
export {
  BoardError,
  type BoardErrorTag,
  ERROR_TAGS,
  type ErrorTag,
  isErrorTag,
  TRANSPORT_ERROR_TAGS,
  type TransportErrorTag,
} from './errors.js';
export {
  applyLiveDiff,
  LAST_EVENT_ID_PATTERN,
  LIVE_PROCEDURE,
  LIVE_RESUMABLE_TAGS,
  type LiveDiffEvent,
  type LiveErrorEvent,
  type LiveEvents,
  type LiveResultEvent,
} from './live.js';
export {
  type Health,
  healthSchema,
  type NodeStats,
  type ProcedureOutput,
  type ProcedureOutputs,
} from './outputs.js';
export {
  CHANGES_PAGE_BYTES,
  changesReadInput,
  ENTITY,
  IDEMPOTENT_MARK,
  IDEMPOTENT_PROCEDURES,
  isIdempotentMark,
  isProcedureName,
  MAX_CHANGES_PAGE,
  MAX_ROWS_PER_MUTATION,
  MAX_SQL_LENGTH,
  MUTATION_PROCEDURES,
  mayRetry,
  mutateDeleteInput,
  mutateInsertInput,
  mutateUpdateInput,
  nodeStatsInput,
  PLACEHOLDER_PATTERN,
  PROCEDURES,
  type ProcedureInput,
  type ProcedureName,
  queryExecuteInput,
  TOKEN_NAME_PATTERN,
  VERBS,
  type Verb,
} from './procedures.js';
export {
  IDEMPOTENCY_KEY_PATTERN,
  idempotencyKeySchema,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  MAX_MUTATION_TEXT_BYTES,
  MAX_ROW_ID_LENGTH,
  MAX_TEXT_CELL_BYTES,
  ROW_ID_PATTERN,
  rowIdSchema,
  textProblem,
  textSchema,
  utf8Length,
} from './text.js';

/** Request and response header names of the wire contract. */
export const HEADERS = {
  board: 'x-data-board',
  idempotent: 'x-data-idempotent',
  servedBy: 'x-data-served-by',
  hedged: 'x-data-hedged',
} as const;

/** Watch stream constants: heartbeat comment interval and the cross-node poll interval. */
export const WATCH = { heartbeatMs: 15_000, pollMs: 500 } as const;
