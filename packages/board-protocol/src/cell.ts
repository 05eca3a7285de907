import { z } from 'zod';
import { MAX_TEXT_CELL_BYTES, textProblem, textSchema, utf8Length } from './text.js';

/** A cell: string, number, boolean or null. */
export type Cell = string | number | boolean | null;
/** A row: column name to cell. */
export type Row = Record<string, Cell>;

/**
 * Zod schema of a {@link Cell}. Numbers must be finite (JSON cannot carry NaN or Infinity anyway);
 * strings follow the text rule (no NUL, well-formed Unicode; see `text.ts`).
 */
export const cellSchema = z.union([textSchema('cell'), z.number().finite(), z.boolean(), z.null()]);
/**
 * Zod schema of a stored cell (in an inserted row or an update patch): a {@link cellSchema} whose
 * string is at most {@link MAX_TEXT_CELL_BYTES} UTF-8 bytes.
 */
export const storedCellSchema = cellSchema.superRefine((value, ctx) => {
  if (typeof value !== 'string' || value.length * 3 <= MAX_TEXT_CELL_BYTES) return;
  if (utf8Length(value, MAX_TEXT_CELL_BYTES) > MAX_TEXT_CELL_BYTES) {
    ctx.addIssue({
      code: 'custom',
      message: `a text cell holds at most ${MAX_TEXT_CELL_BYTES} bytes of UTF-8 (this one has more: ${value.length} UTF-16 code units)`,
    });
  }
});

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Zod schema of a {@link Row}: column name to stored cell; column names and string cells follow the
 * text rule. Parsed into an object without a prototype, key by key, so that every key the client
 * sent reaches the column check, `__proto__` included (zod's `record` would assign it, which sets
 * the prototype and silently drops the key), and no key can reach `Object.prototype`.
 */
export const rowSchema = z
  .custom<Record<string, unknown>>(isPlainObject, 'expected an object of column name to cell')
  .transform((input, ctx): Row => {
    const row = Object.create(null) as Row;
    for (const name of Object.keys(input)) {
      const problem = textProblem(name);
      if (problem) ctx.addIssue({ code: 'custom', message: `column name ${problem}` });
      // An inserted `id` is held to the row id rule instead (256 characters); a patch may not name it.
      const cell = (name === 'id' ? cellSchema : storedCellSchema).safeParse(input[name]);
      if (!cell.success) {
        for (const issue of cell.error.issues) {
          ctx.addIssue({ code: 'custom', message: issue.message, path: [name, ...issue.path] });
        }
        continue;
      }
      Object.defineProperty(row, name, {
        value: cell.data,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return row;
  });

/** UTF-8 bytes of the string cells of `rows` (see `MAX_MUTATION_TEXT_BYTES`). */
export function textBytes(rows: Iterable<Row>): number {
  let bytes = 0;
  for (const row of rows) {
    for (const name of Object.keys(row)) {
      const value = row[name];
      if (typeof value === 'string') bytes += utf8Length(value);
    }
  }
  return bytes;
}

/** The base columns every board has, in table order. */
export const BASE_COLUMNS = ['id', 'updated_at', 'state'] as const;

/**
 * Types an operator may give a user column. `TEXT` holds strings, `INTEGER` 64-bit integers
 * (read back as numbers when within 2^53, else as decimal strings), `DOUBLE` floating point,
 * `BOOLEAN` true/false, `TIMESTAMP` epoch microseconds UTC (written and read as integers).
 */
export const COLUMN_TYPES = ['TEXT', 'INTEGER', 'DOUBLE', 'BOOLEAN', 'TIMESTAMP'] as const;
/** A user column type. */
export type ColumnType = (typeof COLUMN_TYPES)[number];

/** User column names: lower-case identifiers, never one of the base columns. */
export const COLUMN_NAME_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;

/** A user column declaration. */
export interface ColumnDef {
  name: string;
  type: ColumnType;
}

/** Zod schema of a {@link ColumnDef}. */
export const columnDefSchema = z.object({
  name: z
    .string()
    .regex(
      COLUMN_NAME_PATTERN,
      'column names are 1 to 63 characters of a-z, 0-9 and _, not starting with a digit',
    )
    .refine(
      (n) => !(BASE_COLUMNS as readonly string[]).includes(n),
      'id, updated_at and state are base columns',
    ),
  type: z.enum(COLUMN_TYPES),
});
