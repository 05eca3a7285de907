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
export { ERROR_TAGS, type ErrorTag, isErrorTag } from './errors.js';
export {
  changesReadInput,
  ENTITY,
  IDEMPOTENT_PROCEDURES,
  isProcedureName,
  MAX_CHANGES_PAGE,
  MAX_ROWS_PER_MUTATION,
  MAX_SQL_LENGTH,
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

/** Request and response header names of the wire contract. */
export const HEADERS = {
  board: 'x-data-board',
  idempotent: 'x-data-idempotent',
  servedBy: 'x-data-served-by',
  hedged: 'x-data-hedged',
} as const;

/** Watch stream constants: heartbeat comment interval and the cross-node poll interval. */
export const WATCH = { heartbeatMs: 15_000, pollMs: 500 } as const;
