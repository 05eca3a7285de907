import { createHash } from 'node:crypto';
import type { QueryOutcome } from '@board/protocol';
import type pg from 'pg';
import type { ChangeNotifier } from '../changelog/change-notifier.js';
import { boardError } from '../errors.js';
import type { Logger } from '../log.js';
import { HeadReader } from '../replica/head-reader.js';
import type { ReplicaCache } from '../replica/replica-cache.js';
import type { WatchSink } from '../watch/response-sink.js';
import { type LiveInput, LiveQuery } from './live-query.js';
import { LiveStream } from './live-stream.js';

/** Bounds on live queries (README, "Live queries"). */
export interface LiveLimits {
  /** Live streams on the node. */
  maxStreams: number;
  /** Live streams per token (auth on). */
  maxPerToken: number;
  /** Distinct live queries (board, sql, tables, params) on the node. */
  maxQueries: number;
}

/** What the hub works with. */
export interface LiveSettings {
  replicas: ReplicaCache;
  pool: pg.Pool;
  notifier: ChangeNotifier;
  log: Logger;
  limits: LiveLimits;
  bufferBytes: number;
  heartbeatMs: number;
}

/** What one `POST /live` asks for. */
export interface LiveRequest {
  board: string;
  input: LiveInput & { minWatermark?: number | undefined };
  /** `Last-Event-ID`: the watermark the client holds. */
  resumeFrom: number | undefined;
  expiresAt: number | undefined;
  /** The bearer token (counted per token, by digest; never kept as it is), when auth is on. */
  token: string | undefined;
}

/** One board's live queries and its subscription to head moves. */
interface LiveBoard {
  queries: Map<string, LiveQuery>;
  unsubscribe: () => void;
}

/**
 * The node's live queries: one {@link LiveQuery} per distinct (board, sql, tables, params), shared
 * by its streams; per board one subscription to the change notifier (local writes at once,
 * LISTEN/NOTIFY, the poll), which asks every query of the board to catch up with the new head. The
 * queries of one board asked in the same turn call `query.execute`'s path together: one coalesced
 * head read, one replica sync (the others find the replica at the head), then their reads.
 */
export class LiveHub {
  readonly #boards = new Map<string, LiveBoard>();
  readonly #perToken = new Map<string, number>();
  readonly #heads: HeadReader;
  readonly #heartbeat: NodeJS.Timeout;
  readonly #streams = new Set<LiveStream>();
  #queryCount = 0;
  /** Counters for `node.stats`. */
  readonly counters = { evaluations: 0, syncs: 0, slowConsumers: 0, refused: 0 };

  constructor(private readonly settings: LiveSettings) {
    this.#heads = new HeadReader(settings.pool);
    this.#heartbeat = setInterval(() => {
      for (const s of [...this.#streams]) s.heartbeat();
    }, settings.heartbeatMs);
    this.#heartbeat.unref();
  }

  /** `node.stats`' view. */
  stats(): {
    streams: number;
    queries: number;
    evaluations: number;
    syncs: number;
    slowConsumers: number;
    refused: number;
  } {
    return { streams: this.#streams.size, queries: this.#queryCount, ...this.counters };
  }

  /**
   * Opens a live stream on `sink`; resolves once it is attached to its query (or ended with an
   * `error` event: limits, unknown board, a floor or resume point ahead of the head).
   */
  async open(sink: WatchSink, req: LiveRequest): Promise<void> {
    const { limits, log, bufferBytes } = this.settings;
    const stream = new LiveStream(
      sink,
      {
        log,
        bufferBytes,
        onSlowConsumer: () => this.counters.slowConsumers++,
      },
      req.expiresAt,
      0,
    );
    const key = JSON.stringify([req.input.sql, req.input.tables, req.input.params]);
    const board = this.#boards.get(req.board);
    const existing = board?.queries.get(key);
    const tokenKey =
      req.token === undefined ? undefined : createHash('sha256').update(req.token).digest('hex');
    const refusal =
      this.#streams.size >= limits.maxStreams
        ? `this node serves at most ${limits.maxStreams} live streams`
        : tokenKey !== undefined && (this.#perToken.get(tokenKey) ?? 0) >= limits.maxPerToken
          ? `a token may hold at most ${limits.maxPerToken} live streams on a node`
          : !existing && this.#queryCount >= limits.maxQueries
            ? `this node serves at most ${limits.maxQueries} distinct live queries`
            : undefined;
    if (refusal) {
      this.counters.refused++;
      stream.fail(boardError('TooManyLiveQueries', `${refusal}; close one or try another node`));
      return;
    }
    this.#streams.add(stream);
    if (tokenKey !== undefined) this.#perToken.set(tokenKey, (this.#perToken.get(tokenKey) ?? 0) + 1);
    stream.onClosed(() => {
      this.#streams.delete(stream);
      if (tokenKey === undefined) return;
      const n = (this.#perToken.get(tokenKey) ?? 1) - 1;
      if (n <= 0) this.#perToken.delete(tokenKey);
      else this.#perToken.set(tokenKey, n);
    });
    try {
      // Read after the request arrived: the first event includes every write acknowledged before.
      const head = await this.#heads.read(req.board);
      if (!head) throw boardError('UnknownBoard', `unknown board "${req.board}"`);
      const floor = req.input.minWatermark;
      if (floor !== undefined && floor > head.head) {
        throw boardError(
          'WatermarkNotReached',
          `board "${req.board}" is at watermark ${head.head}, below the requested minimum ${floor}`,
        );
      }
      if (req.resumeFrom !== undefined && req.resumeFrom > head.head) {
        throw boardError(
          'CursorAhead',
          `Last-Event-ID ${req.resumeFrom} is ahead of board "${req.board}" head ${head.head}`,
        );
      }
      if (stream.state === 'closed') return;
      stream.need = Math.max(head.head, floor ?? 0, req.resumeFrom ?? 0);
      const query = this.#query(req.board, key, req.input);
      stream.attach(query);
      stream.onClosed(() => this.#left(req.board, key, query));
      if (query.watermark >= stream.need) stream.offer(query, -1, undefined);
      query.request(head.head);
    } catch (err) {
      stream.fail(err);
    }
  }

  /** Ends every stream (node stopping) and the heartbeat. */
  closeAll(): void {
    clearInterval(this.#heartbeat);
    for (const s of [...this.#streams]) s.close();
  }

  /** The board's query for `key`, created (with the board's subscription) when new. */
  #query(boardId: string, key: string, input: LiveInput): LiveQuery {
    let board = this.#boards.get(boardId);
    if (!board) {
      const queries = new Map<string, LiveQuery>();
      const unsubscribe = this.settings.notifier.subscribe(boardId, (head) => {
        for (const q of queries.values()) q.request(head);
      });
      board = { queries, unsubscribe };
      this.#boards.set(boardId, board);
    }
    let query = board.queries.get(key);
    if (!query || query.failed) {
      query = new LiveQuery(
        boardId,
        key,
        input,
        (b, i, head) => this.#evaluate(b, i, head),
        (q, err) => this.#failed(q, err),
      );
      board.queries.set(key, query);
      this.#queryCount++;
    }
    return query;
  }

  /**
   * One evaluation: `query.execute`'s own path (sync, then a bounded read), decoded. `head` (a head
   * the store has reached: announced after a commit, or read) is the floor, so the replica cache
   * does not first run the query on the replica it knows is older.
   */
  async #evaluate(board: string, input: LiveInput, head: number): Promise<QueryOutcome> {
    this.counters.evaluations++;
    const encoded = await this.settings.replicas.execute(board, {
      sql: input.sql,
      tables: input.tables,
      params: input.params,
      minWatermark: head,
    });
    const outcome = JSON.parse(Buffer.concat(encoded.parts).toString('utf8')) as QueryOutcome;
    if (outcome.sync.mode !== 'none' || outcome.cache !== 'hit') this.counters.syncs++;
    return outcome;
  }

  #failed(query: LiveQuery, err: unknown): void {
    for (const s of [...query.streams]) s.fail(err);
    // Its last stream may have left while it was evaluated: the query goes now either way.
    this.#left(query.board, query.key, query);
  }

  /** A stream left `query`: the query goes with its last stream, the board's subscription with its last query. */
  #left(boardId: string, key: string, query: LiveQuery): void {
    if (query.streams.size > 0) return;
    const board = this.#boards.get(boardId);
    if (!board || board.queries.get(key) !== query) return;
    board.queries.delete(key);
    this.#queryCount--;
    if (board.queries.size === 0) {
      board.unsubscribe();
      this.#boards.delete(boardId);
    }
  }
}
