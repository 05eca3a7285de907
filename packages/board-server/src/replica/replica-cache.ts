import { join } from 'node:path';
import type { CacheOutcome, Cell, QueryOutcome, SyncResult } from '@board/protocol';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { EncodedJson } from '../encoded-json.js';
import { boardError } from '../errors.js';
import type { Logger } from '../log.js';
import type { BoardDb } from '../store/database.js';
import { type ReplicaBudget, replicaMemoryMb } from './budget.js';
import { isFatalDuckError } from './duck-errors.js';
import { type BoardHead, HeadReader } from './head-reader.js';
import { MemorySamples } from './memory-samples.js';
import { encodeOutcome, noSync, type Speculation } from './outcome.js';
import { bindPlaceholders } from './query-guard.js';
import { failedAt } from './read-connection.js';
import { type QueryLimits, type Replica, removeReplicaFiles, type SnapshotResult } from './replica.js';
import { type SyncContext, type Synced, syncReplica } from './replica-sync.js';

export type { ReplicaBudget } from './budget.js';

/** A query failed because its replica was invalidated by a DuckDB fatal error (and was dropped). */
class ReplicaInvalidated extends Error {
  constructor(readonly original: unknown) {
    super('replica invalidated');
  }
}

/** The input of `query.execute` the cache needs. */
interface QueryInput {
  sql: string;
  tables: { token: string; entity: string }[];
  params: Cell[];
  minWatermark?: number | undefined;
}

/**
 * Per-board DuckDB replicas, least recently used first out. Each request syncs the board's
 * replica from the change log, then queries it on a reader connection in one snapshot. Requests
 * that find the replica at their head run in parallel; re-attach, catch-up and rebuild take the
 * board's lock (one at a time), and queries keep running on the previous snapshot meanwhile.
 *
 *   closed ──request: file present──▶ reattach ──┐
 *   closed ──request: no/unreadable file──▶ rebuild ──┤
 *   open   ──request──▶ hit ─────────────────────────┤
 *                                                     ▼
 *                       sync: head == watermark ─▶ none
 *                             log reaches back  ─▶ incremental (apply records)
 *                             log trimmed/ahead ─▶ rebuild (from the base table; cache = rebuild)
 *   open ──over maxOpen: least recently used──▶ closed (file kept for re-attach)
 */
export class ReplicaCache {
  private readonly open = new Map<string, Replica>();
  private readonly memory = new MemorySamples();
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Boards whose last request found the open replica at the head (see {@link speculate}). */
  private readonly atHead = new Set<string>();
  readonly counters = { hit: 0, reattach: 0, rebuild: 0, evicted: 0 };
  /**
   * Which path answered each `query.execute` that reached a replica: `keyIndex` (a point lookup by
   * id, from the replica's key index) or `duckdb` (everything else, and point lookups the index
   * could not answer).
   */
  readonly paths = { keyIndex: 0, duckdb: 0 };
  /** Point lookups answered in batches, over all replicas (`reader-pool.ts`). */
  readonly batching = { batches: 0, batchedQueries: 0 };
  private readonly heads: HeadReader;
  /** What {@link syncReplica} needs, the replica files' directory and DuckDB sizing included. */
  private readonly syncContext: SyncContext;

  constructor(
    db: Kysely<BoardDb>,
    pool: pg.Pool,
    dataDir: string,
    private readonly budget: ReplicaBudget,
    private readonly limits: QueryLimits,
    private readonly log: Logger,
  ) {
    this.heads = new HeadReader(pool);
    this.syncContext = {
      db,
      heads: this.heads,
      dir: join(dataDir, 'replicas'),
      settings: { memoryLimitMb: this.perReplicaMemoryMb, threads: budget.threads },
      log,
      openReplica: (board) => this.open.get(board),
      evict: (board) => this.evict(board, { removeFile: true }),
      failures: new Map(),
    };
  }

  /** Memory limit given to each replica's DuckDB instance ({@link replicaMemoryMb}). */
  get perReplicaMemoryMb(): number {
    return replicaMemoryMb(this.budget);
  }

  /** Boards whose replica is open, least recently used first, with their watermarks. */
  stats(): {
    open: number;
    maxOpen: number;
    memoryBudgetMb: number;
    memoryInUseBytes: number;
    memoryMbEach: number;
    replicas: {
      board: string;
      watermark: number;
      memoryBytes: number;
      threads: number;
      keyIndex: Replica['keyIndex'];
    }[];
  } {
    return {
      open: this.open.size,
      maxOpen: this.budget.maxOpen,
      memoryBudgetMb: this.budget.memoryMb,
      memoryInUseBytes: this.memoryInUse(),
      memoryMbEach: this.perReplicaMemoryMb,
      replicas: [...this.open].map(([board, r]) => ({
        board,
        watermark: r.watermark,
        memoryBytes: this.memory.of(board),
        threads: r.threads,
        keyIndex: r.keyIndex,
      })),
    };
  }

  /**
   * `query.execute`: sync the board's replica, check the floor, run the query (bounded by the
   * limits: deadline, rows, bytes). The outcome comes back encoded (see {@link EncodedJson}).
   */
  async execute(board: string, input: QueryInput): Promise<EncodedJson<QueryOutcome>> {
    // A replica a DuckDB fatal error invalidated is dropped with its files: the second attempt
    // rebuilds it from the store.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.executeOnce(board, input);
      } catch (err) {
        if (!(err instanceof ReplicaInvalidated)) throw err;
        if (attempt === 2)
          throw boardError(
            'ReplicaUnavailable',
            `the replica of board "${board}" failed (DuckDB fatal error) again after a rebuild; it was discarded and is rebuilt from the store on the next request`,
          );
      }
    }
  }

  /**
   * A query's failure as the request sees it. After a DuckDB fatal error `replica` is dropped
   * (closed once its running reads end, files removed) when it is still the board's open one, so
   * the next sync rebuilds it from the store, and the failure becomes {@link ReplicaInvalidated}.
   * Under the board's lock, so its files are not removed after a rebuild put new ones in place.
   */
  private async failed(board: string, replica: Replica, err: unknown): Promise<never> {
    if (!isFatalDuckError(err)) throw err;
    this.log.warn({ err, board }, 'replica invalidated by a DuckDB fatal error; discarding it');
    await this.withLock(board, async () => {
      if (this.open.get(board) === replica) await this.evict(board, { removeFile: true });
    });
    throw new ReplicaInvalidated(err);
  }

  private async executeOnce(board: string, input: QueryInput): Promise<EncodedJson<QueryOutcome>> {
    const sqlText = bindPlaceholders(input.sql, input.tables);
    const t0 = performance.now();
    // A lookup the key index answers needs no DuckDB call to start beside the head read.
    const early = this.open.get(board)?.indexes(sqlText)
      ? undefined
      : this.speculate(board, sqlText, input.params, input.minWatermark);
    let head: BoardHead | undefined;
    try {
      head = await this.heads.read(board);
    } catch (err) {
      if (early) void early.outcome.then(() => early.replica.release());
      throw err;
    }
    if (early) {
      const t1 = performance.now();
      const outcome = await early.outcome;
      early.replica.release();
      if (
        this.open.get(board) === early.replica &&
        head &&
        head.boardNo === early.replica.boardNo &&
        outcome.at !== undefined &&
        outcome.at >= head.head
      ) {
        this.checkFloor(board, head, input.minWatermark);
        this.counters.hit++;
        this.paths.duckdb++;
        this.touch(board, early.replica);
        this.wantIndex(board, early.replica, sqlText);
        if ('error' in outcome) return await this.failed(board, early.replica, outcome.error);
        // Head read and query ran at once: syncMs is the wait for the head, queryMs the query's own time.
        return await this.answer(
          board,
          early.replica,
          'hit',
          noSync(outcome.at),
          outcome.snapshot,
          t1 - t0,
          outcome.doneAt - t0,
        );
      }
      this.atHead.delete(board);
    }
    const { replica, cache, sync } = await this.sync(board, head, input.minWatermark);
    let snapshot: SnapshotResult;
    const t1 = performance.now();
    // The replica is at or past this request's head; the index is at the replica's watermark.
    const indexed = replica.lookup(sqlText, input.params, this.limits);
    if (indexed) {
      replica.release();
      this.paths.keyIndex++;
      return await this.answer(board, replica, cache, sync, indexed, t1 - t0, performance.now() - t1);
    }
    this.paths.duckdb++;
    try {
      snapshot = await replica.query(sqlText, input.params, this.limits);
    } catch (err) {
      replica.release();
      return await this.failed(board, replica, err);
    }
    replica.release();
    // After DuckDB's run, which tells whether the statement is a point lookup by id.
    this.wantIndex(board, replica, sqlText);
    return await this.answer(board, replica, cache, sync, snapshot, t1 - t0, performance.now() - t1);
  }

  /**
   * Starts the query on the open replica before the head is known, when the board's last request
   * found it at the head and no sync is under way (README, "Query beside its head read"): `execute`
   * uses the outcome only if its snapshot is at or past this request's head, else it syncs as
   * usual. The replica is acquired; the caller releases it. Not when the request's floor is above
   * the open replica's watermark: its outcome could not be used (a live query evaluated after a
   * head move asks for that head, see `src/live/`).
   */
  private speculate(
    board: string,
    sqlText: string,
    params: Cell[],
    minWatermark: number | undefined,
  ): { replica: Replica; outcome: Promise<Speculation> } | undefined {
    const replica = this.open.get(board);
    if (!replica || !this.atHead.has(board) || this.locks.has(board)) return undefined;
    if (minWatermark !== undefined && minWatermark > replica.watermark) return undefined;
    replica.acquire();
    const outcome = replica.query(sqlText, params, this.limits).then(
      (snapshot): Speculation => ({ snapshot, at: snapshot.watermark, doneAt: performance.now() }),
      (error: unknown): Speculation => ({ error, at: failedAt(error), doneAt: performance.now() }),
    );
    return { replica, outcome };
  }

  /**
   * Builds the replica's key index, under the board's lock (no batch applies meanwhile), when
   * `sqlText` is a point lookup by id and the replica has none yet; the memory it holds is sampled
   * and the budget enforced right after. Until it is built, DuckDB answers.
   */
  private wantIndex(board: string, replica: Replica, sqlText: string): void {
    if (!replica.wantsIndex(sqlText)) return;
    void this.withLock(board, async () => {
      if (this.open.get(board) !== replica) return;
      await replica.buildIndex(this.perReplicaMemoryMb * 2 ** 20);
      this.memory.set(board, await replica.memoryBytes());
      this.enforceBudget(board);
    }).catch((err: unknown) => this.log.warn({ err, board }, 'building the key index failed; DuckDB serves'));
  }

  /**
   * The encoded outcome of a query; samples the replica's memory use when it changed, else now
   * and then.
   */
  private async answer(
    board: string,
    replica: Replica,
    cache: CacheOutcome,
    sync: SyncResult,
    snapshot: SnapshotResult,
    syncMs: number,
    queryMs: number,
  ): Promise<EncodedJson<QueryOutcome>> {
    // Sampling memory costs a DuckDB round trip and the board's lock: when the replica changed, before
    // answering (the budget is enforced at once); else at most once a second, beside the answer.
    const changed = sync.mode !== 'none' || cache !== 'hit';
    if (this.memory.due(board, changed)) {
      const sampled = this.withLock(board, async () => {
        if (this.open.get(board) !== replica) return;
        try {
          this.memory.set(board, await replica.memoryBytes());
        } catch (err) {
          // The answer was read already; an invalidated replica is dropped for the next request.
          if (!isFatalDuckError(err)) throw err;
          this.log.warn({ err, board }, 'replica invalidated by a DuckDB fatal error; discarding it');
          await this.evict(board, { removeFile: true });
          return;
        }
        this.enforceBudget(board);
      });
      if (changed)
        await sampled.catch((err: unknown) =>
          this.log.warn({ err, board }, 'sampling replica memory failed'),
        );
      else
        void sampled.catch((err: unknown) => this.log.warn({ err, board }, 'sampling replica memory failed'));
    }
    return encodeOutcome(snapshot, { sync, cache, syncMs, queryMs });
  }

  /** Closes every open replica (one still running a query closes when that query ends). */
  closeAll(): void {
    for (const [board, r] of this.open) {
      try {
        if (r.inUse > 0) void r.retire();
        else r.close();
      } catch (err) {
        this.log.warn({ err, board }, 'closing replica failed');
      }
    }
    this.open.clear();
  }

  /**
   * Brings the board's replica to `m`, the head read for this request, and returns it acquired
   * (the caller releases it). The head read is coalesced with concurrent requests' (see
   * {@link HeadReader}) but always sent after this request arrived. When the open replica is
   * already at that head nothing else happens (no lock: reads run in parallel); otherwise the
   * board's lock is taken to re-attach, catch up or rebuild, one request at a time.
   */
  private async sync(
    board: string,
    m: BoardHead | undefined,
    minWatermark: number | undefined,
  ): Promise<Synced> {
    if (!m) {
      const gone = this.open.get(board);
      if (gone) {
        this.forget(board);
        void gone.retire().then(() => removeReplicaFiles(gone.path));
      }
      throw boardError('UnknownBoard', `unknown board "${board}"`);
    }
    this.checkFloor(board, m, minWatermark);
    const open = this.open.get(board);
    if (open && open.boardNo === m.boardNo && open.watermark === m.head) {
      open.acquire();
      this.counters.hit++;
      this.touch(board, open);
      this.atHead.add(board);
      return { replica: open, cache: 'hit', sync: noSync(open.watermark) };
    }
    return await this.withLock(board, () => this.syncLocked(board, m));
  }

  /** `WatermarkNotReached` when the request's floor is above the board's head. */
  private checkFloor(board: string, m: BoardHead, minWatermark: number | undefined): void {
    if (minWatermark !== undefined && minWatermark > m.head) {
      throw boardError(
        'WatermarkNotReached',
        `board "${board}" is at watermark ${m.head}, below the requested minimum ${minWatermark}`,
      );
    }
  }

  /** {@link syncReplica} under the board's lock, then the replica is acquired and counted as used. */
  private async syncLocked(board: string, m: BoardHead): Promise<Synced> {
    const synced = await syncReplica(this.syncContext, board, m);
    this.counters[synced.cache]++;
    synced.replica.batchStats = this.batching;
    synced.replica.acquire();
    this.touch(board, synced.replica);
    return synced;
  }

  private touch(board: string, replica: Replica): void {
    this.open.delete(board);
    this.open.set(board, replica);
    this.enforceBudget(board);
  }

  /** Memory held by open replicas, in bytes (as of each one's last sample). */
  private memoryInUse(): number {
    return this.memory.total(this.open.keys());
  }

  /**
   * Closes least recently used replicas while more than `maxOpen` are open or they hold more than
   * the memory budget. `current` and replicas another request is using right now are skipped (the
   * budget is exceeded briefly rather than closing a database under a running query).
   */
  private enforceBudget(current: string): void {
    const budgetBytes = this.budget.memoryMb * 1024 * 1024;
    for (const candidate of [...this.open.keys()]) {
      if (this.open.size <= this.budget.maxOpen && this.memoryInUse() <= budgetBytes) break;
      if (candidate === current || this.locks.has(candidate) || (this.open.get(candidate)?.inUse ?? 0) > 0)
        continue;
      void this.evict(candidate, { removeFile: false });
      this.counters.evicted++;
    }
  }

  /**
   * Takes the board's replica out of the cache and closes it once its running reads are done
   * (waiting for that when the files are to be removed, so they are not pulled from under a read
   * nor removed after a new replica took their place).
   */
  private async evict(board: string, options: { removeFile: boolean }): Promise<void> {
    const r = this.open.get(board);
    if (!r) return;
    this.forget(board);
    try {
      if (options.removeFile) await r.retire();
      else void r.retire();
    } catch (err) {
      this.log.warn({ err, board }, 'closing replica failed');
    }
    if (options.removeFile) await removeReplicaFiles(r.path);
  }

  private forget(board: string): void {
    this.open.delete(board);
    this.memory.forget(board);
    this.atHead.delete(board);
  }

  private async withLock<T>(board: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(board) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const settled = next.catch(() => undefined);
    this.locks.set(board, settled);
    try {
      return await next;
    } finally {
      if (this.locks.get(board) === settled) this.locks.delete(board);
    }
  }
}
