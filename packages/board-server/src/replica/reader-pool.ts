import type { Cell } from '@board/protocol';
import type { DuckDBConnection } from '@duckdb/node-api';
import { BoardError, boardError } from '../errors.js';
import { batchableKey, type KeyKind } from './keyed-lookup.js';
import { type BatchEntry, MAX_BATCH, ReadConnection, type SnapshotResult } from './read-connection.js';
import type { QueryLimits } from './result-reader.js';

/** Reader connections per replica (queries beyond wait for one). */
const MAX_READERS = 4;

/** What the pool reads of its replica's state at each query. */
export interface ReplicaState {
  /** Odd while a change batch is being applied; bumped before it starts and after it commits. */
  readonly generation: number;
  readonly watermark: number;
  /** Bumped when the table's columns change. */
  readonly schemaVersion: number;
  kindOf(column: string): KeyKind | undefined;
  /**
   * Marks the replica as used while a reader connection runs a DuckDB call whose query was already
   * answered (`QueryTimeout`), so that it is not closed, evicted or its files removed under that
   * call; `release` undoes it. Optional: without them, only the pool itself waits for such calls.
   */
  acquire?(): void;
  release?(): void;
}

interface Waiter {
  sqlText: string;
  params: Cell[];
  limits: QueryLimits;
  resolve(out: SnapshotResult): void;
  reject(err: unknown): void;
  /** Answers `QueryTimeout` if no reader took the query within its deadline. */
  timer: NodeJS.Timeout;
}

/**
 * The reader connections of one replica: at most {@link MAX_READERS}, each running one query at a
 * time in its own snapshot, so reads run in parallel with each other and with the writer.
 *
 * Queries that find every reader busy wait in order, within their deadline (then `QueryTimeout`). When a reader frees, it takes the first
 * waiter and, if that is a point lookup (`keyed-lookup.ts`) whose single runs came back small,
 * every other waiting lookup of the same statement (up to {@link MAX_BATCH} keys): they run as one
 * DuckDB statement and each gets its own key's rows, from one snapshot that is at or past what each
 * of them was synced to. A DuckDB statement costs the same fixed ~0.5-1 ms of CPU whether it looks up
 * one key or dozens, so under load this is what lets point lookups scale; alone, a query never
 * waits for company. A batch that fails, returns columns other than the statement's own or more
 * rows than the limits allow falls back to single runs of the queries concerned (so each gets
 * exactly the answer or error it would have got alone).
 */
export class ReaderPool {
  private readonly idle: ReadConnection[] = [];
  private readonly waiting: Waiter[] = [];
  private readers = 0;
  private closed = false;
  private readonly lookups = new Map<string, BatchEntry>();
  /** Runs under way of statements in {@link lookups}, by SQL text. */
  private readonly running = new Map<string, number>();
  /** Batches run and queries they answered, for `node.stats` (shared by a cache's replicas). */
  stats = { batches: 0, batchedQueries: 0 };

  constructor(
    private readonly connect: () => Promise<DuckDBConnection>,
    private readonly path: string,
    private readonly metaTable: string,
    private readonly replica: ReplicaState,
  ) {}

  /** What a point-lookup statement's small single runs showed (`keyed-lookup.ts`), if any. */
  lookupEntry(sqlText: string): BatchEntry | undefined {
    return this.lookups.get(sqlText);
  }

  /** Drops what was learnt about statements (the table's columns changed). */
  forgetStatements(): void {
    this.lookups.clear();
  }

  /** Runs one query (see `Replica.query`). */
  async query(sqlText: string, params: Cell[], limits: QueryLimits): Promise<SnapshotResult> {
    const reader = this.blocked(sqlText, params) ? undefined : (this.idle.pop() ?? (await this.newReader()));
    if (!reader) {
      return await new Promise<SnapshotResult>((resolve, reject) => {
        const waiter: Waiter = {
          sqlText,
          params,
          limits,
          resolve,
          reject,
          timer: setTimeout(() => this.expire(waiter), limits.timeoutMs),
        };
        this.waiting.push(waiter);
        this.dispatch();
      });
    }
    const lookup = this.started(sqlText);
    try {
      return await this.single(reader, sqlText, params, limits);
    } finally {
      if (lookup) this.done(sqlText);
      this.release(reader);
    }
  }

  /**
   * A query that no reader took within its deadline (all were busy, e.g. with calls of queries
   * already answered `QueryTimeout` that DuckDB has not returned from yet) is answered `QueryTimeout`.
   */
  private expire(waiter: Waiter): void {
    const i = this.waiting.indexOf(waiter);
    if (i < 0) return;
    this.waiting.splice(i, 1);
    waiter.reject(
      boardError(
        'QueryTimeout',
        `query not started within ${waiter.limits.timeoutMs} ms: the board's ${MAX_READERS} reader connections stayed busy`,
      ),
    );
  }

  /**
   * True when a query must wait for the run of its statement under way: it is a point lookup that
   * can be batched, and the next batch will take it (see the class comment).
   */
  private blocked(sqlText: string, params: Cell[]): boolean {
    const entry = this.lookups.get(sqlText);
    return entry !== undefined && this.running.has(sqlText) && batchableKey(entry.lookup, params);
  }

  /** Counts a run of `sqlText` as under way if it is a point lookup; true when it counted it. */
  private started(sqlText: string): boolean {
    if (!this.lookups.has(sqlText)) return false;
    this.running.set(sqlText, (this.running.get(sqlText) ?? 0) + 1);
    return true;
  }

  private done(sqlText: string): void {
    const n = (this.running.get(sqlText) ?? 1) - 1;
    if (n > 0) this.running.set(sqlText, n);
    else this.running.delete(sqlText);
  }

  /**
   * Runs `run` on the fast path when no change batch is being applied and none commits meanwhile
   * (the replica's watermark is then exactly the state read), else again in a snapshot transaction
   * that reads its own watermark (see `Replica.query`).
   */
  private async consistent<T>(
    limits: QueryLimits,
    run: (limits: QueryLimits, known?: { watermark: number; generation: number }) => Promise<T>,
  ): Promise<T> {
    const started = performance.now();
    const generation = this.replica.generation;
    if (generation % 2 === 0) {
      const known = { watermark: this.replica.watermark, generation };
      try {
        const out = await run(limits, known);
        if (this.replica.generation === generation) return out;
      } catch (err) {
        // A batch committed while the statement ran: its plan's statistics may predate rows it
        // read (a perfect-hash GROUP BY then fails). Run it again in a snapshot; else it is final,
        // and so is a timeout (its time is up, and its DuckDB call may still be running).
        if (this.replica.generation === generation || isTimeout(err)) throw err;
      }
    }
    const left = Math.max(1, limits.timeoutMs - (performance.now() - started));
    return await run({ ...limits, timeoutMs: left });
  }

  private async single(
    reader: ReadConnection,
    sqlText: string,
    params: Cell[],
    limits: QueryLimits,
  ): Promise<SnapshotResult> {
    return await this.consistent(limits, (l, known) =>
      reader.query(sqlText, params, l, this.replica.schemaVersion, known),
    );
  }

  /** Answers `group` (waiters of one point lookup) with one batched statement, or singly. */
  private async batch(reader: ReadConnection, group: Waiter[]): Promise<void> {
    const { sqlText, limits } = group[0]!;
    const keys = [...new Set(group.map((w) => w.params[0] as string | number))];
    let out: Awaited<ReturnType<ReadConnection['queryBatch']>>;
    try {
      out = await this.consistent(limits, (l, known) =>
        reader.queryBatch(sqlText, keys, l, this.replica.schemaVersion, known),
      );
    } catch (err) {
      if (isTimeout(err)) {
        for (const w of group) w.reject(err);
        return;
      }
      out = undefined;
    }
    if (out) {
      this.stats.batches++;
      this.stats.batchedQueries += group.length;
    }
    for (const w of group) {
      const result = out?.results[keys.indexOf(w.params[0] as string | number)];
      if (out && result) {
        w.resolve({ result, watermark: out.watermark });
        continue;
      }
      try {
        w.resolve(await this.single(reader, w.sqlText, w.params, w.limits));
      } catch (err) {
        w.reject(err);
      }
    }
  }

  /** A new reader connection, or undefined when there are {@link MAX_READERS} already. */
  private async newReader(): Promise<ReadConnection | undefined> {
    if (this.readers >= MAX_READERS) return undefined;
    this.readers++;
    try {
      return new ReadConnection(await this.connect(), this.path, this.metaTable, {
        lookups: this.lookups,
        kindOf: (c) => this.replica.kindOf(c),
      });
    } catch (err) {
      this.readers--;
      throw err;
    }
  }

  /**
   * Returns a reader to the idle ones and serves waiters; a reader still running a DuckDB call of a
   * query already answered (see `ReadConnection.busy`) only once that call returns, the replica
   * held in use meanwhile.
   */
  private release(reader: ReadConnection): void {
    if (reader.busy) {
      this.replica.acquire?.();
      void reader.settled().then(() => {
        this.release(reader);
        this.replica.release?.();
      });
      return;
    }
    if (this.closed) {
      reader.close();
      return;
    }
    this.idle.push(reader);
    this.dispatch();
  }

  /**
   * While a reader is idle, hands it the first waiter not blocked behind a run of its own statement,
   * with the waiters that batch with it.
   */
  private dispatch(): void {
    while (this.idle.length > 0) {
      const i = this.waiting.findIndex((w) => !this.blocked(w.sqlText, w.params));
      if (i < 0) return;
      const first = this.waiting.splice(i, 1)[0]!;
      const reader = this.idle.pop()!;
      const group = [first, ...this.companions(first)];
      for (const w of group) clearTimeout(w.timer);
      const lookup = this.started(first.sqlText);
      const served =
        group.length > 1
          ? this.batch(reader, group)
          : this.single(reader, first.sqlText, first.params, first.limits).then(first.resolve, first.reject);
      void served
        .catch((err: unknown) => {
          // Not expected (failures are each waiter's answer), but no waiter may be left hanging.
          for (const w of group) w.reject(err);
        })
        .finally(() => {
          if (lookup) this.done(first.sqlText);
          this.release(reader);
        });
    }
  }

  /** Waiting queries that can run in one batch with `first` (taken out of the queue). */
  private companions(first: Waiter): Waiter[] {
    const entry = this.lookups.get(first.sqlText);
    if (!entry || !batchableKey(entry.lookup, first.params)) return [];
    const taken: Waiter[] = [];
    const keys = new Set([first.params[0]]);
    for (let i = 0; i < this.waiting.length; i++) {
      const w = this.waiting[i]!;
      if (w.sqlText !== first.sqlText || w.limits !== first.limits) continue;
      if (!batchableKey(entry.lookup, w.params)) continue;
      if (!keys.has(w.params[0]) && keys.size >= MAX_BATCH) continue;
      keys.add(w.params[0]);
      taken.push(w);
      this.waiting.splice(i--, 1);
    }
    return taken;
  }

  /**
   * Closes every reader now (idle ones) or when its query ends (or, for a query already answered,
   * its DuckDB call returns).
   */
  close(): void {
    this.closed = true;
    for (const r of this.idle.splice(0)) {
      try {
        r.close();
      } catch {
        // closing the instance releases it anyway
      }
    }
  }
}

const isTimeout = (err: unknown): boolean => err instanceof BoardError && err._tag === 'QueryTimeout';
