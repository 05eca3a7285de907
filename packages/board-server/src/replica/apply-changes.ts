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
import type { DuckDBAppender, DuckDBConnection } from '@duckdb/node-api';
import { DUCK_TYPES } from '../boards/columns.js';
import { appendRow, closeQuietly } from './append-row.js';
import { bindCells } from './duck-values.js';
import { REPLICA_TABLE } from './query-guard.js';

/**
 * Writes change records (consecutive, starting at `from + 1`) to a replica's table on `conn`,
 * inside the caller's DuckDB transaction: inserts through an appender, updates and deletes by id,
 * `schema` records as added columns. Returns the watermark and the columns after the last record;
 * the caller records them (`replica_meta`) and commits, or rolls back when this throws.
 */
export async function applyChanges(
  conn: DuckDBConnection,
  records: ChangeRecord[],
  from: number,
  before: ColumnDef[],
): Promise<{ watermark: number; columns: ColumnDef[] }> {
  let watermark = from;
  let columns = before;
  let appender: DuckDBAppender | undefined;
  const flush = () => {
    appender?.closeSync();
    appender = undefined;
  };
  try {
    for (const rec of records) {
      if (rec.seq !== watermark + 1) throw new Error(`replica gap: at ${watermark}, got ${rec.seq}`);
      switch (rec.kind) {
        case 'insert': {
          const p = rec.payload as InsertPayload;
          appender ??= await conn.createAppender(REPLICA_TABLE);
          for (const row of p.rows) appendRow(appender, columns, row, p.updatedAt);
          break;
        }
        case 'update': {
          flush();
          const p = rec.payload as UpdatePayload;
          for (const u of p.updates) await updateRow(conn, columns, u.id, u.patch, p.updatedAt);
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
          const p = rec.payload as SchemaPayload;
          for (const c of p.columns) {
            if (columns.some((k) => k.name === c.name)) continue;
            await conn.run(`ALTER TABLE ${REPLICA_TABLE} ADD COLUMN "${c.name}" ${DUCK_TYPES[c.type]}`);
            columns = [...columns, c];
          }
          break;
        }
      }
      watermark = rec.seq;
    }
    flush();
    return { watermark, columns };
  } catch (err) {
    if (appender) closeQuietly(appender);
    throw err;
  }
}

async function updateRow(
  conn: DuckDBConnection,
  columns: ColumnDef[],
  id: string,
  patch: Row,
  updatedAt: number,
): Promise<void> {
  const types = new Map<string, ColumnType>(columns.map((c) => [c.name, c.type]));
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
  const stmt = await conn.prepare(
    `UPDATE ${REPLICA_TABLE} SET ${sets.join(', ')} WHERE id = $${values.length}`,
  );
  // Typed by the cell, not inferred by the driver: an integer-valued DOUBLE beyond 2^63 (`1e20`)
  // failed to bind as BIGINT, and the replica was rebuilt from the base table instead.
  bindCells(stmt, values);
  await stmt.run();
  stmt.destroySync();
}
