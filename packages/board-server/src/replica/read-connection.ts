import type { Cell } from '@board/protocol';
import type { DuckDBConnection, DuckDBPreparedStatement } from '@duckdb/node-api';
import { BoardError, boardError } from '../errors.js';
import { refineDuckError } from './duck-errors.js';
import { bindCell, bindCells } from './duck-values.js';
import { type KeyedLookup, type KeyKind, keyedLookup } from './keyed-lookup.js';
import { parseTreeJson } from './parse-tree.js';
import { PlanCache } from './plan-cache.js';
import { type ParseTree, prepareCheckedRead } from './read-check.js';
import { ReadDeadline } from './read-deadline.js';
import {
  type EncodedResult,
  materializedChunks,
  type QueryLimits,
  readResult,
  readResultsByKey,
} from './result-reader.js';

/** Prepared read statements kept per reader connection (by SQL text). */
const STATEMENT_CACHE = 64;
/** A result this small (rows and encoded bytes) marks its statement as small (see `query`). */
const SMALL_ROWS = 2048;
const SMALL_BYTES = 256 * 1024;

const FAILED_AT = Symbol('failedAt');
type ReadFailure = Error & { [FAILED_AT]?: number };

/**
 * The replica watermark of the state a failed query ran on, when known: the failure is then that
 * state's answer to the query (as a result would be), not a transient one.
 */
export function failedAt(err: unknown): number | undefined {
  return err instanceof Error ? (err as ReadFailure)[FAILED_AT] : undefined;
}

/** Largest batch of keys one point-lookup statement takes (see {@link ReadConnection.queryBatch}). */
export const MAX_BATCH = 64;

/** A point lookup whose single runs came back small, with their columns: it may run batched. */
export interface BatchEntry {
  lookup: KeyedLookup;
  columns: string[];
  types: string[];
}

/** What a replica's reader connections share: its batchable statements, its columns' key kinds. */
export interface SharedReads {
  lookups: Map<string, BatchEntry>;
  kindOf(column: string): KeyKind | undefined;
}

/** A query's encoded result and the replica watermark of the snapshot it read. */
export interface SnapshotResult {
  result: EncodedResult;
  watermark: number;
}

/**
 * One reader connection of a replica's DuckDB instance. Each query runs in its own DuckDB
 * transaction that first reads the replica's watermark (`metaTable`) and then the query: both see
 * one snapshot, so a read never sees half of an applied change batch (the writer applies each batch
 * in one transaction) and the watermark it reports is exactly the state it read. Several reader
 * connections serve one replica in parallel; each keeps its own prepared-statement cache.
 */
export class ReadConnection {
  /** Checked read statements (see {@link PlanCache}); one evicted is checked again when next run. */
  private readonly statements = new PlanCache(STATEMENT_CACHE, (sqlText) => {
    this.checked.delete(sqlText);
    this.small.delete(sqlText);
    this.candidates.delete(sqlText);
  });
  /** SQL texts that passed the statement and source checks (re-planning needs no re-check). */
  private readonly checked = new Set<string>();
  /** SQL texts whose last result was small: they run materialized (see `query`). */
  private readonly small = new Set<string>();
  /** Checked SQL texts that are point lookups (`keyed-lookup.ts`), before their first result. */
  private readonly candidates = new Map<string, KeyedLookup>();
  /** Batched statements (`keyed-lookup.ts`) by their SQL text. */
  private readonly batches = new PlanCache(STATEMENT_CACHE);
  /** `json_serialize_sql` prepared once per connection, for {@link parseTree}. */
  private serializer: DuckDBPreparedStatement | undefined;
  private snapshot: DuckDBPreparedStatement | undefined;
  /** Schema version the cached statements were prepared against. */
  private schemaVersion = 0;
  /** Each read's deadline, and the DuckDB call a passed one abandoned (see {@link busy}). */
  private readonly deadlines: ReadDeadline;

  constructor(
    private readonly conn: DuckDBConnection,
    private readonly path: string,
    private readonly metaTable: string,
    private readonly shared: SharedReads,
  ) {
    this.deadlines = new ReadDeadline(() => conn.interrupt());
  }

  /**
   * Runs one read-only statement and encodes its result as JSON, chunk by chunk. With `known`
   * undefined, the statement runs in a transaction that first reads the replica's watermark, so
   * the watermark returned is that of the snapshot read. With `known` given, the caller vouches that
   * no change batch can commit while this runs unnoticed (see `Replica.query`): the statement runs
   * on its own (three fewer DuckDB calls) and `known` is returned as the watermark. Refuses (tag
   * `QueryRefused`) anything but exactly one SELECT that reads only the board's table
   * (`source-guard.ts`). The deadline (`limits.timeoutMs`) covers checking, preparing, executing,
   * reading, converting and encoding: past it, `QueryTimeout`.
   */
  async query(
    sqlText: string,
    params: Cell[],
    limits: QueryLimits,
    schemaVersion: number,
    known?: { watermark: number; generation: number },
  ): Promise<SnapshotResult> {
    const { value, watermark } = await this.inSnapshot(limits, schemaVersion, known, async (run) => {
      const prepared = await this.prepareRead(sqlText, known?.generation);
      if (known === undefined) run.owned.push(prepared);
      run.deadline();
      if (prepared.parameterCount !== params.length) {
        throw boardError(
          'InvalidInput',
          `the query has ${prepared.parameterCount} parameter(s) but ${params.length} were given`,
        );
      }
      bindCells(prepared, params);
      return await this.execute(sqlText, prepared, limits, run.deadline);
    });
    return { result: value, watermark };
  }

  /**
   * Runs a point lookup (`shared.lookups`) for several keys at once, as one DuckDB statement (see
   * `keyed-lookup.ts`), in one snapshot as {@link query} does; returns each key's result in the
   * order of `keys`, undefined for a key whose rows are beyond the limits (the caller runs that
   * one on its own, for the exact error). Undefined altogether when the batch's columns are not
   * the statement's own or it returned more than {@link SMALL_ROWS} rows per key: then the
   * statement is not batched again until a single run of it comes back small.
   */
  async queryBatch(
    sqlText: string,
    keys: (string | number)[],
    limits: QueryLimits,
    schemaVersion: number,
    known?: { watermark: number; generation: number },
  ): Promise<{ results: (EncodedResult | undefined)[]; watermark: number } | undefined> {
    const entry = this.shared.lookups.get(sqlText);
    if (!entry) return undefined;
    const k = batchSize(keys.length);
    const { value, watermark } = await this.inSnapshot(limits, schemaVersion, known, async (run) => {
      const prepared = await this.prepareBatch(entry.lookup.sql(k), known?.generation);
      if (known === undefined) run.owned.push(prepared);
      // Keys are strings or safe integers (`batchableKey`), so bound as VARCHAR or BIGINT.
      for (let i = 0; i < k; i++) bindCell(prepared, i + 1, keys[Math.min(i, keys.length - 1)]!);
      const result = await prepared.run();
      run.deadline();
      const names = result.columnNames().slice(1);
      const types = result.columnTypes().slice(1).map(String);
      if (
        !sameList(names, entry.columns) ||
        !sameList(types, entry.types) ||
        result.rowCount > keys.length * SMALL_ROWS
      ) {
        this.shared.lookups.delete(sqlText);
        return undefined;
      }
      return readResultsByKey(result, keys, entry.columns, limits);
    });
    return value && { results: value, watermark };
  }

  /**
   * True while a DuckDB call of a read already answered (its deadline passed) is still running on
   * this connection; {@link settled} resolves when it returns. The pool hands the connection to no
   * other query before then.
   */
  get busy(): boolean {
    return this.deadlines.busy;
  }

  /** Resolves once no abandoned DuckDB call runs on this connection (see {@link busy}). */
  async settled(): Promise<void> {
    await this.deadlines.settled();
  }

  /**
   * The frame of every read: the deadline (`limits.timeoutMs`, then `QueryTimeout`; kept whatever
   * DuckDB does, see {@link ReadDeadline}), the snapshot transaction (unless the caller vouches for
   * `known`, see {@link query}) and its watermark, and the failure's refinement. `body` runs the
   * statement; statements it lists in `owned` are destroyed afterwards.
   */
  private async inSnapshot<T>(
    limits: QueryLimits,
    schemaVersion: number,
    known: { watermark: number; generation: number } | undefined,
    body: (run: { deadline: () => void; owned: DuckDBPreparedStatement[] }) => Promise<T>,
  ): Promise<{ value: T; watermark: number }> {
    const conn = this.conn;
    let watermark = known?.watermark;
    const timeout = () => {
      const failure: ReadFailure = boardError(
        'QueryTimeout',
        `query interrupted after ${limits.timeoutMs} ms`,
      );
      if (watermark !== undefined) failure[FAILED_AT] = watermark;
      return failure;
    };
    return await this.deadlines.race(limits.timeoutMs, timeout, async (deadline) => {
      if (schemaVersion !== this.schemaVersion) {
        this.clearStatements();
        this.schemaVersion = schemaVersion;
      }
      let open = false;
      const owned: DuckDBPreparedStatement[] = [];
      try {
        if (watermark === undefined) {
          await conn.run('BEGIN TRANSACTION');
          open = true;
          this.snapshot ??= await conn.prepare(`SELECT watermark FROM ${this.metaTable}`);
          const meta = await this.snapshot.runAndReadAll();
          watermark = Number(meta.getRows()[0]?.[0] ?? 0);
        }
        const value = await body({ deadline: deadline.check, owned });
        if (open) {
          open = false;
          await conn.run('COMMIT');
        }
        return { value, watermark };
      } catch (err) {
        // A result abandoned half-read would keep its pipeline running until the next statement.
        if (deadline.passed || (err instanceof BoardError && err._tag === 'ResultTooLarge')) conn.interrupt();
        if (open) await conn.run('ROLLBACK').catch(() => undefined);
        const failure: ReadFailure = deadline.passed ? timeout() : refineDuckError(err, this.path);
        if (watermark !== undefined) failure[FAILED_AT] = watermark;
        throw failure;
      } finally {
        for (const p of owned) p.destroySync();
      }
    });
  }

  /**
   * Executes a bound statement and reads its result. Each asynchronous DuckDB call is a job on
   * libuv's threadpool and a wake-up of the main thread; a streamed result costs three (execute,
   * fetch the chunk, fetch the end), a materialized one a single call, its chunks then read
   * synchronously. A statement whose last result was small (at most {@link SMALL_ROWS} rows and
   * {@link SMALL_BYTES} bytes: point lookups, aggregates) runs materialized; any other streams, so
   * that a large result is cut off at the row or byte limit without first being held whole. If a
   * statement that was small once returns a large result, that result is materialized once (within
   * the replica's DuckDB memory limit; an out-of-memory failure is retried streamed) and the
   * statement streams from then on.
   */
  private async execute(
    sqlText: string,
    prepared: DuckDBPreparedStatement,
    limits: QueryLimits,
    deadline: () => void,
  ): Promise<EncodedResult> {
    let result: EncodedResult | undefined;
    let types: () => string[] = () => [];
    if (this.small.has(sqlText)) {
      try {
        const materialized = await prepared.run();
        deadline();
        types = () => materialized.columnTypes().map(String);
        result = await readResult(
          materialized.columnNames(),
          materializedChunks(materialized),
          limits,
          deadline,
        );
      } catch (err) {
        this.small.delete(sqlText);
        if (!(err instanceof Error) || !/Out of Memory/i.test(err.message)) throw err;
      }
    }
    if (!result) {
      const stream = await prepared.stream();
      deadline();
      types = () => stream.columnTypes().map(String);
      result = await readResult(stream.columnNames(), () => stream.fetchChunk(), limits, deadline);
    }
    const lookup = this.candidates.get(sqlText);
    if (result.rowCount <= SMALL_ROWS && result.bytes <= SMALL_BYTES) {
      this.small.add(sqlText);
      if (lookup && !this.shared.lookups.has(sqlText)) {
        if (this.shared.lookups.size >= 4 * STATEMENT_CACHE) this.shared.lookups.clear();
        this.shared.lookups.set(sqlText, { lookup, columns: result.columns, types: types() });
      }
    } else {
      this.small.delete(sqlText);
      this.shared.lookups.delete(sqlText);
    }
    return result;
  }

  /**
   * A prepared read statement for `sqlText`, from the cache or checked and prepared now
   * (`read-check.ts`). Only statements that pass every check are cached, so a cache hit needs no
   * re-check.
   */
  private async prepareRead(
    sqlText: string,
    generation: number | undefined,
  ): Promise<DuckDBPreparedStatement> {
    const cached = this.statements.take(sqlText, generation);
    if (cached) return cached;
    if (this.checked.has(sqlText)) {
      return this.remember(sqlText, generation, await this.conn.prepare(sqlText));
    }
    const { prepared, statements } = await prepareCheckedRead(this.conn, sqlText, (text) =>
      this.parseTree(text),
    );
    const lookup = keyedLookup(statements, (c) => this.shared.kindOf(c));
    const remembered = this.remember(sqlText, generation, prepared);
    if (lookup) this.candidates.set(sqlText, lookup);
    return remembered;
  }

  private remember(
    sqlText: string,
    generation: number | undefined,
    prepared: DuckDBPreparedStatement,
  ): DuckDBPreparedStatement {
    if (this.checked.size >= 4 * STATEMENT_CACHE) {
      this.checked.clear();
      this.small.clear();
      this.candidates.clear();
    }
    this.checked.add(sqlText);
    return this.statements.keep(sqlText, generation, prepared);
  }

  /** A batched statement: generated from a checked one, so not checked again. */
  private async prepareBatch(
    sqlText: string,
    generation: number | undefined,
  ): Promise<DuckDBPreparedStatement> {
    const cached = this.batches.take(sqlText, generation);
    return cached ?? this.batches.keep(sqlText, generation, await this.conn.prepare(sqlText));
  }

  /** DuckDB's parse tree of `sqlText` (`json_serialize_sql`), or its parser's error. */
  private async parseTree(sqlText: string): Promise<ParseTree> {
    this.serializer ??= await this.conn.prepare('SELECT json_serialize_sql($1::VARCHAR)');
    this.serializer.bind([sqlText]);
    const reader = await this.serializer.runAndReadAll();
    return parseTreeJson(String(reader.getRows()[0]?.[0] ?? ''));
  }

  private clearStatements(): void {
    this.statements.clear();
    this.batches.clear();
    this.checked.clear();
    this.small.clear();
    this.candidates.clear();
    this.serializer?.destroySync();
    this.serializer = undefined;
    this.snapshot?.destroySync();
    this.snapshot = undefined;
  }

  /** Releases the prepared statements and closes the connection. */
  close(): void {
    try {
      this.clearStatements();
    } finally {
      this.conn.closeSync();
    }
  }
}

/** The batch size for `n` keys: the next power of two (at least 2), so that few statements are planned. */
function batchSize(n: number): number {
  let k = 2;
  while (k < n) k *= 2;
  return Math.min(k, MAX_BATCH);
}

const sameList = (a: string[], b: string[]): boolean =>
  a.length === b.length && a.every((x, i) => x === b[i]);
