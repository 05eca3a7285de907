import { BASE_COLUMNS, type Cell, type ColumnDef, type ColumnType, columnDefSchema } from '@board/protocol';
import { z } from 'zod';
import { boardError } from '../errors.js';

/** PostgreSQL type of each user column type. */
export const PG_TYPES: Record<ColumnType, string> = {
  TEXT: 'text',
  INTEGER: 'bigint',
  DOUBLE: 'double precision',
  BOOLEAN: 'boolean',
  TIMESTAMP: 'timestamptz',
};

/** DuckDB type of each user column type. */
export const DUCK_TYPES: Record<ColumnType, string> = {
  TEXT: 'VARCHAR',
  INTEGER: 'BIGINT',
  DOUBLE: 'DOUBLE',
  BOOLEAN: 'BOOLEAN',
  TIMESTAMP: 'TIMESTAMP',
};

/** Parses the `columns` jsonb of `board_boards`. */
export function parseColumns(raw: unknown): ColumnDef[] {
  return z.array(columnDefSchema).parse(raw);
}

/** Parses `name:TYPE` as given to `board create --column`. */
export function parseColumnSpec(spec: string): ColumnDef {
  const [name = '', type = ''] = spec.split(':');
  const parsed = columnDefSchema.safeParse({ name, type: type.toUpperCase() });
  if (!parsed.success) {
    throw boardError(
      'InvalidInput',
      `column "${spec}": ${parsed.error.issues[0]?.message} (expected name:TYPE)`,
    );
  }
  return parsed.data;
}

/** Checks one cell against a column type; throws `InvalidCell` with a message naming the column. */
export function checkCell(column: string, type: ColumnType | 'ID' | 'STATE', value: Cell): void {
  const fail = (expected: string) => {
    throw boardError(
      'InvalidCell',
      `column "${column}" expects ${expected}, got ${value === null ? 'null' : typeof value} ${JSON.stringify(value)}`,
    );
  };
  if (type === 'ID') {
    if (typeof value !== 'string' || value.length === 0) fail('a non-empty string id');
    return;
  }
  if (value === null) return;
  switch (type) {
    case 'STATE':
    case 'TEXT':
      if (typeof value !== 'string') fail('a string or null');
      return;
    case 'INTEGER':
    case 'TIMESTAMP':
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
        fail(type === 'TIMESTAMP' ? 'epoch microseconds (an integer) or null' : 'an integer or null');
      }
      return;
    case 'DOUBLE':
      if (typeof value !== 'number') fail('a number or null');
      return;
    case 'BOOLEAN':
      if (typeof value !== 'boolean') fail('a boolean or null');
      return;
  }
}

/**
 * Checks the cells of a row or patch against the board's columns. `id` and `updated_at` are
 * refused in patches (`ReadOnlyColumn`); `updated_at` is refused in inserted rows too.
 */
export function checkRow(row: Record<string, Cell>, columns: ColumnDef[], mode: 'insert' | 'patch'): void {
  const types = new Map(columns.map((c) => [c.name, c.type]));
  if (mode === 'insert') checkCell('id', 'ID', row.id ?? null);
  for (const [name, value] of Object.entries(row)) {
    if (name === 'updated_at')
      throw boardError('ReadOnlyColumn', 'updated_at is set by the engine on every write');
    if (name === 'id') {
      if (mode === 'patch') throw boardError('ReadOnlyColumn', 'id cannot be changed by an update');
      continue;
    }
    if (name === 'state') {
      checkCell('state', 'STATE', value);
      continue;
    }
    const type = types.get(name);
    if (type === undefined) {
      const known = [...BASE_COLUMNS, ...columns.map((c) => c.name)].join(', ');
      throw boardError('UnknownColumn', `unknown column "${name}" (columns: ${known})`);
    }
    checkCell(name, type, value);
  }
}
