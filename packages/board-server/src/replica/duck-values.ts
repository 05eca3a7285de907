import type { Cell } from '@board/protocol';

/**
 * Converts a DuckDB value to a wire cell: integers to numbers (decimal strings beyond 2^53),
 * timestamps to epoch microseconds, decimals to numbers, everything else to its text form.
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
      const v = value as { micros?: unknown; toDouble?: () => number; toString(): string };
      if (typeof v.micros === 'bigint') return toCell(v.micros);
      if (typeof v.toDouble === 'function') return v.toDouble();
      return v.toString();
    }
    default:
      return String(value);
  }
}
