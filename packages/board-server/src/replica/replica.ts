import { rm, stat } from 'node:fs/promises';
import { type Cell, type ChangeRecord, type ColumnDef, type Row, textProblem } from '@board/protocol';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { DUCK_TYPES } from '../boards/columns.js';
import { appendRow, closeQuietly } from './append-row.js';
import { applyChanges } from './apply-changes.js';
import { type IndexPlan, KeyIndex } from './key-index.js';
import { keyKind } from './keyed-lookup.js';
import { REPLICA_TABLE } from './query-guard.js';
import type { SnapshotResult } from './read-connection.js';
import { ReaderPool } from './reader-pool.js';
import type { QueryLimits } from './result-reader.js';

export type { SnapshotResult } from './read-connection.js';
export type { EncodedResult, QueryLimits } from './result-reader.js';

const META_TABLE = 'replica_meta';

/** How each replica's DuckDB instance is sized. */
export interface DuckSettings {
  memoryLimitMb: number;
  /**
   * DuckDB's `threads`. With 1 a statement runs on the thread that issued it alone (statements on
   * different connections and replicas still run in parallel); with more, DuckDB's worker threads
   * share large scans, and are woken for every statement (README, "DuckDB threads").
   */
  threads: number;
}

/**
 * Settings every replica is opened with. The query path relies on them: no file system or network
 * access (read_csv, glob, ATTACH, COPY TO... all fail), no extension loading, and the
 * configuration locked so that no statement can change any of this.
 */
function instanceOptions({ memoryLimitMb, threads }: DuckSettings): Record<string, string> {
  return {
    enable_external_access: 'false',
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'false',
    allow_community_extensions: 'false',
    allow_unsigned_extensions: 'false',
    memory_limit: `${memoryLimitMb}MB`,
    threads: String(threads),
    lock_configuration: 'true',
  };
}

/**
 * One board's DuckDB replica: a database file holding table `items` and the synced watermark. One
 * writer connection applies change batches (one DuckDB transaction each, called one at a time by
 * the cache); reader connections serve queries in parallel, each in a snapshot.
 */
export class Replica {
  private readonly drainedWaiters: (() => void)[] = [];
  private readonly readers: ReaderPool;
  private users = 0;
  private retired = false;
  private closed = false;
  /** Odd while a change batch is being applied; bumped before it starts and after it commits. */
  private generation = 0;
  /** Bumped when the table's columns change: readers then drop their prepared statements. */
  private schemaVersion = 0;
  /**
   * The rows by id (README, "Point reads from the key index"), at {@link watermark} whenever set:
   * built by {@link buildIndex}, kept by {@link apply} in the same synchronous step that moves the
   * watermark. `refused`: too large for its budget on this replica (every read goes to DuckDB).
   */
  private index: KeyIndex | 'building' | 'refused' | undefined;
  /** How the index answers each point-lookup statement (null: it cannot), by SQL text. */
  private readonly plans = new Map<string, IndexPlan | null>();

  private constructor(
    readonly path: string,
    readonly boardNo: number,
    private readonly instance: DuckDBInstance,
    private readonly conn: DuckDBConnection,
    public watermark: number,
    public columns: ColumnDef[],
  ) {
    const self = this;
    this.readers = new ReaderPool(() => instance.connect(), path, META_TABLE, {
      get generation() {
        return self.generation;
      },
      get watermark() {
        return self.watermark;
      },
      get schemaVersion() {
        return self.schemaVersion;
      },
      kindOf: (name) => keyKind(self.columns, name),
      // A call DuckDB does not interrupt outlives its request's deadline: the replica stays in use
      // (not closed, evicted or rebuilt under it) until the call returns.
      acquire: () => self.acquire(),
      release: () => self.release(),
    });
  }

  /** Queries batched on this replica (see {@link ReaderPool}); the cache sums them over replicas. */
  set batchStats(stats: { batches: number; batchedQueries: number }) {
    this.readers.stats = stats;
  }

  /** Opens the replica file, or returns undefined if it is missing or unreadable (then rebuild). */
  static async open(path: string, boardNo: number, settings: DuckSettings): Promise<Replica | undefined> {
    try {
      await stat(path);
    } catch {
      return undefined;
    }
    let instance: DuckDBInstance | undefined;
    try {
      instance = await DuckDBInstance.create(path, instanceOptions(settings));
      const conn = await instance.connect();
      const r = await conn.runAndReadAll(`SELECT watermark, board_no, columns FROM ${META_TABLE}`);
      const row = r.getRowsJS()[0];
      if (!row || Number(row[1]) !== boardNo) throw new Error('replica of another board');
      const replica = new Replica(
        path,
        boardNo,
        instance,
        conn,
        Number(row[0]),
        JSON.parse(String(row[2])) as ColumnDef[],
      );
      await replica.readThreads();
      return replica;
    } catch {
      instance?.closeSync();
      await removeReplicaFiles(path);
      return undefined;
    }
  }

  /**
   * Creates the replica afresh from a snapshot of the base table. `load` pushes batches of rows
   * (`updated_at` and TIMESTAMP columns as epoch micros) of one consistent snapshot at `watermark`;
   * each batch is appended and committed in a DuckDB transaction of its own, so that the memory a
   * rebuild needs is one batch's, not the board's (DuckDB holds the strings a transaction writes
   * until it commits). The watermark row goes into `replica_meta` last: a file left by a rebuild that
   * failed or was killed half-way has none, and {@link open} refuses (and removes) it.
   */
  static async create(
    path: string,
    boardNo: number,
    settings: DuckSettings,
    columns: ColumnDef[],
    watermark: number,
    load: (push: (rows: Row[]) => Promise<void>) => Promise<void>,
  ): Promise<Replica> {
    await removeReplicaFiles(path);
    const instance = await DuckDBInstance.create(path, instanceOptions(settings));
    try {
      const conn = await instance.connect();
      const replica = new Replica(path, boardNo, instance, conn, watermark, columns);
      await replica.readThreads();
      await conn.run(`CREATE TABLE ${META_TABLE} (watermark BIGINT, board_no BIGINT, columns VARCHAR)`);
      await conn.run(`CREATE TABLE ${REPLICA_TABLE} (${replica.columnDdl().join(', ')})`);
      // Point lookups by id use this (non-unique: a delete and re-insert of one id in a single
      // applied batch must not trip a constraint; uniqueness is Postgres's job). Created before the
      // rows, as a replica that catches up has it: built after them, DuckDB's checkpoint ran out of
      // a 64 MB limit on 50 MB of 64 KiB texts (and had no trouble with 80 MB this way).
      await conn.run(`CREATE INDEX ${REPLICA_TABLE}_id ON ${REPLICA_TABLE} (id)`);
      await load(async (rows) => {
        await conn.run('BEGIN TRANSACTION');
        const appender = await conn.createAppender(REPLICA_TABLE);
        try {
          for (const row of rows) appendRow(appender, columns, row, Number(row.updated_at));
          appender.closeSync();
          await conn.run('COMMIT');
        } catch (err) {
          closeQuietly(appender);
          await conn.run('ROLLBACK').catch(() => undefined);
          throw err;
        }
      });
      await conn.run('BEGIN TRANSACTION');
      await replica.writeMeta(watermark, columns);
      await conn.run('COMMIT');
      await conn.run('CHECKPOINT');
      return replica;
    } catch (err) {
      instance.closeSync();
      await removeReplicaFiles(path);
      throw err;
    }
  }

  /**
   * Applies change records (consecutive, starting at watermark + 1) in one DuckDB transaction, or
   * one per run of records that starts at a `schema` record: DuckDB refuses to commit a transaction
   * that changed a table's rows and then altered it ("another transaction has altered this table"),
   * which used to turn a catch-up page with an update or delete before an added column into a
   * rebuild from the base table. Each transaction still holds whole records.
   */
  async apply(records: ChangeRecord[]): Promise<void> {
    let start = 0;
    for (let i = 1; i <= records.length; i++) {
      if (i < records.length && records[i]!.kind !== 'schema') continue;
      await this.applyOne(records.slice(start, i));
      start = i;
    }
  }

  private async applyOne(records: ChangeRecord[]): Promise<void> {
    if (records.length === 0) return;
    this.generation++;
    try {
      await this.applyBatch(records, this.watermark, this.columns);
    } finally {
      // After the watermark moved (in applyBatch, right after the commit): see query().
      this.generation++;
    }
  }

  private async applyBatch(records: ChangeRecord[], from: number, before: ColumnDef[]): Promise<void> {
    const conn = this.conn;
    // `watermark` and `columns` change only once the batch is committed: a request that sees the
    // new watermark must find the batch in any snapshot it takes afterwards.
    await conn.run('BEGIN TRANSACTION');
    try {
      const { watermark, columns } = await applyChanges(conn, records, from, before);
      await this.writeMeta(watermark, columns);
      await conn.run('COMMIT');
      if (columns !== this.columns) {
        this.schemaVersion++;
        this.readers.forgetStatements();
        this.plans.clear();
      }
      // The index moves with the watermark, in this same synchronous step (no read in between).
      if (this.index instanceof KeyIndex && (columns !== this.columns || !this.index.apply(records)))
        this.index = undefined;
      this.watermark = watermark;
      this.columns = columns;
    } catch (err) {
      await conn.run('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /**
   * Runs one read-only statement on a reader connection of its own, in one snapshot (see
   * `ReadConnection`): readers run in parallel with each other and with {@link apply}, and the
   * returned watermark is that of the state the query read. A few reader connections exist per
   * replica; further queries wait for one, and waiting point lookups of one statement run as one
   * batch ({@link ReaderPool}).
   *
   * Fast path: {@link generation} is odd while a batch is being applied and moves on both edges.
   * When it is even before the statement starts and unchanged after its result is read, no batch
   * committed in between, so the statement saw exactly the state at {@link watermark}: it runs
   * without the snapshot transaction. Otherwise (a batch was being applied, or one started meanwhile)
   * the statement runs (again) in a transaction that reads the watermark of its own snapshot; so
   * does a statement that failed on the fast path while a batch was applied.
   */
  async query(sqlText: string, params: Cell[], limits: QueryLimits): Promise<SnapshotResult> {
    return await this.readers.query(sqlText, params, limits);
  }

  /**
   * Answers a point lookup by id from the key index, at {@link watermark}, when it can: the index
   * is built, the statement is a lookup the index plans (DuckDB ran it once on this replica, see
   * {@link IndexPlan}), the parameter is one well-formed string without NUL, and the row fits
   * `limits`. Undefined otherwise: the caller runs it in DuckDB ({@link query}).
   */
  lookup(sqlText: string, params: Cell[], limits: QueryLimits): SnapshotResult | undefined {
    const index = this.index;
    if (!(index instanceof KeyIndex) || params.length !== 1) return undefined;
    const id = params[0];
    // The edge refuses other text already (`textProblem`); a lookup relies on it (DuckDB stops at NUL).
    if (typeof id !== 'string' || textProblem(id) !== undefined) return undefined;
    const plan = this.planOf(sqlText, index);
    if (!plan) return undefined;
    const result = index.lookup(id, plan, limits);
    return result && { result, watermark: this.watermark };
  }

  /**
   * True when `sqlText` is a point lookup by id and the index is neither built nor being built
   * nor refused: the cache then builds it ({@link buildIndex}) under the board's lock.
   */
  wantsIndex(sqlText: string): boolean {
    if (this.index !== undefined || this.closed || this.retired) return false;
    const entry = this.readers.lookupEntry(sqlText);
    return entry !== undefined && entry.lookup.kind === 'text' && entry.lookup.key.toLowerCase() === 'id';
  }

  /**
   * Builds the key index from a scan of the table on the writer connection. The caller holds the
   * board's lock, so no batch applies meanwhile and the index is at {@link watermark}. Past
   * `maxBytes` the index is refused for this replica. A failure leaves no index (DuckDB serves).
   */
  async buildIndex(maxBytes: number): Promise<void> {
    if (this.index !== undefined || this.closed || this.retired) return;
    this.index = 'building';
    this.acquire();
    try {
      const built = await KeyIndex.build(this.conn, this.columns, maxBytes);
      this.index = built ?? 'refused';
    } catch (err) {
      // Not tried again on this replica (a re-attach or rebuild tries afresh).
      this.index = 'refused';
      throw err;
    } finally {
      this.release();
    }
  }

  /** True when {@link lookup} would consult the index for `sqlText` (no query needs to start early). */
  indexes(sqlText: string): boolean {
    return this.index instanceof KeyIndex && this.planOf(sqlText, this.index) !== undefined;
  }

  /** The key index's state, for `node.stats`: rows and estimated bytes, or why there is none. */
  get keyIndex(): { rows: number; bytes: number } | 'none' | 'building' | 'refused' {
    const index = this.index;
    if (index instanceof KeyIndex) return { rows: index.size, bytes: index.bytes };
    return index ?? 'none';
  }

  private planOf(sqlText: string, index: KeyIndex): IndexPlan | undefined {
    const known = this.plans.get(sqlText);
    if (known !== undefined) return known ?? undefined;
    const entry = this.readers.lookupEntry(sqlText);
    if (!entry) return undefined;
    const plan = index.plan(entry.lookup, entry.columns, entry.types) ?? null;
    if (this.plans.size >= 256) this.plans.clear();
    this.plans.set(sqlText, plan);
    return plan ?? undefined;
  }

  /** Marks the replica as used by one more request; {@link release} undoes it. */
  acquire(): void {
    this.users++;
  }

  /** One request is done with the replica; a retired replica closes with its last user. */
  release(): void {
    this.users--;
    if (this.users === 0 && this.retired) this.closeNow();
    if (this.users === 0) for (const f of this.drainedWaiters.splice(0)) f();
  }

  /** Requests using the replica right now. */
  get inUse(): number {
    return this.users;
  }

  /**
   * Closes the replica once no request uses it (at once if none does); resolves when closed, so a
   * caller can remove or recreate its files without pulling them from under a running read.
   */
  async retire(): Promise<void> {
    this.retired = true;
    if (this.users === 0) {
      this.closeNow();
      return;
    }
    await new Promise<void>((resolve) => this.drainedWaiters.push(resolve));
  }

  /** The threads DuckDB runs this replica's statements with, as DuckDB reports them (`node.stats`). */
  threads = 0;

  private async readThreads(): Promise<void> {
    const r = await this.conn.runAndReadAll("SELECT current_setting('threads')");
    this.threads = Number(r.getRowsJS()[0]?.[0] ?? 0);
  }

  /** Bytes of memory this replica holds: DuckDB's (buffer manager view) and its key index's estimate. */
  async memoryBytes(): Promise<number> {
    const r = await this.conn.runAndReadAll(
      'SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()',
    );
    const index = this.index instanceof KeyIndex ? this.index.bytes : 0;
    return Number(r.getRowsJS()[0]?.[0] ?? 0) + index;
  }

  /** Closes the database now (checkpointing it, so that re-attach is quick). */
  close(): void {
    this.retired = true;
    this.closeNow();
  }

  private closeNow(): void {
    if (this.closed) return;
    this.closed = true;
    this.index = undefined;
    this.readers.close();
    try {
      this.conn.closeSync();
    } finally {
      this.instance.closeSync();
    }
  }

  private columnDdl(): string[] {
    return [
      'id VARCHAR',
      'updated_at TIMESTAMP',
      'state VARCHAR',
      ...this.columns.map((c) => `"${c.name}" ${DUCK_TYPES[c.type]}`),
    ];
  }

  private async writeMeta(watermark: number, columns: ColumnDef[]): Promise<void> {
    await this.conn.run(`DELETE FROM ${META_TABLE}`);
    const stmt = await this.conn.prepare(`INSERT INTO ${META_TABLE} VALUES ($1::BIGINT, $2::BIGINT, $3)`);
    stmt.bind([watermark, this.boardNo, JSON.stringify(columns)]);
    await stmt.run();
    stmt.destroySync();
  }
}

/** Removes a replica's database and WAL files. */
export async function removeReplicaFiles(path: string): Promise<void> {
  await rm(path, { force: true });
  await rm(`${path}.wal`, { force: true });
}
