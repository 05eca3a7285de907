import type { Cell } from '@board/protocol';
import { DuckDBIntervalValue, type DuckDBPreparedStatement } from '@duckdb/node-api';

/**
 * Converts a DuckDB value to a wire cell: integers to numbers (decimal strings beyond 2^53),
 * timestamps to epoch microseconds, decimals to numbers, intervals to DuckDB's own text form
 * (`1 year 2 months 3 days 04:05:06.789`, `-01:30:00`: months, days and time are separate fields
 * of an interval and none converts to another), everything else to its text form.
 */
export function toCell(value: unknown): Cell {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : String(value);
    case 'bigint':
      return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
        ? Number(value)
        : value.toString();
    case 'object': {
      if (value instanceof DuckDBIntervalValue) return value.toString();
      const v = value as { micros?: unknown; toDouble?: () => number; toString(): string };
      if (typeof v.micros === 'bigint') return toCell(v.micros);
      if (typeof v.toDouble === 'function') return v.toDouble();
      return v.toString();
    }
    default:
      return String(value);
  }
}

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/**
 * Binds one cell as parameter `index` (1-based) with a type chosen here, not inferred by the
 * driver (which binds every integer-valued number as BIGINT, so `1e20` failed with `bigint out of
 * int64 range`): strings as VARCHAR, booleans as BOOLEAN, integer-valued numbers as INTEGER within
 * 32 bits and BIGINT within the safe-integer range (±2^53-1), every other number (fractions, and
 * integer-valued numbers beyond 2^53, which a JSON number cannot carry exactly anyway) as DOUBLE,
 * null as NULL.
 */
export function bindCell(prepared: DuckDBPreparedStatement, index: number, cell: Cell): void {
  if (cell === null) prepared.bindNull(index);
  else if (typeof cell === 'string') prepared.bindVarchar(index, cell);
  else if (typeof cell === 'boolean') prepared.bindBoolean(index, cell);
  else if (Number.isInteger(cell) && cell >= INT32_MIN && cell <= INT32_MAX)
    prepared.bindInteger(index, cell);
  else if (Number.isSafeInteger(cell)) prepared.bindBigInt(index, BigInt(cell));
  else prepared.bindDouble(index, cell);
}

/** Binds `params` as `$1`, `$2`, ... (see {@link bindCell}). */
export function bindCells(prepared: DuckDBPreparedStatement, params: Cell[]): void {
  for (let i = 0; i < params.length; i++) bindCell(prepared, i + 1, params[i] ?? null);
}
