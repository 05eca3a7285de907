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
      return await Replica.create(path, boardNo, settings, columns, m.head, async (push) => {
        let last: string | null = null;
        for (;;) {
          const page = await sql<Row>`SELECT ${select} FROM ${sql.table(boardTable(boardNo))}
            WHERE ${last === null ? sql`true` : sql`id > ${last}`} ORDER BY id LIMIT ${REBUILD_BATCH}`.execute(
            tx,
          );
          push(page.rows);
          if (page.rows.length < REBUILD_BATCH) break;
          last = page.rows[page.rows.length - 1]?.id as string;
        }
      });
    });
}
