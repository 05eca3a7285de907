import { createHash } from 'node:crypto';
import type {
  ColumnDef,
  DeletePayload,
  InsertPayload,
  MutateAck,
  Row,
  UpdatePayload,
  WalKind,
  WalPayload,
} from '@board/protocol';
import { type Kysely, sql, type Transaction } from 'kysely';
import type pg from 'pg';
import { boardTable } from '../boards/board-admin.js';
import { checkRow, PG_TYPES, parseColumns } from '../boards/columns.js';
import { boardError } from '../errors.js';
import type { BoardDb } from '../store/database.js';

/** A mutation as the write path sees it. */
export type Mutation =
  | { kind: 'insert'; rows: Row[] }
  | { kind: 'update'; updates: { id: string; patch: Row }[] }
  | { kind: 'delete'; ids: string[] };

/** What a node remembers of a board for the single-statement insert (see {@link applyMutation}). */
export type BoardMetaCache = Map<string, { boardNo: number; columns: ColumnDef[]; columnsJson: string }>;

/**
 * The write path. An unkeyed insert on a board this node has written before is one statement
 * (below); everything else is one Postgres transaction:
 *
 *   [keyed] claim the idempotency key ── taken and committed ──▶ answer the original ack
 *      │ (a concurrent repeat blocks here on the unique index until the first commits)
 *      ▼
 *   lock the board row and advance its head (head + 1) ── no such board ──▶ UnknownBoard
 *      ▼
 *   apply the rows ── bad cell / duplicate id / missing id ──▶ rollback, tagged error
 *      ▼
 *   append the change record (seq = new head), remember the key's watermark, pg_notify
 *      ▼
 *   COMMIT ──▶ ack { watermark }
 *
 * The board row lock serialises writers of one board, so watermarks are assigned in commit order
 * and without gaps: a reader that saw head W has seen every record <= W.
 *
 * The single statement (autocommit, so atomic on its own) does the same steps as CTEs: advance the
 * head only if the board still has the cached table number and columns, insert the rows and the
 * change record from that row, NOTIFY. No row back means the cache is stale (or the board is gone):
 * the transaction path then runs and refreshes the cache.
 */
export async function applyMutation(
  db: Kysely<BoardDb>,
  board: string,
  mutation: Mutation,
  options: {
    idempotencyKey?: string | undefined;
    actor?: string | undefined;
    cache?: BoardMetaCache;
    /** When given, the single statement runs as a named prepared statement on this pool. */
    pool?: pg.Pool;
  },
): Promise<MutateAck> {
  const key = options.idempotencyKey;
  const known = options.cache?.get(board);
  // Validation against cached columns decides nothing on its own: a row refused here goes to the
  // transaction path, which checks it against the board's current columns.
  const rows =
    mutation.kind === 'insert' && key === undefined && known
      ? tryCheckInsert(known.columns, mutation.rows)
      : undefined;
  if (rows && known) {
    const rowsJson = JSON.stringify(rows);
    const names = ['state', ...known.columns.map((c) => c.name)];
    // A duplicate id (23505) or any other store error travels to `toWireError`, whose store-error
    // mapper names it (`DuplicateRow` with the id) without PostgreSQL's raw text.
    const statement = sql<{ head: number }>`
      WITH b AS (
        UPDATE board_boards SET head = head + 1
        WHERE board_id = ${board} AND board_no = ${known.boardNo} AND columns = ${known.columnsJson}::jsonb
        RETURNING head, (extract(epoch FROM now()) * 1000000)::bigint AS now_us
      ),
      r AS (
        INSERT INTO ${sql.table(boardTable(known.boardNo))} (id, updated_at, ${sql.join(names.map((n) => sql.id(n)))})
        SELECT x.id, now(), ${sql.join([sql.ref('x.state'), ...known.columns.map((c) => columnValue(c.name, c.type))])}
        FROM b, jsonb_to_recordset(${rowsJson}::jsonb) AS x(${recordType(known.columns)})
      ),
      c AS (
        INSERT INTO board_changes (board_id, seq, kind, payload, actor)
        SELECT ${board}, b.head, 'insert', jsonb_build_object('updatedAt', b.now_us, 'rows', ${rowsJson}::jsonb), ${options.actor ?? null}::text
        FROM b
      )
      SELECT b.head, pg_notify('board_changes', ${board}::text || ':' || b.head::text) FROM b`;
    const head = (
      options.pool
        ? await runNamed<{ head: number }>(options.pool, statement.compile(db))
        : await statement.execute(db)
    ).rows[0]?.head;
    if (head !== undefined) return { watermark: head };
    options.cache?.delete(board);
  }
  return await db.transaction().execute(async (tx) => {
    if (key !== undefined) {
      const claimed = await sql`INSERT INTO board_idempotency (board_id, key) VALUES (${board}, ${key})
        ON CONFLICT DO NOTHING RETURNING 1 AS claimed`.execute(tx);
      if (claimed.rows.length === 0) {
        const prior = await sql<{ watermark: number | null }>`
          SELECT watermark FROM board_idempotency WHERE board_id = ${board} AND key = ${key}`.execute(tx);
        const watermark = prior.rows[0]?.watermark;
        if (watermark !== undefined && watermark !== null) return { watermark };
        // Claimed by a transaction that has since rolled back and been trimmed: unreachable in
        // practice (the claimer's row disappears on rollback and our INSERT would have succeeded).
        throw boardError('Unavailable', 'idempotency key is in an inconsistent state; retry');
      }
    }
    const advanced = await sql<{ head: number; board_no: number; columns: unknown; now_us: number }>`
      UPDATE board_boards SET head = head + 1 WHERE board_id = ${board}
      RETURNING head, board_no, columns, (extract(epoch FROM now()) * 1000000)::bigint AS now_us`.execute(tx);
    const b = advanced.rows[0];
    if (!b) throw boardError('UnknownBoard', `unknown board "${board}"`);
    const columns = parseColumns(b.columns);
    const table = boardTable(b.board_no);
    options.cache?.set(board, { boardNo: b.board_no, columns, columnsJson: JSON.stringify(b.columns) });
    // The change record, the key's watermark and the NOTIFY travel as one statement (with the
    // rows themselves for inserts): fewer round trips inside the board's lock.
    const finish = (kind: WalKind, payload: WalPayload) => sql`
      c AS (INSERT INTO board_changes (board_id, seq, kind, payload, actor)
            VALUES (${board}, ${b.head}, ${kind}, ${JSON.stringify(payload)}::jsonb, ${options.actor ?? null}))
      ${key !== undefined ? sql`, k AS (UPDATE board_idempotency SET watermark = ${b.head} WHERE board_id = ${board} AND key = ${key})` : sql``}
      SELECT pg_notify('board_changes', ${`${board}:${b.head}`})`;
    switch (mutation.kind) {
      case 'insert': {
        const rows = checkInsert(columns, mutation.rows);
        const payload: InsertPayload = { updatedAt: b.now_us, rows };
        // A duplicate id fails here with 23505: `mapStoreError` answers `DuplicateRow` naming it.
        await sql`WITH r AS (${insertStatement(table, columns, rows)}), ${finish('insert', payload)}`.execute(
          tx,
        );
        break;
      }
      case 'update': {
        const payload = await updateRows(tx, table, columns, mutation.updates, b.now_us);
        await sql`WITH ${finish('update', payload)}`.execute(tx);
        break;
      }
      case 'delete': {
        const payload = await deleteRows(tx, table, mutation.ids);
        await sql`WITH ${finish('delete', payload)}`.execute(tx);
        break;
      }
    }
    return { watermark: b.head };
  });
}

/** Names of prepared statements by their text (the text has the board's table and columns in it). */
const statementNames = new Map<string, string>();

/**
 * Runs a compiled statement as a named prepared statement: Postgres parses and plans it once per
 * connection instead of on every call (planning the single-statement insert's CTEs took about a
 * third of its time; see the README, "Writes"). The name is a digest of the text, so one name
 * never stands for two texts.
 */
async function runNamed<R>(
  pool: pg.Pool,
  compiled: { sql: string; parameters: readonly unknown[] },
): Promise<{ rows: R[] }> {
  let name = statementNames.get(compiled.sql);
  if (name === undefined) {
    if (statementNames.size >= 1024) statementNames.clear();
    name = `board-insert-${createHash('sha256').update(compiled.sql).digest('hex').slice(0, 32)}`;
    statementNames.set(compiled.sql, name);
  }
  const r = await pool.query({ name, text: compiled.sql, values: [...compiled.parameters] });
  return { rows: r.rows as R[] };
}

/** SQL expression converting a jsonb-sourced value to the column's stored form. */
function columnValue(name: string, type: ColumnDef['type'] | 'TEXT') {
  return type === 'TIMESTAMP'
    ? sql`'epoch'::timestamptz + (${sql.ref(`x.${name}`)}) * interval '1 microsecond'`
    : sql.ref(`x.${name}`);
}

function recordType(columns: ColumnDef[]) {
  return sql.join([
    sql`id text`,
    sql`state text`,
    ...columns.map(
      (c) => sql`${sql.id(c.name)} ${sql.raw(c.type === 'TIMESTAMP' ? 'bigint' : PG_TYPES[c.type])}`,
    ),
  ]);
}

function tryCheckInsert(columns: ColumnDef[], rows: Row[]): Row[] | undefined {
  try {
    return checkInsert(columns, rows);
  } catch {
    return undefined;
  }
}

function checkInsert(columns: ColumnDef[], rows: Row[]): Row[] {
  const seen = new Set<string>();
  for (const row of rows) {
    checkRow(row, columns, 'insert');
    const id = row.id as string;
    if (seen.has(id)) throw boardError('DuplicateRow', `row id "${id}" appears twice in one insert`);
    seen.add(id);
  }
  return rows;
}

function insertStatement(table: string, columns: ColumnDef[], rows: Row[]) {
  const names = ['state', ...columns.map((c) => c.name)];
  return sql`INSERT INTO ${sql.table(table)} (id, updated_at, ${sql.join(names.map((n) => sql.id(n)))})
    SELECT x.id, now(), ${sql.join([sql.ref('x.state'), ...columns.map((c) => columnValue(c.name, c.type))])}
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(${recordType(columns)})`;
}

async function updateRows(
  tx: Transaction<BoardDb>,
  table: string,
  columns: ColumnDef[],
  updates: { id: string; patch: Row }[],
  nowUs: number,
): Promise<UpdatePayload> {
  const types = new Map(columns.map((c) => [c.name, c.type]));
  for (const u of updates) checkRow(u.patch, columns, 'patch');
  for (const u of updates) {
    const sets = Object.entries(u.patch).map(([name, value]) => {
      const type = name === 'state' ? 'TEXT' : types.get(name);
      if (type === 'TIMESTAMP' && value !== null) {
        return sql`${sql.id(name)} = 'epoch'::timestamptz + ${value}::bigint * interval '1 microsecond'`;
      }
      return sql`${sql.id(name)} = ${value}::${sql.raw(PG_TYPES[type ?? 'TEXT'])}`;
    });
    const result = await sql`UPDATE ${sql.table(table)} SET ${sql.join([sql`updated_at = now()`, ...sets])}
      WHERE id = ${u.id}`.execute(tx);
    if (Number(result.numAffectedRows ?? 0) === 0) {
      throw boardError('RowNotFound', `no row with id "${u.id}"; nothing was updated`);
    }
  }
  return { updatedAt: nowUs, updates };
}

async function deleteRows(tx: Transaction<BoardDb>, table: string, ids: string[]): Promise<DeletePayload> {
  const deleted = await sql<{ id: string }>`DELETE FROM ${sql.table(table)}
    WHERE id = ANY(${ids}::text[]) RETURNING id`.execute(tx);
  return { ids: deleted.rows.map((r) => r.id) };
}
