import type { Cell, QueryOutcome, WatchEvent } from '@board/protocol';
import { type Compilable, Kysely, type SelectQueryBuilder } from 'kysely';
import { BoardDialect, tablesFor } from './dialect.js';
import { BoardError, errResult, okResult, type Result } from './errors.js';
import { type LiveOptions, type LiveResult, liveStream } from './live.js';
import { callRpc, type TransportConfig } from './transport.js';
import type {
  BoardDatabase,
  BoardRow,
  LastRead,
  MutateOptions,
  NewRow,
  NodeStats,
  QueryOptions,
  RowPatch,
  UserColumns,
} from './types.js';
import { type WatchOptions, watchStream } from './watch.js';

/** A query outcome as the client returns it: the node's outcome plus who served it. */
export type ClientQueryOutcome = QueryOutcome & { servedBy: string };

/** State shared by the clients of one `connect()` (and by `atLeast` copies of a board client). */
export interface Shared {
  config: TransportConfig;
  /** The node id behind the URL, from `/health`; cached, forgotten after a transport failure. */
  nodeId(): Promise<string | undefined>;
  forgetNodeId(): void;
}

/**
 * A client for one board. Every method returns a {@link Result} and never throws for server or
 * transport failures (builder `execute()` follows Kysely and rejects with the {@link BoardError}).
 */
export class BoardClient<U = UserColumns> {
  readonly #shared: Shared;
  readonly #floor: number | undefined;
  readonly #last: { read: LastRead };
  #db: Kysely<BoardDatabase<U>> | undefined;

  /** @internal use `connect(options).board(id)`. */
  constructor(
    /** The board id. */
    readonly boardId: string,
    shared: Shared,
    floor: number | undefined,
  ) {
    this.#shared = shared;
    this.#floor = floor;
    this.#last = { read: { watermark: null, servedBy: null, cache: null } };
  }

  /**
   * The read floor set by {@link atLeast} (undefined when none).
   *
   * @example
   * board.atLeast(42).floor; // 42
   */
  get floor(): number | undefined {
    return this.#floor;
  }

  /**
   * Runs SQL on the board's replica. Name the board's table with the placeholder `{{items}}`
   * (any `{{token}}` is bound to entity `items`); parameters bind as `$1`, `$2`, ...
   *
   * @example
   * const r = await board.query('SELECT id, state FROM {{items}} WHERE state = $1', { params: ['open'] });
   * if (r.ok) console.log(r.value.result.columns, r.value.result.rows, r.value.servedBy);
   */
  async query(sql: string, options: QueryOptions = {}): Promise<Result<ClientQueryOutcome>> {
    return await this.#execute(
      sql,
      options.params ?? [],
      tablesFor(sql),
      options.minWatermark,
      options.signal,
    );
  }

  async #execute(
    sql: string,
    params: Cell[],
    tables: { token: string; entity: string }[],
    minWatermark: number | undefined,
    signal?: AbortSignal,
  ): Promise<Result<ClientQueryOutcome>> {
    // The floor is a guarantee of this client (spec: its reads refuse a replica older than it): an
    // explicit `minWatermark` can raise it for one read, never lower it.
    const floor =
      minWatermark === undefined || this.#floor === undefined
        ? (minWatermark ?? this.#floor)
        : Math.max(minWatermark, this.#floor);
    const body: Record<string, unknown> = { sql, tables, params };
    if (floor !== undefined) body.minWatermark = floor;
    const r = await callRpc(this.#shared.config, this.boardId, 'query.execute', body, signal);
    if (!r.ok) {
      if (r.error.isTransport) this.#shared.forgetNodeId();
      return r;
    }
    const servedBy = r.value.servedBy ?? (await this.#shared.nodeId()) ?? this.#shared.config.url;
    const outcome: ClientQueryOutcome = { ...r.value.value, servedBy };
    this.#last.read = { watermark: outcome.watermark, servedBy, cache: outcome.cache };
    return okResult(outcome);
  }

  /**
   * A raw Kysely instance over the board schema (one table, `items`), for joins and subqueries.
   * Queries compile to SQL with `{{items}}` placeholders and run as `query.execute` at this
   * client's floor. `execute()` rejects with a {@link BoardError} (Kysely's convention).
   *
   * @example
   * const rows = await board.db
   *   .selectFrom('items as a')
   *   .innerJoin('items as b', 'b.id', 'a.state')
   *   .select(['a.id', 'b.state'])
   *   .execute();
   */
  get db(): Kysely<BoardDatabase<U>> {
    this.#db ??= new Kysely<BoardDatabase<U>>({
      dialect: new BoardDialect(async (sql, params, tables) => {
        const r = await this.#execute(sql, params, tables, undefined);
        return r.ok ? okResult(r.value) : r;
      }),
    });
    return this.#db;
  }

  /**
   * A select chain rooted at the board's table (no table name needed), with the given selection.
   *
   * @example
   * const open = await board.select(['id', 'state']).where('state', '=', 'open').orderBy('id').limit(10).execute();
   */
  select<C extends keyof BoardRow<U> & string>(
    columns: readonly C[],
  ): SelectQueryBuilder<BoardDatabase<U>, 'items', Pick<BoardRow<U>, C>> {
    return this.db.selectFrom('items').select(columns as never) as never;
  }

  /**
   * A `SELECT *` chain rooted at the board's table.
   *
   * @example
   * const rows = await board.selectAll().where('id', 'in', ['a', 'b']).execute();
   * // rows: { id: string; updated_at: number | null; state: string | null; ...user columns }[]
   */
  selectAll(): SelectQueryBuilder<BoardDatabase<U>, 'items', BoardRow<U>> {
    return this.db.selectFrom('items').selectAll() as never;
  }

  /**
   * A new client whose reads refuse a replica older than `watermark` (read-your-writes); the
   * original client is unchanged. Raising only: a lower value keeps the higher floor.
   *
   * @example
   * const w = await board.insert({ id: 'a1' });
   * if (w.ok) await board.atLeast(w.value).query('SELECT * FROM {{items}}');
   */
  atLeast(watermark: number): BoardClient<U> {
    const floor = this.#floor === undefined ? watermark : Math.max(this.#floor, watermark);
    return new BoardClient<U>(this.boardId, this.#shared, floor);
  }

  async #mutate(
    procedure: 'mutate.insert' | 'mutate.update' | 'mutate.delete',
    body: Record<string, unknown>,
    options: MutateOptions,
  ): Promise<Result<number>> {
    if (options.idempotencyKey !== undefined) body.idempotencyKey = options.idempotencyKey;
    const r = await callRpc(this.#shared.config, this.boardId, procedure, body, options.signal);
    if (!r.ok) return r;
    const w = r.value.value?.watermark;
    if (typeof w !== 'number') return errResult(new BoardError('BadResponse', `${procedure}: no watermark`));
    return okResult(w);
  }

  /**
   * Inserts one row; returns the committed watermark.
   *
   * @example
   * const r = await board.insert({ id: 'a1', state: 'open' }, { idempotencyKey: 'create-a1' });
   * if (r.ok) console.log('committed at', r.value);
   */
  async insert(row: NewRow<U>, options: MutateOptions = {}): Promise<Result<number>> {
    return await this.insertMany([row], options);
  }

  /**
   * Inserts rows as one atomic write; returns the committed watermark.
   *
   * @example
   * await board.insertMany([{ id: 'a1' }, { id: 'a2', state: 'done' }]);
   */
  async insertMany(rows: NewRow<U>[], options: MutateOptions = {}): Promise<Result<number>> {
    return await this.#mutate('mutate.insert', { rows }, options);
  }

  /**
   * Patches one row; returns the committed watermark (`RowNotFound` when the row is missing).
   *
   * @example
   * await board.update('a1', { state: 'done' });
   */
  async update(id: string, patch: RowPatch<U>, options: MutateOptions = {}): Promise<Result<number>> {
    return await this.updateMany([{ id, patch }], options);
  }

  /**
   * Patches several rows as one atomic write (all or nothing); returns the committed watermark.
   *
   * @example
   * await board.updateMany([{ id: 'a1', patch: { state: 'done' } }, { id: 'a2', patch: { state: null } }]);
   */
  async updateMany(
    updates: { id: string; patch: RowPatch<U> }[],
    options: MutateOptions = {},
  ): Promise<Result<number>> {
    return await this.#mutate('mutate.update', { updates }, options);
  }

  /**
   * Deletes one row (a missing id is not an error); returns the committed watermark.
   *
   * @example
   * await board.delete('a1');
   */
  async delete(id: string, options: MutateOptions = {}): Promise<Result<number>> {
    return await this.deleteMany([id], options);
  }

  /**
   * Deletes rows as one atomic write; returns the committed watermark.
   *
   * @example
   * await board.deleteMany(['a1', 'a2'], { idempotencyKey: 'cleanup-42' });
   */
  async deleteMany(ids: string[], options: MutateOptions = {}): Promise<Result<number>> {
    return await this.#mutate('mutate.delete', { ids }, options);
  }

  /**
   * Follows the board's changes: an async iterator of `{ resync: false, records }` and
   * `{ resync: true, from }`. Ends when `signal` aborts or the server closes the stream; a server
   * `error` event (and a transport failure past the retries) is thrown to the consumer. After a
   * transport drop it reconnects from the last record it yielded: no record lost or repeated.
   *
   * @example
   * const ctl = new AbortController();
   * for await (const ev of board.watch({ after: 0, signal: ctl.signal })) {
   *   if (ev.resync) await reload(ev.from);
   *   else for (const rec of ev.records) console.log(rec.seq, rec.kind);
   * }
   */
  watch(options: WatchOptions = {}): AsyncIterableIterator<WatchEvent> {
    return watchStream(this.#shared.config, this.boardId, options, async () => {
      const r = await callRpc(this.#shared.config, this.boardId, 'changes.read', {
        after: 0,
        limit: 1,
      });
      return r.ok ? r.value.value.head : undefined;
    });
  }

  /**
   * Keeps a query live: an async iterator of its results, the first at (or past) the board's head
   * when called, then a new one each time a change reaches the board's head (bursts folded, see
   * `@board/server`'s README). Each result carries its watermark and is exactly the query's answer
   * at it (`query.execute` at that watermark), with typed rows and what was added and removed
   * since the previous one. The stream is shared on the node with every subscriber of the same
   * query. It resumes by itself after a dropped connection, a node stopping or failing over, or a
   * `SlowConsumer` cut-off (`Last-Event-ID`: no state after the last one yielded is missed);
   * other failures (`QueryFailed`, `QueryRefused`, `ResultTooLarge`, `TokenExpired`,
   * `TooManyLiveQueries`, ...) are thrown to the consumer. Ends when `signal` aborts.
   * Takes SQL (rows typed by the type parameter) or a Kysely builder (rows typed by it).
   *
   * @example
   * const ctl = new AbortController();
   * for await (const r of board.live<{ state: string; n: number }>(
   *   'SELECT state, count(*) AS n FROM {{items}} GROUP BY state ORDER BY state', { signal: ctl.signal })) {
   *   console.log(r.watermark, r.rows); // [{ state: 'done', n: 3 }, { state: 'open', n: 5 }]
   * }
   * for await (const r of board.live(board.selectAll().where('state', '=', 'open').orderBy('id'))) {
   *   render(r.rows); // typed as BoardRow<U>[]
   * }
   */
  live<R = Record<string, Cell>>(sql: string, options?: LiveOptions): AsyncIterableIterator<LiveResult<R>>;
  live<O>(query: Compilable<O>, options?: Omit<LiveOptions, 'params'>): AsyncIterableIterator<LiveResult<O>>;
  live<R>(query: string | Compilable<R>, options: LiveOptions = {}): AsyncIterableIterator<LiveResult<R>> {
    const compiled = typeof query === 'string' ? undefined : query.compile();
    const sql = compiled ? compiled.sql : (query as string);
    const params = compiled ? (compiled.parameters as Cell[]) : (options.params ?? []);
    const floor =
      options.minWatermark === undefined || this.#floor === undefined
        ? (options.minWatermark ?? this.#floor)
        : Math.max(options.minWatermark, this.#floor);
    return liveStream<R>(
      this.#shared.config,
      this.boardId,
      { sql, tables: tablesFor(sql), params, minWatermark: floor },
      options.signal,
    );
  }

  /**
   * What the latest successful read of this client saw (nulls before the first read). Each
   * `atLeast` copy keeps its own.
   *
   * @example
   * await board.query('SELECT 1');
   * const { watermark, servedBy, cache } = board.lastRead();
   */
  lastRead(): LastRead {
    return { ...this.#last.read };
  }

  /**
   * Calls `node.stats`: the node's counters, its id and its boards.
   *
   * @example
   * const s = await board.stats();
   * if (s.ok) console.log(s.value.nodeId, s.value.boards);
   */
  async stats(options: { signal?: AbortSignal } = {}): Promise<Result<NodeStats>> {
    const r = await callRpc(this.#shared.config, this.boardId, 'node.stats', {}, options.signal);
    return r.ok ? okResult(r.value.value) : r;
  }
}
