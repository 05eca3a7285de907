import { type ColumnDef, isBoardId } from '@board/protocol';
import { sql } from 'kysely';
import { boardError } from '../errors.js';
import type { Store } from '../store/database.js';
import { PG_TYPES, parseColumns } from './columns.js';

/** A board as the operator sees it. */
export interface BoardInfo {
  id: string;
  columns: ColumnDef[];
  head: number;
}

/** Postgres table holding a board's rows: named by an internal number, never by the board id. */
export function boardTable(boardNo: number): string {
  return `board_${boardNo}`;
}

/** Throws `InvalidBoardId` unless `id` matches the board id pattern. */
export function assertBoardId(id: string): void {
  if (!isBoardId(id))
    throw boardError(
      'InvalidBoardId',
      `invalid board id ${JSON.stringify(id)}: 1 to 64 characters of A-Za-z0-9_`,
    );
}

/**
 * Operator actions on boards (`board-node board ...`, also used by tests as a library).
 * @example
 * const admin = boardAdmin(store);
 * await admin.create('tasks', [{ name: 'title', type: 'TEXT' }]);
 */
export function boardAdmin(store: Store) {
  const { db } = store;
  return {
    /** Creates a board with the base columns plus `columns`. Tag `BoardExists` if it exists. */
    async create(
      id: string,
      columns: ColumnDef[],
      options: { ifNotExists?: boolean } = {},
    ): Promise<BoardInfo> {
      assertBoardId(id);
      const names = new Set<string>();
      for (const c of columns) {
        if (names.has(c.name)) throw boardError('InvalidInput', `column "${c.name}" declared twice`);
        names.add(c.name);
      }
      return await db.transaction().execute(async (tx) => {
        const inserted = await sql<{ board_no: number }>`
          INSERT INTO board_boards (board_id, columns) VALUES (${id}, ${JSON.stringify(columns)}::jsonb)
          ON CONFLICT (board_id) DO NOTHING RETURNING board_no`.execute(tx);
        const row = inserted.rows[0];
        if (!row) {
          if (options.ifNotExists) {
            const existing = await this.get(id);
            if (existing) return existing;
          }
          throw boardError('BoardExists', `board "${id}" already exists`);
        }
        const userCols = columns.map((c) => sql`${sql.id(c.name)} ${sql.raw(PG_TYPES[c.type])}`);
        await sql`CREATE TABLE ${sql.table(boardTable(row.board_no))} (
          id text PRIMARY KEY,
          updated_at timestamptz NOT NULL,
          state text
          ${userCols.length > 0 ? sql`, ${sql.join(userCols)}` : sql``}
        )`.execute(tx);
        return { id, columns, head: 0 };
      });
    },

    /** Adds a user column; appends a `schema` change record (advances the board's watermark). */
    async addColumn(id: string, column: ColumnDef): Promise<BoardInfo> {
      assertBoardId(id);
      return await db.transaction().execute(async (tx) => {
        const current = await sql<{ board_no: number; columns: unknown; head: number }>`
          SELECT board_no, columns, head FROM board_boards WHERE board_id = ${id} FOR UPDATE`.execute(tx);
        const row = current.rows[0];
        if (!row) throw boardError('UnknownBoard', `unknown board "${id}"`);
        const columns = parseColumns(row.columns);
        if (
          columns.some((c) => c.name === column.name) ||
          ['id', 'updated_at', 'state'].includes(column.name)
        ) {
          throw boardError('ColumnExists', `board "${id}" already has a column "${column.name}"`);
        }
        const next = [...columns, column];
        await sql`ALTER TABLE ${sql.table(boardTable(row.board_no))}
          ADD COLUMN ${sql.id(column.name)} ${sql.raw(PG_TYPES[column.type])}`.execute(tx);
        const head = row.head + 1;
        await sql`UPDATE board_boards SET head = ${head}, columns = ${JSON.stringify(next)}::jsonb
          WHERE board_id = ${id}`.execute(tx);
        await sql`INSERT INTO board_changes (board_id, seq, kind, payload, actor)
          VALUES (${id}, ${head}, 'schema', ${JSON.stringify({ columns: next })}::jsonb, 'operator')`.execute(
          tx,
        );
        await sql`SELECT pg_notify('board_changes', ${`${id}:${head}`})`.execute(tx);
        return { id, columns: next, head };
      });
    },

    /** Lists every board. */
    async list(): Promise<BoardInfo[]> {
      const rows = await db
        .selectFrom('board_boards')
        .select(['board_id', 'columns', 'head'])
        .orderBy('board_id')
        .execute();
      return rows.map((r) => ({ id: r.board_id, columns: parseColumns(r.columns), head: r.head }));
    },

    /** One board, or undefined. */
    async get(id: string): Promise<BoardInfo | undefined> {
      assertBoardId(id);
      const r = await db
        .selectFrom('board_boards')
        .select(['board_id', 'columns', 'head'])
        .where('board_id', '=', id)
        .executeTakeFirst();
      return r && { id: r.board_id, columns: parseColumns(r.columns), head: r.head };
    },

    /** Drops a board: its rows, change log and idempotency keys. Tag `UnknownBoard` if absent. */
    async drop(id: string): Promise<void> {
      assertBoardId(id);
      await db.transaction().execute(async (tx) => {
        const deleted = await sql<{ board_no: number }>`
          DELETE FROM board_boards WHERE board_id = ${id} RETURNING board_no`.execute(tx);
        const row = deleted.rows[0];
        if (!row) throw boardError('UnknownBoard', `unknown board "${id}"`);
        await sql`DROP TABLE ${sql.table(boardTable(row.board_no))}`.execute(tx);
        await sql`DELETE FROM board_changes WHERE board_id = ${id}`.execute(tx);
        await sql`DELETE FROM board_idempotency WHERE board_id = ${id}`.execute(tx);
      });
    },
  };
}

/** The operator API returned by {@link boardAdmin}. */
export type BoardAdmin = ReturnType<typeof boardAdmin>;
