import { type Cell, ENTITY, PLACEHOLDER_PATTERN, type QueryOutcome } from '@board/protocol';
import {
  type CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryCompiler,
  type QueryResult,
  type TableNode,
} from 'kysely';
import { type Result, SERVICE_PREFIX } from './errors.js';

/** Runs one `query.execute` for the dialect (the board client's `query`). */
export type QueryRunner = (
  sql: string,
  params: Cell[],
  tables: { token: string; entity: string }[],
) => Promise<Result<QueryOutcome>>;

/**
 * Compiles like PostgreSQL (DuckDB shares its `$1` parameters and `"quoted"` identifiers), except
 * that the board's table is written as the placeholder token `{{items}}`; the node replaces it with
 * the replica's table, so `"items"."id"` column references keep working.
 *
 * @example
 * board.selectAll().where('id', '=', 'x').compile().sql; // 'select * from {{items}} where "id" = $1'
 */
export class BoardQueryCompiler extends PostgresQueryCompiler {
  protected override visitTable(node: TableNode): void {
    if (node.table.schema === undefined && node.table.identifier.name === ENTITY) {
      this.append(`{{${ENTITY}}}`);
      return;
    }
    super.visitTable(node);
  }
}

/** The placeholder bindings a SQL text needs: every `{{items}}` token bound to entity `items`. */
export function tablesFor(sql: string): { token: string; entity: string }[] {
  const tokens = new Set<string>();
  for (const m of sql.matchAll(PLACEHOLDER_PATTERN)) if (m[1] !== undefined) tokens.add(m[1]);
  return [...tokens].map((token) => ({ token, entity: ENTITY }));
}

/** Columnar query result rows to Kysely's row objects (`updated_at` stays epoch microseconds). */
export function toObjects(columns: string[], rows: Cell[][]): Record<string, Cell>[] {
  const out = new Array<Record<string, Cell>>(rows.length);
  const n = columns.length;
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r]!;
    const obj: Record<string, Cell> = {};
    for (let c = 0; c < n; c++) obj[columns[c]!] = row[c] ?? null;
    out[r] = obj;
  }
  return out;
}

class BoardConnection implements DatabaseConnection {
  constructor(private readonly run: QueryRunner) {}

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const r = await this.run(compiled.sql, compiled.parameters as Cell[], tablesFor(compiled.sql));
    // Kysely's convention: execute() rejects on failure. The rejection is the typed BoardError.
    if (!r.ok) throw r.error;
    return { rows: toObjects(r.value.result.columns, r.value.result.rows) as R[] };
  }

  // biome-ignore lint/correctness/useYield: streaming is refused before any row exists
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error(`${SERVICE_PREFIX} streaming is not supported; use execute()`);
  }
}

class BoardDriver implements Driver {
  readonly #connection: BoardConnection;
  constructor(run: QueryRunner) {
    this.#connection = new BoardConnection(run);
  }
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return this.#connection;
  }
  async beginTransaction(): Promise<void> {
    throw new Error(`${SERVICE_PREFIX} transactions are not supported on the read path (begin)`);
  }
  async commitTransaction(): Promise<void> {
    throw new Error(`${SERVICE_PREFIX} transactions are not supported on the read path (commit)`);
  }
  async rollbackTransaction(): Promise<void> {
    throw new Error(`${SERVICE_PREFIX} transactions are not supported on the read path (rollback)`);
  }
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {}
}

/**
 * The Kysely dialect of a board: every query is one `query.execute` on the board, with
 * `{{items}}` placeholders and the matching `tables` list. Reads only. `board.db` is built on it;
 * use it directly only to plug in your own runner.
 *
 * @example
 * const db = new Kysely<BoardDatabase<{}>>({ dialect: new BoardDialect(async (sql, params, tables) => runSomewhere(sql, params, tables)) });
 */
export class BoardDialect implements Dialect {
  constructor(private readonly run: QueryRunner) {}
  createAdapter(): DialectAdapter {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new BoardDriver(this.run);
  }
  createQueryCompiler(): QueryCompiler {
    return new BoardQueryCompiler();
  }
  // biome-ignore lint/suspicious/noExplicitAny: Kysely's own Dialect signature takes Kysely<any>
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }
}
