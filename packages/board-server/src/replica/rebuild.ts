import type { Row } from '@board/protocol';
import { type Kysely, sql } from 'kysely';
import { boardTable } from '../boards/board-admin.js';
import { parseColumns } from '../boards/columns.js';
import { boardError } from '../errors.js';
import type { BoardDb } from '../store/database.js';
import { type DuckSettings, Replica } from './replica.js';

/** Base-table rows read per page while rebuilding. */
const REBUILD_BATCH = 50_000;
/**
 * Bytes of rows (their text cells' lengths, and 16 per other cell) per page beyond its first row: a page is
 * one DuckDB transaction of the new replica and is held by the node while it is appended, so its
 * size, not the board's, is what a rebuild needs in memory (a row is at most 8 MiB of text,
 * `MAX_MUTATION_TEXT_BYTES`).
 */
const REBUILD_BATCH_BYTES = 4 * 1024 * 1024;

/**
 * Creates a board's replica afresh at `path` from one consistent snapshot of its base table
 * (a repeatable-read transaction that also reads the head and columns the replica starts at).
 */
export async function rebuildReplica(
  db: Kysely<BoardDb>,
  board: string,
  path: string,
  boardNo: number,
  settings: DuckSettings,
): Promise<Replica> {
  return await db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (tx) => {
      const meta = await sql<{ head: number; columns: unknown }>`
        SELECT head, columns FROM board_boards WHERE board_id = ${board}`.execute(tx);
      const m = meta.rows[0];
      if (!m) throw boardError('UnknownBoard', `unknown board "${board}"`);
      const columns = parseColumns(m.columns);
      const micros = (name: string) => sql`(extract(epoch FROM ${sql.ref(name)}) * 1000000)::bigint`;
      const select = sql.join([
        sql.ref('id'),
        sql`${micros('updated_at')} AS updated_at`,
        sql.ref('state'),
        ...columns.map((c) =>
          c.type === 'TIMESTAMP' ? sql`${micros(c.name)} AS ${sql.id(c.name)}` : sql.ref(c.name),
        ),
      ]);
      // A row's size without reading its text: `octet_length` of a text value is its length as
      // stored (TOAST keeps it), not a copy; the other cells are small and counted as 16 bytes.
      const textBytes = sql.join(
        [sql.ref('id'), ...columns.filter((c) => c.type === 'TEXT').map((c) => sql.ref(c.name))].map(
          (ref) => sql`coalesce(octet_length(${ref}), 0)`,
        ),
        sql` + `,
      );
      const fixedBytes = 16 * (2 + columns.filter((c) => c.type !== 'TEXT').length);
      return await Replica.create(path, boardNo, settings, columns, m.head, async (push) => {
        let last: string | null = null;
        for (;;) {
          // Upper-case names cannot collide with a user column (lower-case by rule).
          const page = await sql<Row>`SELECT ${select} FROM (
              SELECT b.*, sum(${textBytes} + ${fixedBytes}) OVER (ORDER BY id) AS "UptoBytes",
                row_number() OVER (ORDER BY id) AS "N"
              FROM ${sql.table(boardTable(boardNo))} b
              WHERE ${last === null ? sql`true` : sql`id > ${last}`} ORDER BY id LIMIT ${REBUILD_BATCH}
            ) b
            WHERE "UptoBytes" <= ${REBUILD_BATCH_BYTES} OR "N" = 1
            ORDER BY id`.execute(tx);
          if (page.rows.length === 0) break;
          await push(page.rows);
          last = page.rows[page.rows.length - 1]?.id as string;
        }
      });
    });
}
