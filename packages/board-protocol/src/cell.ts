import { z } from 'zod';
import { textProblem, textSchema } from './text.js';

/** A cell: string, number, boolean or null. */
export type Cell = string | number | boolean | null;
/** A row: column name to cell. */
export type Row = Record<string, Cell>;

/**
 * Zod schema of a {@link Cell}. Numbers must be finite (JSON cannot carry NaN or Infinity anyway);
 * strings follow the text rule (no NUL, well-formed Unicode; see `text.ts`).
 */
export const cellSchema = z.union([textSchema('cell'), z.number().finite(), z.boolean(), z.null()]);
/** Zod schema of a {@link Row}: column names and string cells follow the text rule. */
export const rowSchema = z.record(z.string(), cellSchema).superRefine((row, ctx) => {
  for (const name of Object.keys(row)) {
    const problem = textProblem(name);
    if (problem) ctx.addIssue({ code: 'custom', message: `column name ${problem}` });
  }
});

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
