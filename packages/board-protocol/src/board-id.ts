import { z } from 'zod';

/** Board ids are validated, never escaped: they become part of table names. */
export const BOARD_ID_PATTERN = /^[A-Za-z0-9_]{1,64}$/;

/** True when `value` is a valid board id (1 to 64 characters of `A-Za-z0-9_`). */
export function isBoardId(value: string): boolean {
  return BOARD_ID_PATTERN.test(value);
}

/** Zod schema of a board id. */
export const boardIdSchema = z
  .string()
  .regex(BOARD_ID_PATTERN, 'board id must be 1 to 64 characters of A-Za-z0-9_');
