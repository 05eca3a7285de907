import type { Cell } from '@board/protocol';

/** The base columns every board has. `updated_at` reads back as epoch microseconds UTC. */
export interface BaseColumns {
  id: string;
  updated_at: number | null;
  state: string | null;
}

/**
 * User columns of a board, as a type parameter: column name to cell type. The default (columns
 * unknown) allows any column name with any {@link Cell}.
 *
 * @example
 * interface Tasks { title: string | null; points: number | null }
 * const tasks = connect<Tasks>({ url }).board('tasks');
 */
export type UserColumns = { [column: string]: Cell };

/** A row as read: base columns plus user columns. */
export type BoardRow<U> = BaseColumns & U;

/** A row to insert: `id` required, `state` and user columns optional; `updated_at` is set by the engine. */
export type NewRow<U> = { id: string; state?: string | null } & { [K in keyof U]?: U[K] };

/** A patch: any of `state` and the user columns (`id` and `updated_at` are read-only). */
export type RowPatch<U> = { state?: string | null } & { [K in keyof U]?: U[K] };

/** The Kysely database type of a board: one table, `items`. */
export interface BoardDatabase<U> {
  items: BoardRow<U>;
}

/** Options of every mutation. */
export interface MutateOptions {
  /**
   * Makes the mutation exactly-once: a repeat answers the original watermark. Only keyed mutations
   * are retried by the transport (and marked `x-data-idempotent` for a router).
   */
  idempotencyKey?: string;
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** Options of {@link BoardClient.query}. */
export interface QueryOptions {
  /** Positional parameters bound as `$1`, `$2`, ... Default `[]`. */
  params?: Cell[];
  /** Read-your-write floor. Default: the client's `atLeast` floor (none when never set). */
  minWatermark?: number;
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** What {@link BoardClient.lastRead} reports about the latest successful read of this client. */
export interface LastRead {
  watermark: number | null;
  servedBy: string | null;
  cache: string | null;
}

/** Retry policy for transport failures. */
export interface RetryOptions {
  /** Retries after the first attempt; `0` disables. */
  times: number;
  /** Delay before each retry, in milliseconds. */
  delayMs: number;
}

/** Options of {@link connect}. */
export interface ConnectOptions {
  /** URL of a board-node or a board-router, e.g. `http://127.0.0.1:8787`. */
  url: string;
  /** Bearer token (capability token); omit when the node runs with auth off. */
  token?: string;
  /** Deadline of each request attempt, in milliseconds. Default 10000. */
  timeoutMs?: number;
  /** Transport-failure retries. Default `{ times: 2, delayMs: 50 }`. */
  retry?: RetryOptions;
  /** Transport function (default: the platform `fetch`); injectable for tests. */
  fetch?: typeof fetch;
}

/** `node.stats` value (engine fields as the node reports them): `@board/protocol`'s `NodeStats`. */
export type { NodeStats } from '@board/protocol';
