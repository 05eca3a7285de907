import type { Cell, ColumnDef, Row } from './cell.js';

/**
 * Kinds of change records:
 * - `insert`: payload `{ updatedAt, rows }`
 * - `update`: payload `{ updatedAt, updates: [{ id, patch }] }`
 * - `delete`: payload `{ ids }`
 * - `schema`: payload `{ columns }`, the board's user columns after an operator's `add-column`
 */
export const WAL_KINDS = ['insert', 'update', 'delete', 'schema'] as const;
/** A change record kind. */
export type WalKind = (typeof WAL_KINDS)[number];

/** Payload of an `insert` record; `updatedAt` is the engine's write time in epoch microseconds. */
export interface InsertPayload {
  updatedAt: number;
  rows: Row[];
}
/** Payload of an `update` record. */
export interface UpdatePayload {
  updatedAt: number;
  updates: { id: string; patch: Row }[];
}
/** Payload of a `delete` record: the ids that existed and were deleted. */
export interface DeletePayload {
  ids: string[];
}
/** Payload of a `schema` record: the full list of user columns from this watermark on. */
export interface SchemaPayload {
  columns: ColumnDef[];
}
/** Payload of a change record, by kind. */
export type WalPayload = InsertPayload | UpdatePayload | DeletePayload | SchemaPayload;

/** One change record; `seq` is its watermark. */
export interface ChangeRecord {
  seq: number;
  kind: WalKind;
  payload: WalPayload;
  actor?: string;
}

/**
 * Output of `changes.read`.
 * - `resync: false`: `records` are the changes after the input's `after`, in order; `cursor` is the
 *   `after` of the next page (the last record's seq, or `after` when empty); `more` tells whether
 *   records past `cursor` existed when the page was read; `head` is the board's watermark.
 * - `resync: true`: `after` is beyond retention. Re-read current state with a query at
 *   `minWatermark >= from`, then continue with `after: from`.
 */
export type ChangesPage =
  | { resync: false; records: ChangeRecord[]; cursor: number; more: boolean; head: number }
  | { resync: true; from: number; head: number };

/** What the change stream yields to a consumer. */
export type WatchEvent = { resync: false; records: ChangeRecord[] } | { resync: true; from: number };

/** Query result: column names and rows (each row is an array of cells in column order). */
export interface QueryResult {
  columns: string[];
  rows: Cell[][];
}

/**
 * How a replica was brought up to date for a request.
 * - `mode`: `none` (already at head), `incremental` (change records applied), `rebuild` (reloaded
 *   from the base table).
 * - `from`/`to`: replica watermark before and after; `applied`: change records applied.
 */
export interface SyncResult {
  mode: 'none' | 'incremental' | 'rebuild';
  from: number;
  to: number;
  applied: number;
}

/** Which replica state served the query. */
export type CacheOutcome = 'hit' | 'reattach' | 'rebuild';

/** Output of `query.execute`. */
export interface QueryOutcome {
  result: QueryResult;
  sync: SyncResult;
  cache: CacheOutcome;
  syncMs: number;
  queryMs: number;
  watermark: number;
}

/**
 * Output of `mutate.*`: the committed watermark. A repeat of a keyed mutation answers the very
 * same acknowledgement as the original.
 */
export interface MutateAck {
  watermark: number;
}
