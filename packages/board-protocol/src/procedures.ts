import { z } from 'zod';
import { cellSchema, type Row, rowSchema, textBytes } from './cell.js';
import {
  idempotencyKeySchema,
  MAX_MUTATION_TEXT_BYTES,
  ROW_ID_PATTERN,
  rowIdSchema,
  textProblem,
  textSchema,
} from './text.js';

/** Placeholder token names in query SQL: `{{name}}`, name 1 to 32 characters of `A-Za-z0-9_`. */
export const TOKEN_NAME_PATTERN = /^[A-Za-z0-9_]{1,32}$/;
/** Matches every `{{name}}` placeholder in a SQL string (global; reset `lastIndex` or use `matchAll`). */
export const PLACEHOLDER_PATTERN = /\{\{([^{}]*)\}\}/g;
/** The one entity a board has. */
export const ENTITY = 'items';

const idempotencyKey = idempotencyKeySchema.optional();
/** Largest number of rows, patches or ids in one mutation. */
export const MAX_ROWS_PER_MUTATION = 10_000;
/** Largest SQL text accepted by `query.execute`, in characters. */
export const MAX_SQL_LENGTH = 100_000;
/** Largest page `changes.read` returns. */
export const MAX_CHANGES_PAGE = 1_000;
/**
 * Bytes of change records (their payloads' JSON text, as the store prints it) a `changes.read` page
 * or a watch catch-up page holds at most, beyond its first record: a page always carries at least
 * one record, so a consumer always progresses, and never more than about 4 MiB plus one record.
 */
export const CHANGES_PAGE_BYTES = 4 * 1024 * 1024;

/** `MAX_MUTATION_TEXT_BYTES` as a zod check over a mutation's rows or patches. */
function mutationTextCheck<T>(rowsOf: (input: T) => Iterable<Row>) {
  return (input: T, ctx: z.RefinementCtx): void => {
    const bytes = textBytes(rowsOf(input));
    if (bytes > MAX_MUTATION_TEXT_BYTES) {
      ctx.addIssue({
        code: 'custom',
        message: `a mutation stores at most ${MAX_MUTATION_TEXT_BYTES} bytes of UTF-8 text in its cells (got ${bytes}); split it`,
      });
    }
  };
}

/** Input of `query.execute`. */
export const queryExecuteInput = z.strictObject({
  sql: textSchema('sql').min(1).max(MAX_SQL_LENGTH),
  tables: z
    .array(
      z.strictObject({
        token: z.string().regex(TOKEN_NAME_PATTERN, 'token names are 1 to 32 characters of A-Za-z0-9_'),
        entity: textSchema('entity').max(200),
      }),
    )
    .max(32)
    .default([]),
  params: z.array(cellSchema).max(1000).default([]),
  minWatermark: z.number().int().nonnegative().optional(),
});

/**
 * A row to insert: a {@link rowSchema} whose `id`, when it is a string, is a valid row id (a missing
 * or non-string id is the handler's `InvalidCell`).
 */
const insertRowSchema = rowSchema.superRefine((row, ctx) => {
  const id = row.id;
  if (typeof id !== 'string' || textProblem(id) !== undefined) return;
  if (!ROW_ID_PATTERN.test(id)) {
    const parsed = rowIdSchema.safeParse(id);
    for (const issue of parsed.error?.issues ?? []) {
      ctx.addIssue({ code: 'custom', message: issue.message, path: ['id'] });
    }
  }
});

/** Input of `mutate.insert`. */
export const mutateInsertInput = z
  .strictObject({
    rows: z.array(insertRowSchema).min(1).max(MAX_ROWS_PER_MUTATION),
    idempotencyKey,
  })
  .superRefine(mutationTextCheck((input: { rows: Row[] }) => input.rows));

/** Input of `mutate.update`: single-row patches applied as one atomic write. */
export const mutateUpdateInput = z
  .strictObject({
    updates: z
      .array(z.strictObject({ id: rowIdSchema, patch: rowSchema }))
      .min(1)
      .max(MAX_ROWS_PER_MUTATION),
    idempotencyKey,
  })
  .superRefine(
    mutationTextCheck((input: { updates: { patch: Row }[] }) => input.updates.map((u) => u.patch)),
  );

/** Input of `mutate.delete`. */
export const mutateDeleteInput = z.strictObject({
  ids: z.array(rowIdSchema).min(1).max(MAX_ROWS_PER_MUTATION),
  idempotencyKey,
});

/** Input of `changes.read`: records with `seq > after`, at most `limit` of them. */
export const changesReadInput = z.strictObject({
  after: z.number().int().nonnegative(),
  limit: z.number().int().min(1).max(MAX_CHANGES_PAGE).default(100),
});

/** Input of `node.stats`: nothing (an empty object, or no body at all). */
export const nodeStatsInput = z.strictObject({});

/** Capability verbs. */
export const VERBS = ['read', 'write'] as const;
/** A capability verb. */
export type Verb = (typeof VERBS)[number];

/** Every procedure: its input schema and the verb a token needs on the board. */
export const PROCEDURES = {
  'query.execute': { input: queryExecuteInput, verb: 'read' },
  'mutate.insert': { input: mutateInsertInput, verb: 'write' },
  'mutate.update': { input: mutateUpdateInput, verb: 'write' },
  'mutate.delete': { input: mutateDeleteInput, verb: 'write' },
  'changes.read': { input: changesReadInput, verb: 'read' },
  'node.stats': { input: nodeStatsInput, verb: 'read' },
} as const satisfies Record<string, { input: z.ZodType; verb: Verb }>;

/** A procedure name. */
export type ProcedureName = keyof typeof PROCEDURES;
/** Input type of a procedure (after defaults are applied). */
export type ProcedureInput<P extends ProcedureName> = z.output<(typeof PROCEDURES)[P]['input']>;

/** True when `name` is a procedure of the contract. */
export function isProcedureName(name: string): name is ProcedureName {
  return Object.hasOwn(PROCEDURES, name);
}

/** Procedures a client may retry without an idempotency key (reads). */
export const IDEMPOTENT_PROCEDURES: readonly ProcedureName[] = [
  'query.execute',
  'changes.read',
  'node.stats',
];

/** The mutations: retryable only when they carry an idempotency key. */
export const MUTATION_PROCEDURES: readonly ProcedureName[] = [
  'mutate.insert',
  'mutate.update',
  'mutate.delete',
];

/**
 * The retry-eligibility rule of the contract, used by the client (before re-sending after a
 * transport failure) and by the router (before hedging or failing over): reads may always be sent
 * again; a mutation only when it carries an `idempotencyKey` (`keyed`; on the wire, the
 * `x-data-idempotent` header, see {@link isIdempotentMark}); anything else (an unknown procedure)
 * never.
 *
 * @example
 * mayRetry('query.execute', false); // true
 * mayRetry('mutate.insert', false); // false
 * mayRetry('mutate.insert', true); // true
 */
export function mayRetry(procedure: string, keyed: boolean): boolean {
  if (!isProcedureName(procedure)) return false;
  if (IDEMPOTENT_PROCEDURES.includes(procedure)) return true;
  return keyed && MUTATION_PROCEDURES.includes(procedure);
}

/** The value a client sends in `x-data-idempotent` exactly when the body carries an `idempotencyKey`. */
export const IDEMPOTENT_MARK = 'true';

/**
 * Whether an `x-data-idempotent` header value marks the request as keyed: any value but absent,
 * empty or `false` (the router reads the header, never the body).
 */
export function isIdempotentMark(value: string | string[] | undefined | null): boolean {
  return typeof value === 'string' && value !== '' && value !== 'false';
}
