import { z } from 'zod';

/**
 * The text rule of the board service, written down once: every string a request carries (cells,
 * row ids, column names in rows, idempotency keys, update and delete ids, SQL text, query
 * parameters, placeholder tokens, a token's `sub`) is well-formed Unicode without NUL. PostgreSQL
 * text cannot hold U+0000, JSONB cannot hold a lone surrogate, and DuckDB's C API stops at the first
 * NUL; refusing them at the edge gives a precise `InvalidInput` instead of a store error.
 */
const LONE_SURROGATE = /\p{Cs}/u;

/** Why `value` breaks the text rule, or undefined when it follows it. */
export function textProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'must not contain NUL (U+0000)';
  if (LONE_SURROGATE.test(value)) return 'must be well-formed Unicode (no lone surrogate)';
  return undefined;
}

/**
 * A zod check for the text rule, optionally with a pattern on top (`rule` names what the
 * pattern requires, for the message).
 */
function textCheck(what: string, pattern?: { regex: RegExp; rule: string }) {
  return (value: string, ctx: z.RefinementCtx): void => {
    const problem = textProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: `${what} ${problem}` });
    else if (pattern && !pattern.regex.test(value)) {
      ctx.addIssue({
        code: 'custom',
        message: `${what}: ${pattern.rule} (got ${[...value].length} characters)`,
      });
    }
  };
}

/** Zod schema of a string that follows the text rule ({@link textProblem}); `what` names it in messages. */
export function textSchema(what = 'text'): z.ZodString {
  return z.string().superRefine(textCheck(what));
}

/**
 * Largest text cell a row may store, in UTF-8 bytes (64 KiB). Chosen below DuckDB's 256 KiB storage
 * block with room to spare: a replica keeps a string longer than a block as a chain of blocks it
 * cannot spill, and such strings piled up until a replica's memory limit was exhausted (README,
 * "Sizes of cells and mutations").
 */
export const MAX_TEXT_CELL_BYTES = 64 * 1024;

/**
 * Largest total of text a mutation may store, in UTF-8 bytes of its string cells (8 MiB): one
 * mutation is one change record, which a replica applies in one DuckDB transaction, so this bounds
 * the memory that transaction needs (and bounds a row's text too).
 */
export const MAX_MUTATION_TEXT_BYTES = 8 * 1024 * 1024;

/**
 * UTF-8 length of `value` in bytes, counting at most up to `stopAbove + 1` (so a huge string costs no
 * more than the bound to check). Lone surrogates (refused by the text rule) count 3 bytes, as
 * their replacement character would.
 */
export function utf8Length(value: string, stopAbove = Number.POSITIVE_INFINITY): number {
  let bytes = 0;
  for (let i = 0; i < value.length && bytes <= stopAbove; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < value.length) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

/** Longest row id, in characters (code points): 256 x 4 bytes stays far below PostgreSQL's index row limit. */
export const MAX_ROW_ID_LENGTH = 256;
/**
 * Row ids: 1 to 256 characters, none of them a control character (Unicode Cc: U+0000-U+001F,
 * U+007F-U+009F), plus the text rule. For inserted `id`s, update ids and delete ids alike.
 */
export const ROW_ID_PATTERN = /^[^\p{Cc}]{1,256}$/u;
/** Zod schema of a row id ({@link ROW_ID_PATTERN} plus the text rule). */
export const rowIdSchema = z.string().superRefine(
  textCheck('row id', {
    regex: ROW_ID_PATTERN,
    rule: `row ids are 1 to ${MAX_ROW_ID_LENGTH} characters without control characters`,
  }),
);

/** Longest idempotency key, in characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 200;
/** Idempotency keys: 1 to 200 characters, no control characters, plus the text rule. */
export const IDEMPOTENCY_KEY_PATTERN = /^[^\p{Cc}]{1,200}$/u;
/** Zod schema of an idempotency key ({@link IDEMPOTENCY_KEY_PATTERN} plus the text rule). */
export const idempotencyKeySchema = z.string().superRefine(
  textCheck('idempotency key', {
    regex: IDEMPOTENCY_KEY_PATTERN,
    rule: `idempotency keys are 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters without control characters`,
  }),
);
