import { rm, stat } from 'node:fs/promises';
import type {
  Cell,
  ChangeRecord,
  ColumnDef,
  ColumnType,
  DeletePayload,
  InsertPayload,
  Row,
  SchemaPayload,
  UpdatePayload,
} from '@board/protocol';
import {
  type DuckDBAppender,
  type DuckDBConnection,
  DuckDBInstance,
  type DuckDBPreparedStatement,
  DuckDBTimestampValue,
  StatementType,
} from '@duckdb/node-api';
import { DUCK_TYPES } from '../boards/columns.js';
import { BoardError, boardError } from '../errors.js';
import { refineDuckError } from './duck-errors.js';
import { isReadStatement, REPLICA_TABLE } from './query-guard.js';
import { type EncodedResult, type QueryLimits, readResult } from './result-reader.js';
import { checkSources } from './source-guard.js';

export type { EncodedResult, QueryLimits } from './result-reader.js';

const META_TABLE = 'replica_meta';
/** Prepared read statements kept per replica (by SQL text). */
const STATEMENT_CACHE = 64;

/**
 * Settings every replica is opened with. The query path relies on them: no file system or network
 * access (read_csv, glob, ATTACH, COPY TO... all fail), no extension loading, and the
 * configuration locked so that no statement can change any of this.
 */
function instanceOptions(memoryLimitMb: number): Record<string, string> {
  return {
    enable_external_access: 'false',
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'false',
    allow_community_extensions: 'false',
    allow_unsigned_extensions: 'false',
    memory_limit: `${memoryLimitMb}MB`,
    lock_configuration: 'true',
  };
}

/** One board's DuckDB replica: a database file holding table `items` and the synced watermark. */
export class Replica {
  private readonly statements = new Map<string, DuckDBPreparedStatement>();
  /** `json_serialize_sql` prepared once per replica, for {@link checkParseTree}. */
  private serializer: DuckDBPreparedStatement | undefined;

  private constructor(
    readonly path: string,
    readonly boardNo: number,
    private readonly instance: DuckDBInstance,
    private readonly conn: DuckDBConnection,
    public watermark: number,
    public columns: ColumnDef[],
  ) {}

  /** Opens the replica file, or returns undefined if it is missing or unreadable (then rebuild). */
  static async open(path: string, boardNo: number, memoryLimitMb: number): Promise<Replica | undefined> {
    try {
      await stat(path);
    } catch {
      return undefined;
    }
    let instance: DuckDBInstance | undefined;
    try {
      instance = await DuckDBInstance.create(path, instanceOptions(memoryLimitMb));
      const conn = await instance.connect();
      const r = await conn.runAndReadAll(`SELECT watermark, board_no, columns FROM ${META_TABLE}`);
      const row = r.getRowsJS()[0];
      if (!row || Number(row[1]) !== boardNo) throw new Error('replica of another board');
      return new Replica(
        path,
        boardNo,
        instance,
        conn,
        Number(row[0]),
        JSON.parse(String(row[2])) as ColumnDef[],
      );
    } catch {
      instance?.closeSync();
      await removeReplicaFiles(path);
      return undefined;
    }
  }

  /**
   * Creates the replica afresh from a snapshot of the base table. `load` yields batches of rows
   * (`updated_at` and TIMESTAMP columns as epoch micros) of one consistent snapshot at `watermark`.
   */
  static async create(
    path: string,
    boardNo: number,
    memoryLimitMb: number,
    columns: ColumnDef[],
    watermark: number,
    load: (push: (rows: Row[]) => void) => Promise<void>,
  ): Promise<Replica> {
    await removeReplicaFiles(path);
    const instance = await DuckDBInstance.create(path, instanceOptions(memoryLimitMb));
    try {
      const conn = await instance.connect();
      const replica = new Replica(path, boardNo, instance, conn, watermark, columns);
      await conn.run('BEGIN TRANSACTION');
      await conn.run(`CREATE TABLE ${META_TABLE} (watermark BIGINT, board_no BIGINT, columns VARCHAR)`);
      await conn.run(`CREATE TABLE ${REPLICA_TABLE} (${replica.columnDdl().join(', ')})`);
      const appender = await conn.createAppender(REPLICA_TABLE);
      await load((rows) => {
        for (const row of rows) replica.appendRow(appender, row, Number(row.updated_at));
      });
      appender.closeSync();
      // Point lookups by id use this (non-unique: a delete and re-insert of one id in a single
      // applied batch must not trip a constraint; uniqueness is Postgres's job).
      await conn.run(`CREATE INDEX ${REPLICA_TABLE}_id ON ${REPLICA_TABLE} (id)`);
      await replica.writeMeta();
      await conn.run('COMMIT');
      await conn.run('CHECKPOINT');
      return replica;
    } catch (err) {
      instance.closeSync();
      await removeReplicaFiles(path);
      throw err;
    }
  }

  /** Applies change records (consecutive, starting at watermark + 1) in one DuckDB transaction. */
  async apply(records: ChangeRecord[]): Promise<void> {
    if (records.length === 0) return;
    const conn = this.conn;
    await conn.run('BEGIN TRANSACTION');
    let appender: DuckDBAppender | undefined;
    const flush = () => {
      appender?.closeSync();
      appender = undefined;
    };
    try {
      for (const rec of records) {
        if (rec.seq !== this.watermark + 1)
          throw new Error(`replica gap: at ${this.watermark}, got ${rec.seq}`);
        switch (rec.kind) {
          case 'insert': {
            const p = rec.payload as InsertPayload;
            appender ??= await conn.createAppender(REPLICA_TABLE);
            for (const row of p.rows) this.appendRow(appender, row, p.updatedAt);
            break;
          }
          case 'update': {
            flush();
            const p = rec.payload as UpdatePayload;
            for (const u of p.updates) await this.updateRow(u.id, u.patch, p.updatedAt);
            break;
          }
          case 'delete': {
            flush();
            const p = rec.payload as DeletePayload;
            const stmt = await conn.prepare(`DELETE FROM ${REPLICA_TABLE} WHERE id = $1`);
            for (const id of p.ids) {
              stmt.bind([id]);
              await stmt.run();
            }
            stmt.destroySync();
            break;
          }
          case 'schema': {
            flush();
            this.clearStatements();
            const p = rec.payload as SchemaPayload;
            for (const c of p.columns) {
              if (this.columns.some((k) => k.name === c.name)) continue;
              await conn.run(`ALTER TABLE ${REPLICA_TABLE} ADD COLUMN "${c.name}" ${DUCK_TYPES[c.type]}`);
              this.columns = [...this.columns, c];
            }
            break;
          }
        }
        this.watermark = rec.seq;
      }
      flush();
      await this.writeMeta();
      await conn.run('COMMIT');
    } catch (err) {
      try {
        appender?.closeSync();
      } catch {
        // the appender may already be invalid; the rollback below discards its rows anyway
      }
      await conn.run('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /**
   * Runs one read-only statement and encodes its result as JSON, chunk by chunk. Refuses (tag
   * `QueryRefused`) anything but exactly one SELECT that reads only the board's table
   * (`source-guard.ts`); file, network, extension and settings access are refused by the instance
   * settings too.
   *
   * The result is streamed from DuckDB one data chunk (about 2048 rows) at a time; each chunk is
   * converted to cells and encoded, then the event loop gets a turn, so one heavy query never
   * stalls other requests or `/health`. Beyond `limits.maxRows` rows or `limits.maxBytes` encoded
   * bytes the query stops with `ResultTooLarge`. The deadline (`limits.timeoutMs`) covers checking,
   * preparing, executing, reading, converting and encoding: past it, `QueryTimeout`.
   */
  async query(sqlText: string, params: Cell[], limits: QueryLimits): Promise<EncodedResult> {
    const conn = this.conn;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      conn.interrupt();
    }, limits.timeoutMs);
    const deadline = () => {
      if (timedOut) throw boardError('QueryTimeout', `query interrupted after ${limits.timeoutMs} ms`);
    };
    try {
      const prepared = await this.prepareRead(sqlText);
      deadline();
      if (prepared.parameterCount !== params.length) {
        throw boardError(
          'InvalidInput',
          `the query has ${prepared.parameterCount} parameter(s) but ${params.length} were given`,
        );
      }
      if (params.length > 0) prepared.bind(params);
      const result = await prepared.stream();
      deadline();
      return await readResult(result, limits, deadline);
    } catch (err) {
      if (timedOut) throw boardError('QueryTimeout', `query interrupted after ${limits.timeoutMs} ms`);
      // A result abandoned half-read would keep its pipeline running until the next statement.
      if (err instanceof BoardError && err._tag === 'ResultTooLarge') conn.interrupt();
      throw refineDuckError(err, this.path);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A prepared read statement for `sqlText`, from the cache or checked and prepared now. Only
   * statements that pass every check are cached, so a cache hit needs no re-check. The source check
   * runs on the parse tree before the statement is bound, so that nothing (not even an error
   * message of the binder or optimizer) is computed from a source the query may not read.
   */
  private async prepareRead(sqlText: string): Promise<DuckDBPreparedStatement> {
    const cached = this.statements.get(sqlText);
    if (cached) {
      this.statements.delete(sqlText);
      this.statements.set(sqlText, cached);
      return cached;
    }
    const extracted = await this.conn.extractStatements(sqlText);
    if (extracted.count !== 1) {
      throw boardError('QueryRefused', `exactly one statement is allowed, got ${extracted.count}`);
    }
    // Both checks: the leading keyword (DuckDB turns PRAGMA, SHOW and DESCRIBE into SELECT
    // statements, which must not pass as reads) and, below, the parsed statement type.
    if (!isReadStatement(sqlText)) {
      throw boardError('QueryRefused', 'only SELECT statements are allowed on the read path');
    }
    await this.checkParseTree(sqlText);
    const prepared = await extracted.prepare(0);
    if (prepared.statementType !== StatementType.SELECT) {
      prepared.destroySync();
      throw boardError('QueryRefused', 'only SELECT statements are allowed on the read path');
    }
    this.statements.set(sqlText, prepared);
    if (this.statements.size > STATEMENT_CACHE) {
      const oldest = this.statements.keys().next().value as string;
      this.statements.get(oldest)?.destroySync();
      this.statements.delete(oldest);
    }
    return prepared;
  }

  /** Parses `sqlText` with DuckDB's own parser (`json_serialize_sql`) and checks its sources. */
  private async checkParseTree(sqlText: string): Promise<void> {
    this.serializer ??= await this.conn.prepare('SELECT json_serialize_sql($1::VARCHAR)');
    this.serializer.bind([sqlText]);
    const reader = await this.serializer.runAndReadAll();
    const text = String(reader.getRows()[0]?.[0] ?? '');
    const tree = JSON.parse(text) as { error?: boolean; error_message?: string; statements?: unknown };
    if (tree.error) {
      throw boardError(
        'QueryFailed',
        `Parser Error: ${tree.error_message ?? 'the query could not be parsed'}`,
      );
    }
    checkSources((tree.statements ?? null) as Parameters<typeof checkSources>[0]);
  }

  private clearStatements(): void {
    for (const st of this.statements.values()) st.destroySync();
    this.statements.clear();
    this.serializer?.destroySync();
    this.serializer = undefined;
  }

  /** Bytes of memory DuckDB holds for this replica (buffer manager view). */
  async memoryBytes(): Promise<number> {
    const r = await this.conn.runAndReadAll(
      'SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()',
    );
    return Number(r.getRowsJS()[0]?.[0] ?? 0);
  }

  /** Closes the database (checkpointing it, so that re-attach is quick). */
  close(): void {
    try {
      this.clearStatements();
    } catch {
      // closing the connection below releases them anyway
    }
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

  private async writeMeta(): Promise<void> {
    await this.conn.run(`DELETE FROM ${META_TABLE}`);
    const stmt = await this.conn.prepare(`INSERT INTO ${META_TABLE} VALUES ($1::BIGINT, $2::BIGINT, $3)`);
    stmt.bind([this.watermark, this.boardNo, JSON.stringify(this.columns)]);
    await stmt.run();
  }

  private appendRow(appender: DuckDBAppender, row: Row, updatedAt: number): void {
    appendCell(appender, 'TEXT', row.id ?? null);
    appendCell(appender, 'TIMESTAMP', updatedAt);
    appendCell(appender, 'TEXT', row.state ?? null);
    for (const c of this.columns) appendCell(appender, c.type, row[c.name] ?? null);
    appender.endRow();
  }

  private async updateRow(id: string, patch: Row, updatedAt: number): Promise<void> {
    const types = new Map<string, ColumnType>(this.columns.map((c) => [c.name, c.type]));
    const sets: string[] = ['updated_at = make_timestamp($1::BIGINT)'];
    const values: Cell[] = [updatedAt];
    for (const [name, value] of Object.entries(patch)) {
      const type = name === 'state' ? 'TEXT' : types.get(name);
      if (type === undefined) continue;
      values.push(value);
      const p = `$${values.length}`;
      sets.push(
        `"${name}" = ${type === 'TIMESTAMP' ? `make_timestamp(${p}::BIGINT)` : `${p}::${DUCK_TYPES[type]}`}`,
      );
    }
    values.push(id);
    const stmt = await this.conn.prepare(
      `UPDATE ${REPLICA_TABLE} SET ${sets.join(', ')} WHERE id = $${values.length}`,
    );
    stmt.bind(values);
    await stmt.run();
    stmt.destroySync();
  }
}

function appendCell(appender: DuckDBAppender, type: ColumnType, value: Cell): void {
  if (value === null) {
    appender.appendNull();
    return;
  }
  switch (type) {
    case 'TEXT':
      appender.appendVarchar(String(value));
      break;
    case 'INTEGER':
      appender.appendBigInt(BigInt(value as number));
      break;
    case 'DOUBLE':
      appender.appendDouble(Number(value));
      break;
    case 'BOOLEAN':
      appender.appendBoolean(Boolean(value));
      break;
    case 'TIMESTAMP':
      appender.appendTimestamp(new DuckDBTimestampValue(BigInt(value as number)));
      break;
  }
}

/** Removes a replica's database and WAL files. */
export async function removeReplicaFiles(path: string): Promise<void> {
  await rm(path, { force: true });
  await rm(`${path}.wal`, { force: true });
}
