import type { Cell, ColumnDef, ColumnType, Row } from '@board/protocol';
import { type DuckDBAppender, DuckDBTimestampValue } from '@duckdb/node-api';

/**
 * Appends one board row to a replica's appender in the table's column order: the base columns
 * (`id`, `updated_at`, `state`), then the user columns.
 */
export function appendRow(appender: DuckDBAppender, columns: ColumnDef[], row: Row, updatedAt: number): void {
  appendCell(appender, 'TEXT', row.id ?? null);
  appendCell(appender, 'TIMESTAMP', updatedAt);
  appendCell(appender, 'TEXT', row.state ?? null);
  for (const c of columns) appendCell(appender, c.type, row[c.name] ?? null);
  appender.endRow();
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

/** Closes an appender whose rows a rollback discards anyway (it may already be invalid). */
export function closeQuietly(appender: DuckDBAppender): void {
  try {
    appender.closeSync();
  } catch {
    // invalid after a failed append or flush: nothing to keep
  }
}
