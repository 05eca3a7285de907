import type { Cell } from '@board/protocol';
import {
  DuckDBDateValue,
  DuckDBDecimalValue,
  type DuckDBPreparedStatement,
  DuckDBTimestampMillisecondsValue,
  DuckDBTimestampNanosecondsValue,
  DuckDBTimestampSecondsValue,
  DuckDBTimestampTZValue,
  DuckDBTimestampValue,
} from '@duckdb/node-api';

/**
 * Converts a DuckDB value to a wire cell (README, "Result values"), the one place query results are
 * encoded:
 * - integers: numbers (decimal strings beyond ±2^53);
 * - `DOUBLE`, `FLOAT`, `DECIMAL`: numbers (a non-finite one the string `Infinity`, `-Infinity` or
 *   `NaN`);
 * - `TIMESTAMP` and `TIMESTAMP WITH TIME ZONE`: epoch microseconds (UTC);
 * - every other type its DuckDB text form: `TIME` `12:34:56.789` (`24:00:00` too), `TIME WITH TIME
 *   ZONE` `12:34:56.789+02:30`, `DATE` `2024-02-29`, `INTERVAL` `1 year 2 months 3 days
 *   04:05:06.789` (months, days and time are separate fields of an interval and none converts to
 *   another, so no single number is faithful), UUIDs, blobs, lists, structs...;
 * - an infinite date or timestamp of any precision: `infinity` or `-infinity`, as DuckDB and
 *   PostgreSQL print it (the driver's value for it is a sentinel, not a date).
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
      if (value instanceof DuckDBTimestampValue || value instanceof DuckDBTimestampTZValue) {
        return value.isFinite ? toCell(value.micros) : infinity(value.micros);
      }
      if (value instanceof DuckDBDecimalValue) return value.toDouble();
      const instant = instantOf(value);
      if (instant !== undefined) return instant.isFinite ? value.toString() : infinity(instant.count);
      // TIME and TIME WITH TIME ZONE carry `micros` too, but are times of day: their text form.
      return value.toString();
    }
    default:
      return String(value);
  }
}

/** Dates and timestamps of other precisions: whether finite, and their count (days, seconds, ...). */
function instantOf(value: object): { isFinite: boolean; count: number | bigint } | undefined {
  if (value instanceof DuckDBDateValue) return { isFinite: value.isFinite, count: value.days };
  if (value instanceof DuckDBTimestampSecondsValue) return { isFinite: value.isFinite, count: value.seconds };
  if (value instanceof DuckDBTimestampMillisecondsValue)
    return { isFinite: value.isFinite, count: value.millis };
  if (value instanceof DuckDBTimestampNanosecondsValue)
    return { isFinite: value.isFinite, count: value.nanos };
  return undefined;
}

function infinity(count: number | bigint): string {
  return count > 0 ? 'infinity' : '-infinity';
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
